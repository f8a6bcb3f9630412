"""``runner demo --subagents``: a planner with a researcher and a mailer, whose mail waits for a person.

Its models are scripted by turn (``runner.demo.TurnModel``), so ``--resume RUN --approve CALL`` goes on in
another process: the decision is logged on the sub-agent's run that asked, then the planner resumes, performs
its call of the mailer again and the mailer goes on. Both print the tree of runs, then what to try next.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.text import Text

from .._log.decisions import decider
from .._log.facts import RunStarted
from .._log.limits import Limits
from .._log.records import StoredRun
from .._log.statuses import Status
from .._loop.results import AgentResult
from .._run.agent import run_agent
from .._run.resume import resume
from .._text import clean, shown_name
from .._tools.agents import SUBAGENT
from .._view.lineage import pending_approvals
from ..demo import TEAM_TASK, planner_model, subagents_registry
from ..recorder import Recorder
from ..store import RunStore
from .options import CliError, CliUsageError, Env
from .runs import report, traced

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

TOOLS_REF = "runner.demo:subagents_registry"
AGENT = "planner"


def start(env: Env, store: RunStore, limits: Limits, recorder: Recorder | None, record_content: bool) -> AgentResult:
    """Run the planner until it ends, or stops with its mailer waiting for approval (as scripted)."""
    run_id = uuid.uuid4().hex

    def go(provider: TracerProvider) -> AgentResult:
        return run_agent(TEAM_TASK, planner_model(), subagents_registry(), store=store, run_id=run_id,
                         tracer_provider=provider, labels={"example": "demo-subagents"}, limits=limits,
                         recorder=recorder, record_content=record_content, tools_ref=TOOLS_REF, agent_name=AGENT)

    return traced(env, store, go, lambda: run_id)


def go_on(env: Env, store: RunStore, run_ref: str, decisions: dict[str, bool], recorder: Recorder | None,
          record_content: bool) -> AgentResult:
    """Log ``decisions`` on the runs of the tree that asked for them, then resume the planner."""
    run = store.find_run(run_ref)
    if _started(run).tools_ref != TOOLS_REF or _started(run).origin == SUBAGENT:
        raise CliUsageError(f"run {clean(run_ref)} is not the planner of a `runner demo --subagents` run")
    asking = {call_id: below.run_id for below, _, _ in tree(store, run) for call_id in pending_approvals(below)}
    for call_id, approved in decisions.items():
        if call_id not in asking:
            waiting = ", ".join(shown_name(c) for c in asking) or "none"
            raise CliError(f"no call {shown_name(call_id)} awaits approval under run {run.run_id} "
                           f"(awaiting: {waiting})")
        store.decide(asking[call_id], call_id, approved, decided_by=decider())

    def go(provider: TracerProvider) -> AgentResult:
        return resume(store, run.run_id, planner_model(), subagents_registry(), tracer_provider=provider,
                      recorder=recorder, record_content=record_content)

    return traced(env, store, go, lambda: run.run_id)


def show(env: Env, store: RunStore, result: AgentResult) -> None:
    """The report of the planner's run, with its tree of runs and, while a mail waits, the commands that decide."""
    run = store.get_run(result.run_id)
    nodes = tree(store, run)
    shorts = store.short_ids([node.run_id for node, _, _ in nodes])
    lines = [Text("\nruns:", style="bold")]
    waiting: list[str] = []
    for node, depth, last in nodes:
        started = _started(node)
        lead = "  " + ("    " * max(depth - 1, 0)) + (("└── " if last else "├── ") if depth else "")
        call = f"  (call {shown_name(started.parent_call_id)})" if started.parent_call_id else ""
        lines.append(Text(f"{lead}{clean(node.agent_name or 'run')}  {node.status}  run {shorts[node.run_id]}{call}"))
        for call_id, asked in pending_approvals(node).items():
            waiting.append(call_id)
            pad = "  " + "    " * depth + "  "
            lines.append(Text(f"{pad}awaiting approval: {shown_name(call_id)} ({shown_name(asked.name)})",
                              style="bold yellow"))
    short, db = shorts[run.run_id], env.hint()
    first = [f"runner demo --subagents --resume {short} --{verdict} {shown_name(call_id)}{db}"
             for call_id in waiting[:1] for verdict in ("approve", "deny")]
    more = [f"runner show {shorts[node.run_id]}{db}" for node, depth, _ in nodes if depth]
    report(env, store, result, more, shown=lines, first_next=first,
           more_json={"runs": [_node_json(node, depth) for node, depth, _ in nodes]})


def tree(store: RunStore, run: StoredRun) -> list[tuple[StoredRun, int, bool]]:
    """``run`` and its sub-agents' runs below it, depth first: each with its depth and whether it is the last."""
    return list(_below(store, run, 0, True, {run.run_id}))


def _below(store: RunStore, run: StoredRun, depth: int, last: bool, seen: set[str]
           ) -> Iterator[tuple[StoredRun, int, bool]]:
    yield run, depth, last
    children = [store.get_run(child.run_id) for child in store.children(run.run_id) if child.run_id not in seen]
    children = [child for child in children if _started(child).origin == SUBAGENT]
    seen.update(child.run_id for child in children)
    for i, child in enumerate(children):
        yield from _below(store, child, depth + 1, i == len(children) - 1, seen)


def _started(run: StoredRun) -> RunStarted:
    found = next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)
    if found is None:
        raise CliError(f"run {run.run_id} has not started")
    return found


def _node_json(run: StoredRun, depth: int) -> dict[str, Any]:
    return {"run_id": run.run_id, "agent_name": run.agent_name, "status": run.status, "depth": depth,
            "parent_call_id": _started(run).parent_call_id, "answer": run.answer,
            "awaiting_approval": list(pending_approvals(run)) if run.status == Status.AWAITING_APPROVAL else []}
