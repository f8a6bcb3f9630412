"""Facts appended to a run that no process drives: a decision on a run awaiting approval.

Only a run's owner appends to its log while it runs. A stopped run has no owner to do it,
so the writer fences itself: one transaction moves the run's ``updated_at`` on if the row
is still as the writer read it (status, owner, ``updated_at``), and appends the facts right
after the last event it read. Of two writers, or a writer and a resume, that read the same
row, one goes ahead; the other matches nothing (or meets the taken ``seq``) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .._log.decisions import Decision, check_decisions, decider
from .._log.records import LIVE, StoredRun
from .._log.state import fold
from .._log.statuses import Status
from ..errors import CannotResume, RunInUse, StoreError
from ..events import ApprovalDecided, Event, encode
from .engine import one_line
from .rows import dumps
from .tables import events, runs

DECIDE_ATTEMPTS = 3  # reads of a run whose row changed under a decision, before giving up


def append_to_stopped(engine: Engine, seen: StoredRun, facts: Sequence[Event]) -> bool:
    """Append ``facts`` to run ``seen`` if nothing changed it since it was read; whether they were."""
    now = datetime.now(UTC)
    fence = (update(runs)
             .where(runs.c.run_id == seen.run_id, runs.c.status == seen.status,
                    runs.c.owner.is_not_distinct_from(seen.owner), runs.c.updated_at == seen.updated_at)
             .values(updated_at=now))
    last = seen.events[-1].seq if seen.events else 0
    rows = []
    for seq, fact in enumerate(facts, last + 1):
        kind, data = encode(fact)
        rows.append({"run_id": seen.run_id, "seq": seq, "at": now, "step": fact.step, "kind": kind,
                     "data": dumps(data), "span_id": None})
    try:
        with engine.begin() as conn:
            if conn.execute(fence).rowcount != 1:
                return False
            conn.execute(insert(events), rows)
    except IntegrityError:  # another writer appended after the read without moving the row: those seqs are taken
        return False
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot append to run {seen.run_id}: {one_line(exc)}") from None
    return True


def decide(engine: Engine, get_run: Callable[[str], StoredRun], run_id: str, call_id: str, approved: bool,
           reason: str | None = None, *, decided_by: str | None = None) -> bool:
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
    verdict: Decision = True if approved else (reason or False)
    for _ in range(DECIDE_ATTEMPTS):
        run = get_run(run_id)
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
        if append_to_stopped(engine, run, [fact]):
            return True
    raise RunInUse(f"run {run_id} kept changing while the decision was being logged; try again")
