"""``arun_agent``: the same loop for async models and tools, many runs per event loop.

It drives the very same ``AgentCore`` as ``run_agent``; only the waiting differs.
Coroutine models and tools are awaited; plain functions run on a worker thread
(``asyncio.to_thread``) so a slow one cannot stall the other runs. A reply's calls run
together as tasks (``TaskFlight``). The deadline, a per-tool timeout and the cancel event
all cancel the awaited calls (but tool calls under a cancel that ``lets_tools_finish``).
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Unpack

from .._tools.registry import ToolRegistry
from ..messages import AsyncModel, Model
from ..recorder import sync_later
from .build import NOT_GIVEN, NotGiven, RunOptions, build_core
from .core import DEFAULT_SYSTEM, AgentCore
from .flight import CANCEL_POLL_S
from .results import COMMITTED, Action, AgentResult, CallModel, CallTool, Checkpoint, Commit, Outcome, RunTools
from .sync import at_checkpoint


async def arun_agent(
    task: str,
    model: Model | AsyncModel,
    registry: ToolRegistry,
    system: str = DEFAULT_SYSTEM,
    max_steps: int | NotGiven = NOT_GIVEN,
    token_budget: int | NotGiven = NOT_GIVEN,
    **options: Unpack[RunOptions],
) -> AgentResult:
    """Run an agent like ``run_agent``, with a model and tools that may be coroutine functions.

    A plain model runs on a worker thread; an awaitable reply is awaited.
    ``cancel`` may be an ``asyncio.Event`` or a ``threading.Event``.
    Commits never block the event loop: they go to the store's writer thread and the run awaits them.
    So many coroutines write to a store as many threads would.

    Args:
        task, model, registry, system: as for ``run_agent``.
        max_steps, token_budget: limits as for ``run_agent``; ``limits=Limits(...)`` sets them all,
            and a limit given both ways is a ``TypeError``.
        **options: the ``RunOptions`` of ``run_agent``.
    """
    return await adrive(build_core(task, model, registry, system, max_steps, token_budget, **options))


async def adrive(core: AgentCore) -> AgentResult:
    """Perform ``core``'s actions until it returns; a cancelled caller still gets the run logged."""
    decisions = core.run()
    flight = TaskFlight(core)
    try:
        action = next(decisions)
        while True:
            action = decisions.send(await aperform(core, action, flight))
    except StopIteration as finished:
        result: AgentResult = finished.value
        return result
    except BaseException as exc:  # the caller cancelled us, Ctrl-C, a raising callback or recorder
        flight.cancel_all()  # the calls in flight stay in doubt, as the process's death would leave them
        decisions.close()
        core.abort(exc)
        raise


async def aperform(core: AgentCore, action: Action, flight: TaskFlight) -> Outcome:
    """Perform one of ``core``'s actions without blocking the event loop; ``flight`` runs calls together."""
    if isinstance(action, Commit):
        for committed in sync_later(core.recorder):
            # A cancelled caller calls no commit off (the future only tells of it): the run's
            # close, in ``adrive``, waits for the commit under way and then commits the rest.
            await committed
        return COMMITTED
    if isinstance(action, Checkpoint):
        return at_checkpoint(core)
    if isinstance(action, RunTools):
        for call in action.start:
            flight.start(call)
        return await flight.next()
    if isinstance(action, CallModel):
        return await _await_call(action.model, (action.messages, action.specs), {}, None, core, False)
    return await _await_call(action.tool.fn, (), action.args, action.tool.timeout_s, core, True)


class TaskFlight:
    """A run's calls running together, each an ``asyncio`` task (a plain tool on ``asyncio.to_thread``'s pool)."""

    def __init__(self, core: AgentCore) -> None:
        self.core = core
        # Each call's task, in the order handed over: its call id, when it started, when its own timeout ends.
        self.running: dict[asyncio.Future[Returned], tuple[str, float, float]] = {}

    def start(self, action: CallTool) -> None:
        started, timeout_s = time.monotonic(), action.tool.timeout_s
        task = asyncio.ensure_future(_invoke(action.tool.fn, (), action.args))
        self.running[task] = (action.call.id, started, started + timeout_s if timeout_s is not None else math.inf)

    async def next(self) -> Outcome:
        """The outcome of the next call to end; one cut short when the deadline or a cancel ends the wait."""
        core = self.core
        run_end = core.deadline if core.deadline is not None else math.inf
        while True:
            ends_by = min((ends for _, _, ends in self.running.values()), default=math.inf)
            wait = min(ends_by, run_end) - time.monotonic()
            if core.watches_cancel(True):
                wait = min(wait, CANCEL_POLL_S)
            done, _ = await asyncio.wait(set(self.running), timeout=None if wait == math.inf else max(wait, 0.0),
                                         return_when=asyncio.FIRST_COMPLETED)
            now = time.monotonic()
            stop = None if done else core.stop_requested(True)
            for task, (call_id, started, ends) in self.running.items():
                if task in done:
                    del self.running[task]
                    value, error = task.result()
                    return _outcome(value, error, now - started, call_id)
                if stop or (not done and now >= ends):
                    del self.running[task]
                    task.cancel()
                    if stop:
                        return Outcome(stop=stop, elapsed_s=now - started, call_id=call_id)
                    return Outcome(timed_out=True, elapsed_s=now - started, call_id=call_id)

    def cancel_all(self) -> None:
        """Cancel every call still running (the run is leaving on an exception)."""
        for task in self.running:
            task.cancel()
        self.running.clear()


# A call's value, or what it raised. Exceptions travel as values, never through a Future:
# asyncio cannot set StopIteration on one (the call would never complete), and a Ctrl-C
# raised inside a task would leave the loop before this run could log why it stopped.
Returned = tuple[Any, BaseException | None]


async def _await_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None,
    core: AgentCore, in_tool: bool,
) -> Outcome:
    started = time.monotonic()
    call_end = started + timeout_s if timeout_s is not None else math.inf
    run_end = core.deadline if core.deadline is not None else math.inf
    if call_end == math.inf and run_end == math.inf and not core.watches_cancel(in_tool):
        # Nothing can stop the call early: await it in place (a task and a wait per call cost
        # more than many a tool). A caller's cancellation reaches the call as it would the task.
        value, error = await _invoke(fn, args, kwargs)
        return _outcome(value, error, time.monotonic() - started)
    task = asyncio.ensure_future(_invoke(fn, args, kwargs))
    try:
        return await _wait(task, started, call_end, run_end, core, in_tool)
    except BaseException:
        task.cancel()  # whoever cancelled us: the model or tool call must not run on unobserved
        raise


async def _wait(task: asyncio.Future[Returned], started: float, call_end: float, run_end: float,
                core: AgentCore, in_tool: bool) -> Outcome:
    while True:
        wait = min(call_end, run_end) - time.monotonic()
        if core.watches_cancel(in_tool):
            wait = min(wait, CANCEL_POLL_S)
        done, _ = await asyncio.wait({task}, timeout=None if wait == math.inf else max(wait, 0.0))
        now = time.monotonic()
        if done:
            value, error = task.result()
            return _outcome(value, error, now - started)
        stop = core.stop_requested(in_tool)
        if stop or now >= call_end:
            task.cancel()
            if stop:
                return Outcome(stop=stop, elapsed_s=now - started)
            return Outcome(timed_out=True, elapsed_s=now - started)


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
