"""The async driver: the same loop for async models and tools, many runs per event loop.

It drives the very same ``AgentCore`` as the sync driver; only the waiting differs. Coroutine
models and tools are awaited; plain functions run on a worker thread (``asyncio.to_thread``) so a
slow one cannot stall the other runs. A reply's calls run together as tasks (``TaskFlight``), one
call under a deadline, a timeout or a cancel as a flight of one. The deadline, a per-tool timeout
and the cancel event cancel the awaited calls (but tool calls under a cancel that ``lets_tools_finish``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..recorder import sync_later
from .actions import COMMITTED, GO_ON, Action, CallModel, CallTool, Checkpoint, Commit, Outcome, RunTools
from .children import Children, atool_fn
from .core import AgentCore
from .drive import adrive, ended
from .results import AgentResult
from .stream import DeltaSink, Streaming, aconsume, astream_of, consume, stream_of
from .waits import Waits, call_ends, expired, next_wait, task_timeout, waits_of


class AsyncDriver:
    """Performs one run's actions without blocking the event loop: ``perform`` for ``adrive``."""

    __slots__ = ("core", "flight", "waits")

    def __init__(self, core: AgentCore) -> None:
        self.core = core
        self.waits = waits_of(core.limits, core.cancel, time.monotonic(), core.watch)
        self.flight = TaskFlight(self.waits, core.children)

    async def perform(self, action: Action) -> Outcome:
        """The outcome of one of the core's actions."""
        match action:
            case Commit():
                for committed in sync_later(self.core.recorder):
                    # A cancelled caller calls no commit off (the future only tells of it): the run's
                    # close, in ``adrive``, waits for the commit under way and then commits the rest.
                    await committed
                return COMMITTED
            case CallModel(model=model, messages=messages, specs=specs):
                if self.core.streaming is not None and (astream_of(model) or stream_of(model)):
                    return await self.streamed(action, self.core.streaming)
                return await self.flight.one(model, (messages, specs), {}, None, False)
            case CallTool(tool=tool, args=args):
                return await self.flight.one(atool_fn(action, self.waits, self.core.children), (), args,
                                             tool.timeout_s, True)
            case RunTools(start=start):
                for call in start:
                    self.flight.start(call)
                return await self.flight.next()
            case Checkpoint():
                status = self.waits.stop(time.monotonic())
                return Outcome(stop=status) if status else GO_ON


    async def streamed(self, action: CallModel, streaming: Streaming) -> Outcome:
        """A model call consumed piece by piece: ``astream`` on this loop, or ``stream`` on a worker thread.

        The pieces are told and logged on the loop's thread; a delta's commit is awaited with the call.
        """
        commits: list[asyncio.Future[None]] = []
        sink = DeltaSink(self.core, action.step, streaming, lambda: commits.extend(sync_later(self.core.recorder)))
        astream, loop = astream_of(action.model), asyncio.get_running_loop()
        if astream is not None:
            fn: Callable[..., Any] = functools.partial(aconsume, astream, sink.piece)
        else:
            stream = stream_of(action.model)
            assert stream is not None

            def put(text: str) -> None:  # from the worker thread: told on the loop's, in order
                loop.call_soon_threadsafe(sink.piece, text)

            fn = functools.partial(consume, stream, put)
        ticker = asyncio.ensure_future(_tick(sink))
        try:
            outcome = await self.flight.one(fn, (action.messages, action.specs), {}, None, False)
        finally:  # a cancelled caller too: the text that came is logged, committed as the run closes
            ticker.cancel()
            first = sink.close()
        for committed in commits:
            await committed
        # Timed on this thread after the hand-over: never past the call's own latency.
        return outcome if first is None else dataclasses.replace(outcome, first_chunk_s=min(first, outcome.elapsed_s))


async def _tick(sink: DeltaSink) -> None:
    """Log a streamed reply's text held once it is due, while no new piece comes to do it."""
    while True:
        due = sink.due
        await asyncio.sleep(sink.every_s if due is None else max(due - time.monotonic(), 0.0))
        if (due := sink.due) is not None and time.monotonic() >= due:
            sink.flush()


