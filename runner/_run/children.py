"""Run a sub-agent's call as a child run in the parent's store: start it, or find it and go on, or serve its end.

The child's id derives from the parent's and the call's (``child_run_id``), so a resumed parent finds it;
its log decides: a ``done`` child's answer is served, one that stopped on its own gives its ``ERROR:``
again, any other (dead, its approval decided, stopped by the tree's budget or the parent's cancel) is
resumed. It gets at most what the parent has left of tokens, cost and time; stopped by that, or waiting
for an approval, it halts the parent with the call left open (docs/subagents.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, NamedTuple

from .. import _jsontext
from .._log.decisions import Decision, decider
from .._log.limits import Limits
from .._log.records import StoredRun
from .._log.state import RunState, fold
from .._log.statuses import Status
from .._loop.actions import Stop
from .._loop.aio import arun_core
from .._loop.children import ChildCall, ChildEnded
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._loop.sync import run_core
from .._loop.waits import Waits
from .._tools.agents import SUBAGENT, SubAgent, child_run_id, stopped_observation
from ..errors import RunNotFound
from . import approvals
from .opening import Lineage, new_run_opening

if TYPE_CHECKING:
    from ..store import RunStore
    from ..tracing.live import TraceLink, TracingRecorder
    from .wiring import RunWiring

MAX_DEPTH: Final = 10  # sub-agents within sub-agents: deeper than this, a call is refused (a cycle of agents)
# The stops of a child that halt its parent when the parent's budget, not the child's own, was the one that ran out.
_TREE_LIMITS = {Status.TOKEN_BUDGET: "token_budget", Status.COST_LIMIT: "max_cost_usd", Status.DEADLINE: "timeout_s"}


class Plan(NamedTuple):
    """What a sub-agent's call does: drive ``core``, or serve ``served`` without running anything.

    ``bound`` names the child's limits that the parent's budget set.
    """

    core: AgentCore | None
    bound: frozenset[str]
    served: ChildEnded | None


class TreeChildren:
    """The ``Children`` of one run: its sub-agents' calls as child runs, wired as the run is.

    ``wiring`` is the parent's (store, tracer, approve, cancel); ``tracing`` its tracer, under whose
    tool span each child's spans go.
    """

    def __init__(self, wiring: RunWiring, tracing: TracingRecorder | None) -> None:
        self.wiring, self.tracing = wiring, tracing

    def run(self, child: ChildCall, waits: Waits) -> ChildEnded:
        plan = self.plan(child, waits)
        if plan.served is not None:
            return plan.served
        assert plan.core is not None
        return ended(child, plan.core, run_core(plan.core), plan.bound, waits)

    async def arun(self, child: ChildCall, waits: Waits) -> ChildEnded:
        plan = self.plan(child, waits)
        if plan.served is not None:
            return plan.served
        assert plan.core is not None
        return ended(child, plan.core, await arun_core(plan.core), plan.bound, waits)

    def plan(self, child: ChildCall, waits: Waits) -> Plan:
        """Find the child run or start it: the core to drive, or the end to serve."""
        from .build import core_for

        agent, store = child.agent, self.wiring.store
        run_id = child_run_id(child.parent_run_id, child.call.id)
        depth = self.wiring.depth + 1
        if depth > MAX_DEPTH:  # a sub-agent that (through others) calls itself: the tree stops growing here
            return Plan(None, frozenset(), ChildEnded(run_id, Status.INVALID_REPLY, f"ERROR: sub-agent {agent.name} "
                                                      f"was not run: the tree of sub-agents is {MAX_DEPTH} deep "
                                                      "already", 0, 0.0))
        # A parent never resumed performs each call once: its child cannot exist yet (a read spared per call).
        found = _stored(self.wiring, run_id) if child.segment else None
        state = fold(found.facts, run_id) if found is not None else None
        limits, bound = child_limits(agent, child, waits, state)
        # The child is logged, traced, approved and cancelled as its parent is; the caller's own recorder and
        # stream listener hear the parent's run alone.
        streaming = self.wiring.streaming._replace(listen=None) if self.wiring.streaming is not None else None
        wiring = dataclasses.replace(self.wiring, above=waits.watch, cancel=waits.cancel, costs=None, depth=depth,
                                     recorder=None, streaming=streaming)
        if found is None or state is None or state.started is None:
            by = self.wiring.decided_by or decider()
            first = new_run_opening(run_id, child.task, agent.system, limits, agent.registry, agent.model,
                                    agent.name, link=Lineage(child.parent_run_id, SUBAGENT),
                                    by=by, output=agent.output, parent_call_id=child.call.id)
            return Plan(core_for(agent.model, agent.registry, run_id, limits, first, None, wiring,
                                 self.link(child), output_spec=agent.output), bound, None)
        served = _served(agent, child, found, state, self.wiring.approve is not None)
        if served is not None:
            return Plan(None, bound, served)
        assert store is not None
        from .resume import resumed_core

        core = resumed_core(store, found, agent.model, agent.registry, limits=limits, child_of=wiring,
                            cancel=wiring.cancel, approve=wiring.approve, decided_by=wiring.decided_by,
                            tracer_provider=wiring.tracer_provider, record_content=wiring.record_content,
                            agent_name=agent.name, output_type=agent.output_type)  # None: the typed result logged
        return Plan(core, bound, None)

    def link(self, child: ChildCall) -> TraceLink | None:
        """Where the child's spans go: under the parent's span of the call, in the parent's trace."""
        tracing = self.tracing
        if tracing is None or not tracing.trace_id:
            return None
        from ..tracing.live import TraceLink

        key = f"tool:{child.call.id}" + (f"@{child.segment}" if child.segment else "")
        span_id = tracing.span_id_for(key)
        return TraceLink(tracing.trace_id, span_id, joins=True) if span_id else None


