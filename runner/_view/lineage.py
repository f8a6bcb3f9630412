"""How runs link up: a run's parent and children, and the calls a run awaiting approval waits on.

A fork, a follow-up, a rerun's candidate or a sub-agent's child run names its parent (``runs.parent_run_id``,
read through its index for a run's children) and says how it came about in its ``run_started`` fact.
How a stopped run goes on (here, back to its pool, or a command) is ``continuation``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._log.records import RunSummary, StoredRun
from .._log.state import fold
from .._log.statuses import Status
from .._text import clean, shown_name
from .._tools.agents import SUBAGENT
from ..errors import RunNotFound
from ..events import ApprovalRequested
from ..store import RunStore

RERUN = "rerun"  # the origin of a rerun's candidate (runner._rerun), linked to its baseline


@dataclass(frozen=True, slots=True)
class Link:
    """A run linked to the one shown: its id, status and how it came about.

    A sub-agent's child run names the call it serves (``call_id``) and its agent; ``run`` is its summary.
    """

    run_id: str
    status: str
    origin: str | None
    forked_at_step: int | None
    call_id: str | None = None
    agent_name: str | None = None
    run: RunSummary | None = None


def origin_text(origin: str | None, forked_at_step: int | None, call_id: str | None = None) -> str:
    """``fork at step 2``, ``follow-up``, ``rerun candidate``, ``sub-agent, call p1``, or '' for none of them."""
    if origin == SUBAGENT:
        return "sub-agent" + (f", call {shown_name(call_id)}" if call_id is not None else "")
    if origin == "fork":
        return f"fork at step {forked_at_step}" if forked_at_step else "fork"
    if origin == "follow_up":
        return "follow-up"
    if origin == RERUN:
        return "rerun candidate"
    return clean(origin) if origin else ""


def parent_text(parent_run_id: str, origin: str | None, forked_at_step: int | None,
                call_id: str | None = None) -> str:
    """The line that links a run to its parent: ``parent run ID (fork at step 2)``, or a rerun's baseline."""
    if origin == RERUN:
        return f"rerun candidate of baseline run {clean(parent_run_id)}"
    how = origin_text(origin, forked_at_step, call_id)
    return f"parent run {clean(parent_run_id)}" + (f" ({how})" if how else "")


def children(store: RunStore, run_id: str) -> list[Link]:
    """The runs forked from, following up or serving a sub-agent's call of ``run_id``, oldest first, with origin."""
    found = store.children(run_id)
    if not found:
        return []
    starts = store.run_starts([run.run_id for run in found])
    links = []
    for run in found:
        started = starts.get(run.run_id)
        origin, at = (started.origin, started.forked_at_step) if started is not None else (None, None)
        call = started.parent_call_id if started is not None else run.parent_call_id  # the log's, not cut
        links.append(Link(run.run_id, run.status, origin, at, call, run.agent_name, run))
    return links


def pending_approvals(run: StoredRun) -> dict[str, ApprovalRequested]:
    """The calls a run awaiting approval waits on (none decided yet), by call id, in the order they were asked."""
    if run.status != Status.AWAITING_APPROVAL:
        return {}
    return fold(run.facts, run.run_id).pending_approvals


def parent_of(store: RunStore, run: StoredRun) -> StoredRun | None:
    """The run ``run`` was forked from or follows up, with its log; None when it has none, or it is gone."""
    if run.parent_run_id is None:
        return None
    try:
        return store.get_run(run.parent_run_id)
    except RunNotFound:
        return None
