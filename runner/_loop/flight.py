"""A run's calls in flight on worker threads: hand them over, and wait for the next to end.

The sync driver and replay perform ``RunTools`` with a ``ThreadFlight``, and a single call under a
deadline, a timeout or a cancel as a flight of one. Each call gets a daemon thread: a call that never
returns holds neither the run past its deadline nor the process at exit. The loop hands over at most
``max_parallel_tools`` at once, which bounds a run's busy threads (a call given up on may run on: what
it gives then goes to the ``late`` log). How long to wait is ``waits``' rule.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .actions import CallTool, Outcome, RunTools
from .children import Children, tool_fn
from .late import LateCall, LateLog
from .stream import DeltaSink, Piece
from .waits import Waits, call_ends, expired, lock_timeout, next_wait


class Running:
    """One call on its worker thread: when it started, when its own timeout ends, and what it gave.

    ``late`` names a tool call whose result is logged should it come after the call was given up on.
    Its lock orders the two ends: the call ending (``finish``) and the driver giving up on it (``give_up``).
    """

    __slots__ = ("call_id", "done", "ends_by", "error", "given_up", "late", "lock", "started", "value")

    def __init__(self, call_id: str | None, started: float, ends_by: float, late: LateCall | None = None) -> None:
        self.call_id, self.started, self.ends_by, self.late = call_id, started, ends_by, late
        self.value: Any = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.done = self.given_up = False

    def finish(self, ended: queue.SimpleQueue[Running | Piece]) -> bool:
        """The call ended: report it on ``ended``, unless it was given up on (True then)."""
        with self.lock:
            self.done = True
            if not self.given_up:
                ended.put(self)
            return self.given_up

    def give_up(self) -> bool:
        """Stop waiting on the call; False when it has ended already (its outcome is on the queue)."""
        with self.lock:
            self.given_up = not self.done
            return self.given_up


class Lane:
    """One daemon thread that runs a run's model calls one after another, while none is left hanging.

    Starting a thread per model call cost a stored run a seventh of a step's instructions. A call
    given up on keeps the lane ``busy`` until it returns, and the calls after it get threads of their own.
    """

    def __init__(self, name: str) -> None:
        self.busy = False
        self.inbox: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (job := self.inbox.get()) is not None:
            job()

    def hand(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the lane's thread (which must not be ``busy``); the job sets ``busy`` back."""
        self.busy = True
        self.inbox.put(job)

    def close(self) -> None:
        """Let the thread end once its call returns."""
        self.inbox.put(None)


class ThreadFlight:
    """The calls of run ``run_id`` in flight, each on its own daemon thread; ``waits`` says how long to wait.

    ``children`` runs a sub-agent's call as its child run (``_loop.children``).
    """

    def __init__(self, run_id: str, waits: Waits, late: LateLog | None = None,
                 children: Children | None = None) -> None:
        self.run_id, self.waits, self.late, self.children = run_id, waits, late, children
        self.running: dict[str | None, Running] = {}  # in the order they were handed over
        self.ended: queue.SimpleQueue[Running | Piece] = queue.SimpleQueue()  # and a streamed reply's pieces
        self.ready: deque[Outcome] = deque()  # answered without running (replay serves a side effect's result)
        self.lane: Lane | None = None  # the single calls' thread, made at the first

    @property
    def busy(self) -> bool:
        """Whether a call handed over has not been reported yet."""
        return bool(self.running or self.ready)

    def perform(self, action: RunTools) -> Outcome:
        """``RunTools``: start its calls, then the outcome of the next call to end."""
        for call in action.start:
            self.start(call)
        return self.next()

    def one(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None,
            in_tool: bool, tool: CallTool | None = None, sink: DeltaSink | None = None) -> Outcome:
        """A single model or ``tool`` call, as a flight of one: its outcome (no ``call_id``).

        ``sink``: a streamed reply's, told each piece the call hands over (``piece``) on this thread.
        """
        lane = None
        if not in_tool:  # a model call: given up on, it ends the run, so nothing waits behind it on the lane
            if self.lane is None:
                self.lane = Lane(f"runner-{self.run_id[:8]}")
                weakref.finalize(self, self.lane.close)
            lane = None if self.lane.busy else self.lane
        self.call(None, fn, args, kwargs, timeout_s, f"runner-{self.run_id[:8]}", self._late_call(tool), lane)
        return self.next(in_tool, sink)

    def piece(self, text: str) -> None:
        """Hand a piece of a streamed reply to the driver's thread (from the model call's worker)."""
        self.ended.put(Piece(text))

    def start(self, action: CallTool) -> None:
        """Run ``action``'s tool on a new daemon thread."""
        call_id = action.call.id
        self.call(call_id, tool_fn(action, self.waits, self.children), (), action.args, action.tool.timeout_s,
                  f"runner-{self.run_id[:8]}-{call_id[:16]}", self._late_call(action))

    def _late_call(self, tool: CallTool | None) -> LateCall | None:
        return self.late.call_of(tool) if self.late is not None and tool is not None else None

    def call(self, call_id: str | None, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             timeout_s: float | None, name: str, late: LateCall | None = None, lane: Lane | None = None) -> None:
        """Run ``fn(*args, **kwargs)`` on ``lane``, or a new daemon thread named ``name``, as call ``call_id``.

        Should the call end after it was given up on, ``late`` names it to the flight's late log.
        """
        started = time.monotonic()
        running = Running(call_id, started, call_ends(started, timeout_s), late)
        self.running[call_id] = running
        ended, log = self.ended, self.late

        def target() -> None:
            try:
                running.value = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the loop's thread, never lost in this one
                running.error = exc
            finally:
                if lane is not None:
                    lane.busy = False  # before the driver hears of the end: its next call may take the lane
                if running.finish(ended) and log is not None and running.late is not None:
                    log.returned(running.late, running.value, running.error, time.monotonic() - running.started)

        if lane is not None:
            lane.hand(target)
        else:
            threading.Thread(target=target, name=name, daemon=True).start()

    def answer(self, outcome: Outcome) -> None:
        """Report ``outcome`` (its ``call_id`` set) as the next to end, without running anything."""
        self.ready.append(outcome)

    def next(self, in_tool: bool = True, sink: DeltaSink | None = None) -> Outcome:
        """The outcome of the next call to end; one cut short when the deadline or a cancel ends the wait.

        A call past its tool's ``timeout_s`` is reported timed out. A call that raised ``SystemExit``
        or ``KeyboardInterrupt`` raises it here, as if on this thread. A streamed reply's pieces go to
        ``sink`` as they come (pieces of a call given up on are dropped), logged when due.
        """
        if self.ready:
            return self.ready.popleft()
        waits = self.waits
        while True:
            ends = min((running.ends_by for running in self.running.values()), default=math.inf)
            now = time.monotonic()
            wait = next_wait(waits, ends, now, in_tool)
            due = sink.due if sink is not None else None
            if due is not None:
                wait = min(wait, due - now)
            try:
                item = self.ended.get(timeout=lock_timeout(wait))
            except queue.Empty:
                item = None
            if isinstance(item, Running):
                del self.running[item.call_id]
                return _outcome(item, time.monotonic() - item.started)
            now = time.monotonic()
            if sink is not None:
                if item is not None:
                    sink.piece(item.text)
                if (due := sink.due) is not None and now >= due:
                    sink.flush()
            stop = waits.stop(now, in_tool)
            for running in self.running.values():
                cut = expired(stop, running.started, running.ends_by, now, running.call_id)
                if cut is not None and running.give_up():  # else it just ended: the queue has it
                    del self.running[running.call_id]
                    return cut


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
