"""Facts appended to a run that no process drives: a decision, a send-back, a call's late result.

Only a run's owner appends to its log while it runs. A stopped run has no owner to do it,
so the writer fences itself: one transaction moves the run's ``updated_at`` on if the row
is still as the writer read it (status, owner, ``updated_at``), and appends the facts right
after the last event it read. Of two writers, or a writer and a resume, that read the same
row, one goes ahead; the other matches nothing (or meets the taken ``seq``) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .._log.decisions import Decision, check_decisions, decided_facts, decider
from .._log.limits import Limits, limit_names
from .._log.records import LIVE, StoredEvent, StoredRun
from .._log.state import fold
from .._log.statuses import REQUEUABLE, Status
from ..errors import CannotResume, RunInUse, StoreError
from ..events import ApprovalDecided, Event, RunRequeued, RunResumed, RunStarted, ToolReturnedLate, encode
from .engine import one_line
from .rows import dumps, event_data
from .tables import events, runs

DECIDE_ATTEMPTS = 3  # reads of a run whose row changed under a decision, before giving up


def append_to_stopped(engine: Engine, seen: StoredRun, facts: Sequence[Event]) -> bool:
    """Append ``facts`` to run ``seen`` if nothing changed it since it was read; whether they were."""
    return appended(engine, seen, facts) is not None


def appended(engine: Engine, seen: StoredRun, facts: Sequence[Event]) -> StoredRun | None:
    """``append_to_stopped``, returning run ``seen`` as it is now (with ``facts``), or None when it changed."""
    now = datetime.now(UTC)
    fence = (update(runs)
             .where(runs.c.run_id == seen.run_id, runs.c.status == seen.status,
                    runs.c.owner.is_not_distinct_from(seen.owner), runs.c.updated_at == seen.updated_at)
             .values(updated_at=now))
    last = seen.events[-1].seq if seen.events else 0
    added = []
    for seq, fact in enumerate(facts, last + 1):
        kind, data = encode(fact)
        added.append(StoredEvent(seq, now, fact.step, kind, event_data(seen.run_id, seq, dumps(data)), None))
    rows = [{"run_id": seen.run_id, "seq": event.seq, "at": now, "step": event.step, "kind": event.kind,
             "data": dumps(event.data), "span_id": None} for event in added]
    try:
        with engine.begin() as conn:
            if conn.execute(fence).rowcount != 1:
                return None
            conn.execute(insert(events), rows)
    except IntegrityError:  # another writer appended after the read without moving the row: those seqs are taken
        return None
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot append to run {seen.run_id}: {one_line(exc)}") from None
    return replace(seen, updated_at=now, events=[*seen.events, *added], facts=(*seen.facts, *facts))


def check_stopped(run: StoredRun) -> None:
    """Refuse a decision on a done run (``CannotResume``) or on one a live process drives (``RunInUse``)."""
    if run.status == Status.DONE:
        raise CannotResume(f"run {run.run_id} is done; it awaits no decision")
    if run.status == Status.RUNNING and run.liveness == LIVE:
        raise RunInUse(f"run {run.run_id} is being driven by a live process ({run.owner}); decide when it stops")


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
        check_stopped(run)
        state = fold(run.facts, run.run_id)
        fresh = check_decisions(run.run_id, state, {call_id: verdict}).fresh
        if not fresh:
            return False
        fact = ApprovalDecided(step=state.pending_approvals[call_id].step, call_id=call_id, approved=approved,
                               reason=reason, decided_by=decided_by if decided_by is not None else decider())
        if append_to_stopped(engine, run, [fact]):
            return True
    raise RunInUse(f"run {run_id} kept changing while the decision was being logged; try again")


def decide_all(engine: Engine, get_run: Callable[[str], StoredRun], run: StoredRun,
               decisions: Mapping[str, Decision], decided_by: str) -> StoredRun:
    """Log every decision on run ``run`` (as read) with one compare-and-set; the run as appended.

    All are checked before any is logged, so a refusal logs none. A run that changed
    since it was read is read again and checked again, ``DECIDE_ATTEMPTS`` times at most.
    """
    if not isinstance(decided_by, str):
        raise TypeError(f"decided_by must be a string, got {type(decided_by).__name__}")
    for attempt in range(DECIDE_ATTEMPTS):
        if attempt:
            run = get_run(run.run_id)
        check_stopped(run)
        state = fold(run.facts, run.run_id)
        fresh = check_decisions(run.run_id, state, decisions).fresh
        if not fresh:
            return run
        done = appended(engine, run, decided_facts(state, fresh, decided_by))
        if done is not None:
            return done
    raise RunInUse(f"run {run.run_id} kept changing while the decisions were being logged; try again")


def requeue(engine: Engine, get_run: Callable[[str], StoredRun], run: StoredRun, limits: Mapping[str, Any],
            requeued_by: str) -> StoredRun:
    """Log run ``run`` (as read) sent back to its pool with ``limits`` (``run_requeued``); the run as appended.

    The limits are checked before anything is logged: a ``TypeError`` for an unknown one, a
    ``ValueError`` for a value out of range. ``CannotResume`` for a run not stopped on a limit or an error.
    """
    if not isinstance(requeued_by, str):
        raise TypeError(f"requeued_by must be a string, got {type(requeued_by).__name__}")
    unknown = sorted(set(limits) - set(limit_names()))
    if unknown:
        raise TypeError(f"unknown limit(s): {', '.join(unknown)} (known: {', '.join(limit_names())})")
    for attempt in range(DECIDE_ATTEMPTS):
        if attempt:
            run = get_run(run.run_id)
        if run.status not in REQUEUABLE:
            raise CannotResume(f"run {run.run_id} has not stopped on a limit or an error ({run.status}); "
                               "only such a run goes back to its pool")
        state = fold(run.facts, run.run_id)
        Limits.from_dict({**state.limits, **limits})  # a ValueError now rather than when a worker resumes it
        done = appended(engine, run, [RunRequeued(step=state.steps, limits=dict(limits), requeued_by=requeued_by)])
        if done is not None:
            return done
    raise RunInUse(f"run {run.run_id} kept changing while it was being sent back; try again")


def log_late(engine: Engine, get_run: Callable[[str], StoredRun], run_id: str, fact: ToolReturnedLate,
             segment: int) -> bool:
    """Append a call's late result to run ``run_id`` if the run still ends where the call ran; whether it was.

    ``segment`` counts the run's resumes before the call's part. Nothing is logged when the run is
    running (its end was never written, or it is resumed now) or was resumed since (the resume read
    the call's outcome as unknown), nor a second time for the same call and part.
    """
    for _ in range(DECIDE_ATTEMPTS):
        run = get_run(run_id)
        if run.status == Status.RUNNING:
            return False
        state = fold(run.facts, run.run_id)
        if state.segment != segment or _logged_late(run.facts, fact.call_id):
            return False
        if append_to_stopped(engine, run, [fact]):
            return True
    return False


def _logged_late(facts: Sequence[Event], call_id: str) -> bool:
    """Whether the last part of the run logged a late result of ``call_id``."""
    for fact in reversed(facts):
        match fact:
            case ToolReturnedLate() if fact.call_id == call_id:
                return True
            case RunResumed() | RunStarted():
                return False
            case _:
                pass
    return False