def _stored(wiring: RunWiring, run_id: str) -> StoredRun | None:
    if wiring.store is None:
        return None
    try:
        return wiring.store.get_run(run_id)
    except RunNotFound:
        return None


def child_limits(agent: SubAgent, child: ChildCall, waits: Waits, state: RunState | None
                 ) -> tuple[Limits, frozenset[str]]:
    """The child's limits: its own, each budget cut to what the parent has left; and the names the parent's set.

    A resumed child has spent part of its budget already: the parent's tokens and cost left are on top of it.
    """
    own = agent.limits or Limits()
    spent = state.tree_spent if state is not None else 0
    cost = state.tree_cost_usd if state is not None else 0.0
    bound: set[str] = set()
    token_budget = own.token_budget
    if child.tokens_left + spent < token_budget:
        token_budget, bound = child.tokens_left + spent, bound | {"token_budget"}
    max_cost = own.max_cost_usd
    if child.cost_left is not None and (max_cost is None or child.cost_left + cost < max_cost):
        max_cost, bound = child.cost_left + cost, bound | {"max_cost_usd"}
    timeout = own.timeout_s
    if waits.ends_by != math.inf:
        left = max(waits.ends_by - time.monotonic(), 0.001)
        if timeout is None or left < timeout:
            timeout, bound = left, bound | {"timeout_s"}
    limits = dataclasses.replace(own, token_budget=token_budget, max_cost_usd=max_cost, timeout_s=timeout)
    return limits, frozenset(bound)


def _served(agent: SubAgent, child: ChildCall, run: StoredRun, state: RunState, asks: bool) -> ChildEnded | None:
    """The end of a stored child that is not to run again, or None: it goes on (see the module's docstring)."""
    status = run.status
    if status == Status.DONE:
        return ChildEnded(run.run_id, status, answer_of(agent, state.answer, state.output), state.tree_spent,
                          state.tree_cost_usd)
    if status == Status.AWAITING_APPROVAL:
        waiting = approvals.undecided(run.run_id, state, {}, asks)
        if waiting is None:
            return None
        return ChildEnded(run.run_id, status, "", state.tree_spent, state.tree_cost_usd,
                          Stop(Status.AWAITING_APPROVAL, _waits_on(child, run.run_id, state.error)))
    if status in (Status.RUNNING, Status.CANCELLED) or _tree_stopped(agent, status, state):
        return None
    return ChildEnded(run.run_id, status, stopped_observation(agent.name, status, state.error), state.tree_spent,
                      state.tree_cost_usd)


def _tree_stopped(agent: SubAgent, status: Status, state: RunState) -> bool:
    """Whether the child stopped on a budget the parent's cut below its own (so a resume may give it more)."""
    name = _TREE_LIMITS.get(status)
    if name is None:
        return False
    own, recorded = (agent.limits or Limits()).to_dict(), state.limits
    mine, given = own.get(name), recorded.get(name)
    return given is not None and (mine is None or (isinstance(given, (int, float)) and given < mine))


