"""Approval decisions and tool records, checked against the log before a run goes on.

A decision is a fact of its own (``approval_decided``, with who made it): ``resume(decisions=...)``
logs those it is given as it goes on, ``decide`` (``RunStore.decide``) logs one without resuming,
for a console or for a pool run that its workers then resume. A decision given again is the same
fact (nothing new is logged); one that contradicts a logged decision is refused. ``drift`` says
where the registry given to a resume differs from what the log records of its tools.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from .._log.records import LIVE
from .._log.state import RunState, fold
from .._log.statuses import Status
from .._tools.registry import ToolRegistry
from ..errors import CannotResume, RunInUse
from ..events import ApprovalDecided

if TYPE_CHECKING:
    from ..store import RunStore

Decision = bool | str
log = logging.getLogger("runner.resume")
DECIDE_ATTEMPTS = 3  # reads of a run whose row changed under a decision, before giving up


class Checked(NamedTuple):
    """Hold the decisions given to a resume, once checked against the log.

    ``fresh`` are the ones not logged yet.
    ``applied`` are every decision the run goes on with: those logged for its unanswered calls, and the fresh ones.
    """

    fresh: dict[str, Decision]
    applied: dict[str, Decision]


def describe(decision: Decision) -> str:
    """``approved``, ``denied``, or ``denied (REASON)``."""
    if decision is True:
        return "approved"
    return f"denied ({decision})" if isinstance(decision, str) and decision else "denied"


def decider() -> str:
    """Who decides when nobody says: the OS user (``--by``'s default)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        return "unknown"


def check_decisions(run_id: str, state: RunState, given: Mapping[str, Decision]) -> Checked:
    """Check the decisions ``given`` to a resume against the log.

    A call that awaits no decision, or whose logged decision is contradicted, raises ``CannotResume``.
    A decision of the wrong type raises ``ValueError``.
    """
    unanswered = {call.id for call in state.remaining_calls}
    fresh: dict[str, Decision] = {}
    for call_id, decision in given.items():
        if state.in_doubt(call_id):  # approved and started before the run stopped: too late to decide again
            raise CannotResume(f"run {run_id}: call {call_id!r} was approved and started before the run stopped; "
                               "it can no longer be decided")
        logged = state.decisions.get(call_id) if call_id in unanswered else None
        if logged is not None:
            if logged != decision:
                by = state.decided_by.get(call_id)
                raise CannotResume(f"run {run_id}: call {call_id!r} was {describe(logged)}"
                                   f"{f' by {by}' if by else ''}; it cannot be {describe(decision)} now")
            continue
        if call_id not in state.pending_approvals:
            pending = sorted(c for c in state.pending_approvals if not state.in_doubt(c)) or "none"
            raise CannotResume(f"run {run_id} has no call {call_id!r} awaiting approval (pending: {pending})")
        if not isinstance(decision, (bool, str)):
            raise ValueError(f"decision for {call_id!r} must be True, False or a reason string, got {decision!r}")
        fresh[call_id] = decision
    applied = {c: v for c, v in state.decisions.items() if c in unanswered}
    return Checked(fresh, {**applied, **fresh})


def undecided(run_id: str, state: RunState, given: Mapping[str, Decision], asks: bool) -> str | None:
    """Say why a run awaiting approval has nothing to resume with, or return None when it has.

    It has nothing when no decision is given, none is logged, and no ``approve`` callback can take one.
    """
    if state.status != Status.AWAITING_APPROVAL or given or asks:
        return None
    if any(call.id in state.decisions for call in state.remaining_calls):
        return None
    waiting = ", ".join(state.pending_approvals) or "none"
    return f"run {run_id} is awaiting approval of {waiting} and no decision was given or logged: nothing to resume"


def decided_facts(state: RunState, fresh: Mapping[str, Decision], decided_by: str) -> list[ApprovalDecided]:
    """The ``approval_decided`` facts of ``fresh`` decisions, each at the step that asked for it."""
    return [ApprovalDecided(step=state.pending_approvals[call_id].step, call_id=call_id, approved=verdict is True,
                            reason=verdict if isinstance(verdict, str) else None, decided_by=decided_by)
            for call_id, verdict in fresh.items()]


def decide(store: RunStore, run_id: str, call_id: str, approved: bool, reason: str | None = None, *,
           decided_by: str | None = None) -> bool:
    """Log a decision on call ``call_id`` of a stopped run without resuming it; whether it was logged now.

    ``CannotResume`` for a call that awaits no decision or one contradicting a logged decision
    (the same decision again logs nothing), ``RunInUse`` for a run a live process drives.
    """
    if not isinstance(approved, bool):
        raise TypeError(f"approved must be True or False, got {approved!r}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a string or None, got {type(reason).__name__}")
    if decided_by is not None and not isinstance(decided_by, str):
        raise TypeError(f"decided_by must be a string, got {type(decided_by).__name__}")
    from ..store.appending import append_to_stopped

    verdict: Decision = True if approved else (reason or False)
    for _ in range(DECIDE_ATTEMPTS):
        run = store.get_run(run_id)
        if run.status == Status.DONE:
            raise CannotResume(f"run {run.run_id} is done; it awaits no decision")
        if run.status == Status.RUNNING and run.liveness == LIVE:
            raise RunInUse(f"run {run.run_id} is being driven by a live process ({run.owner}); decide when it stops")
        state = fold(run.facts, run.run_id)
        fresh = check_decisions(run.run_id, state, {call_id: verdict}).fresh
        if not fresh:
            return False
        fact = ApprovalDecided(step=state.pending_approvals[call_id].step, call_id=call_id, approved=approved,
                               reason=reason, decided_by=decided_by if decided_by is not None else decider())
        if append_to_stopped(store.engine, run, [fact]):
            return True
    raise RunInUse(f"run {run_id} kept changing while the decision was being logged; try again")


def drift(run_id: str, state: RunState, registry: ToolRegistry) -> list[str]:
    """One line per tool whose traits in ``registry`` differ from the log's record of them."""
    if state.tool_traits is None:  # a log from before tools' traits were recorded: nothing to compare
        return []
    known = set(state.tool_traits) | {spec["name"] for spec in (state.started.tool_specs if state.started else [])}
    lines = []
    for name in registry.names():
        tool, was = registry.get(name), state.traits_of(name)
        if tool is None or was is None or name not in known:
            continue
        now = tool.traits()
        pairs = (("side_effects", was["side_effects"], now["side_effects"]),
                 ("needs_approval", was["needs_approval"], now["needs_approval"]),
                 ("idempotency_key", was["idempotency_key"], now["idempotency_key"]))
        differs = [f"{trait} {old!r} in the log, {new!r} now" for trait, old, new in pairs if old != new]
        if differs:
            lines.append(f"run {run_id}: tool {name!r} differs from the log's record: {'; '.join(differs)} "
                         "(calls already started are judged by the more careful of the two)")
    return lines


def report_drift(run_id: str, state: RunState, registry: ToolRegistry) -> None:
    """``drift``'s lines as warnings of the ``runner.resume`` logger."""
    for line in drift(run_id, state, registry):
        log.warning("%s", line)
