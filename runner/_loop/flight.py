"""A run's tool calls in flight on worker threads: hand them over, and wait for the next to end.

The sync driver and replay perform ``RunTools`` with a ``ThreadFlight``. Each call gets a daemon
thread, as one call under a deadline does: a tool that never returns holds neither the run past
its deadline nor the process at exit. The loop hands over at most ``max_parallel_tools`` at once,
so that bounds the threads a run keeps busy (a call given up on may still run on in its thread).
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .results import CallTool, Outcome, RunTools

if TYPE_CHECKING:
    from .core import AgentCore

# How often a wait wakes up to look at the cancel event.
CANCEL_POLL_S = 0.01


class Running:
    """One call on its worker thread: when it started, when its own timeout ends, and what it gave."""

    __slots__ = ("call_id", "ends_by", "error", "started", "value")

    def __init__(self, call_id: str, started: float, ends_by: float) -> None:
        self.call_id, self.started, self.ends_by = call_id, started, ends_by
        self.value: Any = None
        self.error: BaseException | None = None


class ThreadFlight:
    """The calls of ``core``'s run in flight, each on its own daemon thread."""

    def __init__(self, core: AgentCore) -> None:
        self.core = core
        self.running: dict[str, Running] = {}  # in the order they were handed over
        self.ended: queue.SimpleQueue[Running] = queue.SimpleQueue()
        self.ready: deque[Outcome] = deque()  # answered without running (replay serves a side effect's result)

    @property
    def busy(self) -> bool:
        """Whether a call handed over has not been reported yet."""
        return bool(self.running or self.ready)

    def perform(self, action: RunTools) -> Outcome:
        """``RunTools``: start its calls, then the outcome of the next call to end."""
        for call in action.start:
            self.start(call)
        return self.next()

    def start(self, action: CallTool) -> None:
        """Run ``action``'s tool on a new daemon thread."""
        started, timeout_s = time.monotonic(), action.tool.timeout_s
        running = Running(action.call.id, started, started + timeout_s if timeout_s is not None else math.inf)
        self.running[running.call_id] = running
        fn, kwargs, ended = action.tool.fn, action.args, self.ended

        def target() -> None:
            try:
                running.value = fn(**kwargs)
            except BaseException as exc:  # handed to the loop's thread, never lost in this one
                running.error = exc
            finally:
                ended.put(running)

        threading.Thread(target=target, name=f"runner-{self.core.run_id[:8]}-{running.call_id[:16]}",
                         daemon=True).start()

    def answer(self, outcome: Outcome) -> None:
        """Report ``outcome`` (its ``call_id`` set) as the next to end, without running anything."""
        self.ready.append(outcome)

    def next(self) -> Outcome:
        """The outcome of the next call to end; one cut short when the deadline or a cancel ends the wait.

        A call past its tool's ``timeout_s`` is reported timed out. A tool that raised ``SystemExit``
        or ``KeyboardInterrupt`` raises it here, as if on this thread.
        """
        if self.ready:
            return self.ready.popleft()
        core = self.core
        run_end = core.deadline if core.deadline is not None else math.inf
        while True:
            ends_by = min((running.ends_by for running in self.running.values()), default=math.inf)
            wait = min(ends_by, run_end) - time.monotonic()
            if core.watches_cancel(True):
                wait = min(wait, CANCEL_POLL_S)
            try:
                running = self.ended.get(timeout=bounded(wait))
            except queue.Empty:
                pass
            else:
                if self.running.get(running.call_id) is not running:
                    continue  # a call given up on already, ending late
                del self.running[running.call_id]
                return _outcome(running, time.monotonic() - running.started)
            now = time.monotonic()
            stop = core.stop_requested(True)
            for running in self.running.values():
                if stop or now >= running.ends_by:
                    del self.running[running.call_id]
                    if stop:
                        return Outcome(stop=stop, elapsed_s=now - running.started, call_id=running.call_id)
                    return Outcome(timed_out=True, elapsed_s=now - running.started, call_id=running.call_id)


def bounded(wait: float) -> float | None:
    """A wait of ``wait`` seconds as a lock's timeout: None for ever; past ``threading.TIMEOUT_MAX``, that much.

    A longer timeout overflows the platform's clock (``OverflowError``); the caller's loop just waits again.
    """
    return None if wait == math.inf else min(max(wait, 0.0), threading.TIMEOUT_MAX)


def _outcome(running: Running, elapsed_s: float) -> Outcome:
    error = running.error
    if error is None:
        return Outcome(value=running.value, elapsed_s=elapsed_s, call_id=running.call_id)
    if not isinstance(error, Exception):
        raise error  # SystemExit, KeyboardInterrupt: as if raised on this thread
    return Outcome(error=error, elapsed_s=elapsed_s, call_id=running.call_id)


def with_call(outcome: Outcome, call_id: str) -> Outcome:
    """``outcome`` as the outcome of call ``call_id``."""
    return dataclasses.replace(outcome, call_id=call_id)