def ended(child: ChildCall, core: AgentCore, result: AgentResult, bound: frozenset[str], waits: Waits) -> ChildEnded:
    """What the parent takes from the child's ``result``: its answer, an ``ERROR:``, or a halt."""
    agent, state, status = child.agent, core.state, result.status
    run_id = core.run_id
    tokens, cost = state.tree_spent, state.tree_cost_usd
    if status == Status.DONE:
        return ChildEnded(run_id, status, answer_of(agent, result.answer, core.output_data), tokens, cost)
    halt = None
    if status == Status.AWAITING_APPROVAL:
        halt = Stop(status, _waits_on(child, run_id, result.error))
    elif _TREE_LIMITS.get(status) in bound:
        halt = Stop(status, f"sub-agent {agent.name} (run {run_id}, call {child.call.id}) stopped on the run's "
                            f"budget: {result.error}")
    elif status == Status.CANCELLED and _cancelling(waits):
        halt = Stop(status, f"cancelled while sub-agent {agent.name} ran (run {run_id}, call {child.call.id})")
    return ChildEnded(run_id, status, stopped_observation(agent.name, status, result.error), tokens, cost, halt)


def _cancelling(waits: Waits) -> bool:
    return (waits.cancel is not None and waits.cancel.is_set()) or (waits.watch is not None and waits.watch.is_set())


def _waits_on(child: ChildCall, run_id: str, error: str | None) -> str:
    return f"call {child.call.id} ({child.agent.name}) waits on sub-agent run {run_id}: {error or 'awaiting approval'}"


def answer_of(agent: SubAgent, answer: str | None, output: object) -> str:
    """A done child's answer as its parent's model reads it: the typed result's JSON, or the text."""
    if agent.output is not None and output is not None:
        try:
            return _jsontext.strict(output)
        except (TypeError, ValueError):
            return json.dumps(output, default=str)
    return answer or ""


def undecided_below(store: RunStore, run_id: str, state: RunState, asks: bool) -> str | None:
    """Why a run waiting on its sub-agents cannot go on: a child (or deeper) waits for a decision nobody gave.

    None when every child it waits on can go on (decisions logged, an ``approve`` callback, or not waiting).
    """
    for call_id in approvals.open_subagent_calls(state):
        child_id = child_run_id(run_id, call_id)
        try:
            child = store.get_run(child_id)
        except RunNotFound:
            continue
        if child.status != Status.AWAITING_APPROVAL:
            continue
        below = fold(child.facts, child_id)
        refusal = approvals.undecided(child_id, below, {}, asks) or undecided_below(store, child_id, below, asks)
        if refusal is not None:
            return f"run {run_id} waits on sub-agent run {child_id} (call {call_id}): {refusal}"
    return None


def route_decisions(store: RunStore, run_id: str, state: RunState, given: Mapping[str, Decision],
                    by: str) -> dict[str, Decision]:
    """Log on the child (or deeper) each decision ``given`` to a resume that names a call a sub-agent waits on.

    So ``resume(ROOT, decisions={CALL: True})`` and ``runner resume ROOT --approve CALL`` decide a
    child's call as ``RunStore.decide(CHILD, ...)`` would. The decisions for the run's own calls are returned.
    """
    own = {call.id for call in state.remaining_calls}
    left = {call_id: verdict for call_id, verdict in given.items() if call_id not in own}
    if not left:
        return dict(given)
    for child_id, child_state in waiting_children(store, run_id, state):
        for call_id in [call_id for call_id in left if call_id in child_state.pending_approvals]:
            verdict = left.pop(call_id)
            store.decide(child_id, call_id, verdict is True, verdict if isinstance(verdict, str) else None,
                         decided_by=by)
    return {call_id: verdict for call_id, verdict in given.items() if call_id in own or call_id in left}


def waiting_children(store: RunStore, run_id: str, state: RunState) -> list[tuple[str, RunState]]:
    """The child runs (and theirs, depth first) that ``run_id``'s open sub-agent calls wait on for a decision."""
    found: list[tuple[str, RunState]] = []
    for call_id in approvals.open_subagent_calls(state):
        child_id = child_run_id(run_id, call_id)
        try:
            child = store.get_run(child_id)
        except RunNotFound:
            continue
        if child.status == Status.AWAITING_APPROVAL:
            below = fold(child.facts, child_id)
            found.append((child_id, below))
            found.extend(waiting_children(store, child_id, below))
    return found
