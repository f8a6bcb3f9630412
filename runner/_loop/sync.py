"""The synchronous driver: perform a run's actions on this thread, or on worker threads when something may stop it.

With nothing to stop them, calls run on the caller's thread, but a stored run's model calls (a cancel
request may abandon them). Otherwise a call is a flight of one on a daemon thread, waited on for the time
that remains (the driver's deadline, from when it is made), so a call that never returns cannot hold the
run; a reply's calls run together (``flight``). A tool call given up on that returns later has its result
logged once the run has ended (``late``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

from .actions import COMMITTED, GO_ON, Action, CallModel, CallTool, Checkpoint, Commit, Outcome, RunTools
from .children import tool_fn
from .core import AgentCore
from .drive import drive, ended
from .flight import ThreadFlight
from .late import LateLog
from .results import AgentResult
from .stream import DeltaSink, Streaming, consume, stream_of
from .waits import waits_of

_NO_ARGS: tuple[Any, ...] = ()
_NO_KWARGS: dict[str, Any] = {}


class SyncDriver:
    """Performs one run's actions on this thread and its flight's: ``perform`` for ``drive``."""

    __slots__ = ("core", "flight", "here", "late", "model_here", "sync", "waits")

    def __init__(self, core: AgentCore) -> None:
        self.core, self.sync = core, core.recorder.sync
        self.waits = waits_of(core.limits, core.cancel, time.monotonic(), core.watch)
        self.here = not self.waits.needed_for(True)  # nothing can stop a tool call early: run it on this thread
        self.model_here = not self.waits.needed_for(False)
        self.late = LateLog(core.state, core.limits, core.late) if core.late is not None else None
        self.flight = ThreadFlight(core.run_id, self.waits, self.late, core.children)

    def perform(self, action: Action) -> Outcome:
        """The outcome of one of the core's actions."""
        match action:
            case CallModel():
                streaming = self.core.streaming
                stream = stream_of(action.model) if streaming is not None else None
                if stream is not None:
                    assert streaming is not None
                    return self.streamed(action, stream, streaming)
                if self.model_here:
                    return self.call(action.model, (action.messages, action.specs), _NO_KWARGS, None, False)
                return self.flight.one(action.model, (action.messages, action.specs), _NO_KWARGS, None, False)
            case CallTool():
                fn = tool_fn(action, self.waits, self.core.children)
                return self.call(fn, _NO_ARGS, action.args, action.tool.timeout_s, True, action)
            case Commit():
                self.sync()
                return COMMITTED
            case RunTools():
                return self.flight.perform(action)
            case Checkpoint():
                return self.at_checkpoint()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None,
             in_tool: bool, tool: CallTool | None = None) -> Outcome:
        """One model or ``tool`` call: here when nothing can stop it early, else as a flight of one."""
        if timeout_s is None and self.here:  # on this thread: nothing to wait for
            started = time.monotonic()
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                return Outcome(error=exc, elapsed_s=time.monotonic() - started)
            return Outcome(value=value, elapsed_s=time.monotonic() - started)
        return self.flight.one(fn, args, kwargs, timeout_s, in_tool, tool)

    def streamed(self, action: CallModel, stream: Callable[..., Iterator[object]], streaming: Streaming) -> Outcome:
        """A model call consumed piece by piece on the flight's lane, its pieces told and logged on this thread."""
        sink = DeltaSink(self.core, action.step, streaming, self.sync)
        fn = functools.partial(consume, stream, self.flight.piece)
        try:
            outcome = self.flight.one(fn, (action.messages, action.specs), _NO_KWARGS, None, False, sink=sink)
        finally:  # Ctrl-C too: the text that came is logged, committed as the run closes
            first = sink.close()
        # Timed on this thread after the hand-over: never past the call's own latency.
        return outcome if first is None else dataclasses.replace(outcome, first_chunk_s=min(first, outcome.elapsed_s))

    def ended(self) -> None:
        """The run has ended: the results of calls given up on may be logged as they come."""
        if self.late is not None:
            self.late.end()

    def at_checkpoint(self) -> Outcome:
        """A ``Checkpoint``'s answer from the deadline and the cancel event: stop now, or go on."""
        status = self.waits.stop(time.monotonic())
        return Outcome(stop=status) if status else GO_ON


def run_core(core: AgentCore) -> AgentResult:
    """Drive ``core`` on this thread until it returns its result (late results are logged after it)."""
    driver = SyncDriver(core)
    try:
        return ended(drive(core, driver.perform))
    finally:
        driver.ended()


def drive_until(core: AgentCore, halt: Callable[[Action], bool]) -> AgentResult | None:
    """``run_core``, but give up without a word before any action ``halt`` picks: None then.

    Nothing is recorded after that point, as if the process had died there (tests
    use it to leave a run as a killed process would).
    """
    perform = SyncDriver(core).perform

    def until(action: Action) -> Outcome | None:
        return None if halt(action) else perform(action)

    return drive(core, until)
