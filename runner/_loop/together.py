"""Run a reply's tool calls together, as durably as one at a time.

Every call is checked first, in the reply's order, as ``calls`` checks one; then up to ``max_parallel_tools``
run at once (an ``exclusive`` tool's call alone). No tool runs before its ``tool_started`` is committed (one
commit for the starts handed over together), each ``tool_finished`` is committed as its call returns, and the
observations enter the conversation in the reply's order, whatever order the calls end in. So a crash leaves
each call in flight in doubt on its own. Functions over the core's ``ToolCalls``, which owns the calls in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import NamedTuple

from .._log.state import Repeats
from .._tools.registry import Tool
from ..events import StepFinished
from ..messages import ToolCall
from . import observations
from .actions import COMMIT, Action, CallTool, Checkpoint, Outcome, RunTools, Stop
from .calls import Refusal, ToolCalls
from .children import halt_of


class Plan(NamedTuple):
    """What checking a reply's calls decided: the calls to run in order, a stop, and whether a call waits.

    ``stop`` ends the planning where the reply's calls stopped being looked at (the tool budget,
    or a stop the driver called at a checkpoint: ``outside``). The calls before it still run.
    """

    queue: deque[tuple[ToolCall, Tool]]
    stop: Stop | None
    outside: Stop | None
    waits: bool


def together(calls: ToolCalls, step: int) -> Generator[Action, Outcome, Stop | None]:
    """Run the reply's remaining calls, up to ``max_parallel_tools`` at once, then close the step."""
    plan = yield from _plan(calls, step)
    queue, outside = plan.queue, None  # the calls planned before a stop still run (as one by one they would)
    flying, tools = calls.flying, {call.id: tool for call, tool in queue}
    cut: set[str] = set()  # the calls given up on: their observation waits for a resume
    calls.answer_due(step, cut)
    refill = False
    alone: str | None = None  # an exclusive call in flight: nothing else starts until it ends
    while True:
        wave: list[tuple[ToolCall, Tool]] = []
        while outside is None and queue and alone is None and len(flying) + len(wave) < calls.max_parallel_tools:
            call, tool = queue[0]
            if tool.exclusive and (flying or wave):  # it waits for the calls in flight to end
                break
            if refill and calls.checkpoints:  # a slot freed up: the run may have to stop before the next
                outside = yield from calls.core.stop_at(Checkpoint(call))
                if outside:
                    break
            wave.append(queue.popleft())
            if tool.exclusive:
                alone = call.id
                break
        start = yield from _start(calls, step, wave)
        if not flying:
            break
        refill = True
        outcome = yield RunTools(start)
        assert outcome.call_id is not None
        _, call = flying.pop(outcome.call_id)
        if call.id == alone:
            alone = None
        halt = halt_of(outcome.value)
        if outcome.stop:
            calls.cut_short(step, call, outcome)
            cut.add(call.id)
            if outside is None:
                names = ", ".join([call.name, *(other.name for _, other in flying.values())])
                waited = f"tool{'s' * bool(flying)} {names}"
                outside = Stop(outcome.stop, outcome.reason or observations.stop_reason(outcome.stop, calls.limits,
                                                                                        waited))
        elif halt is not None:  # a child that waits (an approval, the tree's budget): its call stays open
            cut.add(call.id)
            outside = outside or halt
        else:
            calls.settle(step, call, tools[call.id], outcome)
        if calls.core.listening:  # each result is committed as its call returns
            yield COMMIT
        calls.answer_due(step, cut)
    if outside is not None or plan.outside is not None:
        return outside or plan.outside
    if plan.waits:
        return calls.await_approval(step)
    if plan.stop is not None:
        return plan.stop
    calls.emit(StepFinished(step=step))
    return None


def _plan(calls: ToolCalls, step: int) -> Generator[Action, Outcome, Plan]:
    """Check each remaining call in the reply's order, logging the refusals: the calls to run.

    The repeat guard counts the calls before each as they will enter the conversation. After
    a call that waits for a decision, the others still run, but no later one is put to ``approve``.
    """
    s = calls.state
    queue: deque[tuple[ToolCall, Tool]] = deque()
    repeats = Repeats(s.last_call_key, s.repeats)
    waits = False
    for call in s.remaining_calls:
        finished = s.finished_calls.get(call.id)
        if finished is not None:  # answered before the process stopped: never run again
            repeats = repeats.then(s.key_of(call), finished.refused)
            continue
        if calls.checkpoints:
            outside = yield from calls.core.stop_at(Checkpoint(call))
            if outside:
                return Plan(queue, None, outside, waits)
        key = s.key_of(call)
        found = calls.verdict(call, repeats.then(key, None).in_a_row, s.tool_calls_run + len(queue), ask=not waits)
        if isinstance(found, Stop):
            return Plan(queue, found, None, waits)
        refused = None
        if isinstance(found, Refusal):
            calls.finished(step, call, found.observation, found.refused)
            refused = found.refused
        elif isinstance(found, str):  # WAIT
            waits = True
        else:
            assert isinstance(found, Tool)
            queue.append((call, found))
        repeats = repeats.then(key, refused)
    return Plan(queue, None, None, waits)


def _start(calls: ToolCalls, step: int, wave: list[tuple[ToolCall, Tool]]
           ) -> Generator[Action, Outcome, tuple[CallTool, ...]]:
    """Log the starts of ``wave`` and commit them together: the calls, ready to hand over."""
    if not wave:
        return ()
    listening = calls.core.listening
    if listening:  # until the starts are committed, an abort logs these calls not run
        calls.starting = (step, tuple(call for call, _ in wave))
    for call, _ in wave:
        calls.announce(step, call)
    if listening:
        yield COMMIT
        calls.starting = None
    for call, _ in wave:
        calls.flying[call.id] = (step, call)
    return tuple(calls.call_tool(step, call, tool) for call, tool in wave)
