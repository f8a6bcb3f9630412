"""Approval decisions checked against a run's log, and the facts that record them.

A decision is a fact of its own (``approval_decided``, with who made it). A decision given
again is the same fact (nothing new is logged); one that contradicts a logged decision is
refused. Both the loop (a resume given decisions) and the store (``RunStore.decide``) check
decisions here, so neither reaches into the other.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from typing import NamedTuple

from ..errors import CannotResume
from .facts import ApprovalDecided
from .state import RunState

Decision = bool | str


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


class Refusal(NamedTuple):
    """Why a decision given for call ``call_id`` is refused, in one sentence (``text``).

    ``unknown``: the run waits on no such call, a usage mistake where the call id was typed.
    The CLI, the console and the library each turn a refusal into their own error.
    """

    call_id: str
    text: str
    unknown: bool = False


def refusal(state: RunState, given: Mapping[str, Decision], *, run: str | None = None) -> Refusal | None:
    """Why the decisions ``given`` cannot be applied to the run folded into ``state``; None when they can.

    A call the run does not wait on comes first, then a call in doubt (approved and started
    before the run stopped) and a decision against a logged one. ``run`` names the run in
    the text (default: its id; the CLI gives the short one).
    """
    name = run if run is not None else state.run_id
    unanswered = {call.id for call in state.remaining_calls}
    for call_id in given:
        awaited = call_id in state.pending_approvals or (call_id in unanswered and call_id in state.decisions)
        if not awaited and not state.in_doubt(call_id):
            waiting = ", ".join(c for c in state.pending_approvals if not state.in_doubt(c)) or "none"
            return Refusal(call_id, f"run {name} has no call {call_id!r} awaiting approval (awaiting: {waiting})",
                           unknown=True)
    for call_id, decision in given.items():
        if state.in_doubt(call_id):  # approved and started before the run stopped: too late to decide again
            return Refusal(call_id, f"run {name}: call {call_id!r} was approved and started before the run "
                                    "stopped; it can no longer be decided")
        logged = state.decisions.get(call_id) if call_id in unanswered else None
        if logged is not None and logged != decision:
            by = state.decided_by.get(call_id)
            return Refusal(call_id, f"run {name}: call {call_id!r} was {describe(logged)}"
                                    f"{f' by {by}' if by else ''}; it cannot be {describe(decision)} now")
    return None


def check_decisions(run_id: str, state: RunState, given: Mapping[str, Decision]) -> Checked:
    """Check the decisions ``given`` to a resume against the log.

    A decision ``refusal`` refuses raises ``CannotResume`` with its text.
    A decision of the wrong type raises ``ValueError``.
    """
    refused = refusal(state, given, run=run_id)
    if refused is not None:
        raise CannotResume(refused.text)
    unanswered = {call.id for call in state.remaining_calls}
    fresh: dict[str, Decision] = {}
    for call_id, decision in given.items():
        if call_id in unanswered and call_id in state.decisions:
            continue  # the same decision again: nothing new to log
        if not isinstance(decision, (bool, str)):
            raise ValueError(f"decision for {call_id!r} must be True, False or a reason string, got {decision!r}")
        fresh[call_id] = decision
    applied = {c: v for c, v in state.decisions.items() if c in unanswered}
    return Checked(fresh, {**applied, **fresh})


def decided_facts(state: RunState, fresh: Mapping[str, Decision], decided_by: str) -> list[ApprovalDecided]:
    """The ``approval_decided`` facts of ``fresh`` decisions, each at the step that asked for it."""
    return [ApprovalDecided(step=state.pending_approvals[call_id].step, call_id=call_id, approved=verdict is True,
                            reason=verdict if isinstance(verdict, str) else None, decided_by=decided_by)
            for call_id, verdict in fresh.items()]