async def arun_core(core: AgentCore) -> AgentResult:
    """Drive ``core`` on this event loop until it returns its result."""
    driver = AsyncDriver(core)
    return ended(await adrive(core, driver.perform, driver.flight.cancel_all))


class TaskFlight:
    """A run's calls running together, each an ``asyncio`` task (a plain tool on ``asyncio.to_thread``'s pool)."""

    def __init__(self, waits: Waits, children: Children | None = None) -> None:
        self.waits, self.children = waits, children
        # Each call's task, in the order handed over: its call id, when it started, when its own timeout ends.
        self.running: dict[asyncio.Future[Returned], tuple[str | None, float, float]] = {}

    def start(self, action: CallTool) -> None:
        self.call(action.call.id, atool_fn(action, self.waits, self.children), (), action.args, action.tool.timeout_s)

    def call(self, call_id: str | None, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             timeout_s: float | None) -> None:
        """Start ``fn(*args, **kwargs)`` as a task, as call ``call_id``."""
        started = time.monotonic()
        task = asyncio.ensure_future(_invoke(fn, args, kwargs))
        self.running[task] = (call_id, started, call_ends(started, timeout_s))

    async def one(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  timeout_s: float | None, in_tool: bool) -> Outcome:
        """A single model or tool call, as a flight of one (no ``call_id``); awaited in place when nothing stops it."""
        waits = self.waits
        if timeout_s is None and waits.ends_by == math.inf and not waits.watches_cancel(in_tool):
            # Nothing can stop the call early: await it in place (a task and a wait per call cost
            # more than many a tool). A caller's cancellation reaches the call as it would the task.
            started = time.monotonic()
            value, error = await _invoke(fn, args, kwargs)
            return _outcome(value, error, time.monotonic() - started)
        self.call(None, fn, args, kwargs, timeout_s)
        return await self.next(in_tool)

    async def next(self, in_tool: bool = True) -> Outcome:
        """The outcome of the next call to end; one cut short when the deadline or a cancel ends the wait."""
        waits = self.waits
        while True:
            ends = min((ends for _, _, ends in self.running.values()), default=math.inf)
            wait = next_wait(waits, ends, time.monotonic(), in_tool)
            done, _ = await asyncio.wait(set(self.running), timeout=task_timeout(wait),
                                         return_when=asyncio.FIRST_COMPLETED)
            now = time.monotonic()
            stop = None if done else waits.stop(now, in_tool)
            for task, (call_id, started, ends) in self.running.items():
                if task in done:
                    del self.running[task]
                    value, error = task.result()
                    return _outcome(value, error, now - started, call_id)
                cut = None if done else expired(stop, started, ends, now, call_id)
                if cut is not None:
                    del self.running[task]
                    task.cancel()
                    return cut

    def cancel_all(self) -> None:
        """Cancel every call still running (the run is leaving on an exception)."""
        for task in self.running:
            task.cancel()
        self.running.clear()


# A call's value, or what it raised. Exceptions travel as values, never through a Future:
# asyncio cannot set StopIteration on one (the call would never complete), and a Ctrl-C
# raised inside a task would leave the loop before this run could log why it stopped.
Returned = tuple[Any, BaseException | None]


def _outcome(value: Any, error: BaseException | None, elapsed_s: float, call_id: str | None = None) -> Outcome:
    if error is not None and not isinstance(error, Exception):
        raise error  # Ctrl-C, SystemExit: raised in this run's task, so adrive closes the run first
    if error is not None:
        return Outcome(error=error, elapsed_s=elapsed_s, call_id=call_id)
    return Outcome(value=value, elapsed_s=elapsed_s, call_id=call_id)


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Returned:
    try:
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
            return await fn(*args, **kwargs), None
        value, error = await asyncio.to_thread(_call, fn, args, kwargs)
        if error is None and inspect.isawaitable(value):
            awaitable: Awaitable[Any] = value
            return await awaitable, None
        return value, error
    except asyncio.CancelledError:
        raise  # this call's own cancellation (a deadline, a timeout, the caller)
    except BaseException as exc:
        return None, exc


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Returned:
    """Run a plain function on the worker thread, catching what it raises there."""
    try:
        return fn(*args, **kwargs), None
    except BaseException as exc:
        return None, exc
