"""A worker pool's queue, kept in the store: queued runs, cancel requests, what a sweep publishes again.

A queued run is a ``runs`` row with status ``queued`` and one fact, ``run_queued``; the worker
that takes it appends the rest under the same run id. Only the owner appends to a log, so a
cancel request is a ``run_cancels`` row that the driving worker polls. A run still queued is
cancelled at once, by compare-and-set, with its ``run_finished`` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import Connection, Engine, delete, exists, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from .._log.ids import derived_trace_id
from .._log.state import fold
from .._log.statuses import Status
from ..errors import StoreError
from ..events import KIND_OF, ApprovalDecided, Event, RunFinished, RunQueued, decode, encode
from .clock import database_now
from .engine import one_line
from .owner import judge
from .queries import read_run
from .rows import column, dumps, event_data, insert_new, label_rows, run_row
from .tables import events, run_cancels, run_labels, runs
from .transaction import UNNAMED

DEFAULT_QUEUE: Final = "celery"  # Celery's own default: where a run submitted without a queue waits
RUN_QUEUED: Final = KIND_OF[RunQueued]
APPROVAL_DECIDED: Final = KIND_OF[ApprovalDecided]
SWEPT_AT_ONCE: Final = 1000  # runs a sweep looks at, oldest first
BATCH: Final = 500  # run ids per IN (...) list, well under SQLite's limit on bound parameters


@dataclass(frozen=True, slots=True)
class Touched:
    """A run a sweep is to publish: touched at ``at``, its ``updated_at`` having been ``was``."""

    run_id: str
    was: datetime
    at: datetime


@dataclass(frozen=True, slots=True)
class Waiting:
    """A run a sweep found due, as it read its row (the touch is a compare-and-set on it)."""

    run_id: str
    status: Status
    updated_at: datetime


@contextmanager
def writing(engine: Engine, what: str) -> Iterator[Connection]:
    """One write transaction; a database failure is one ``StoreError`` line starting with ``what``."""
    try:
        with engine.begin() as conn:
            yield conn
    except SQLAlchemyError as exc:
        raise StoreError(f"{what}: {one_line(exc)}") from None


def queue_run(engine: Engine, queued: RunQueued) -> None:
    """Record a run as ``queued``: its row, its labels and its ``run_queued`` fact, in one transaction."""
    run_id = queued.run_id
    now = datetime.now(UTC)
    row = run_row(run_id, queued, derived_trace_id(run_id), None, now) | {
        "status": Status.QUEUED, "answer": None, "error": None, "steps": 0, "tokens": 0, "tool_calls": 0,
        "cost_known_usd": 0.0, "costs_unknown": 0,
        "updated_at": now, "heartbeat_at": None, "finished_at": None}
    labelled = label_rows(run_id, queued.labels, now)  # so `runs --label` finds it while it waits
    with writing(engine, f"cannot queue run {run_id}") as conn:
        conn.execute(insert(runs), [row])
        if labelled:
            conn.execute(insert(run_labels), labelled)
        conn.execute(insert(events), [_event_row(run_id, 1, now, queued)])


def request_cancel(engine: Engine, run_id: str, by: str) -> bool:
    """Record that ``by`` asks for run ``run_id`` to be cancelled; False when it was asked before.

    The earlier request stands.
    """
    row = {"run_id": run_id, "requested_at": datetime.now(UTC), "requested_by": by}
    statement = insert_new(run_cancels, engine.dialect).returning(run_cancels.c.run_id)
    with writing(engine, f"cannot cancel run {run_id}") as conn:
        return conn.execute(statement, row).first() is not None  # no row back: it was there already


def cancel_queued(engine: Engine, run_id: str, error: str) -> bool:
    """Cancel a run still queued, logging its ``run_finished``; False when a worker claimed it first."""
    now = datetime.now(UTC)
    with writing(engine, f"cannot cancel run {run_id}") as conn:
        moved = conn.execute(update(runs).where(runs.c.run_id == run_id, runs.c.status == Status.QUEUED).values(
            status=Status.CANCELLED, error=column(error), updated_at=now, finished_at=now)).rowcount
        if moved != 1:
            return False
        last = conn.execute(select(func.max(events.c.seq)).where(events.c.run_id == run_id)).scalar()
        conn.execute(insert(events), [_event_row(run_id, int(last or 0) + 1, now,
                                                 RunFinished(status=Status.CANCELLED, error=error))])
        return True


def cancel_request(conn: Connection, run_id: str) -> str | None:
    """Who asked for run ``run_id`` to be cancelled (``UNNAMED`` when the row names nobody), or None."""
    row = conn.execute(select(run_cancels.c.requested_by).where(run_cancels.c.run_id == run_id)).first()
    return None if row is None else (row.requested_by or UNNAMED)


def clear_cancel(engine: Engine, run_id: str) -> None:
    """Forget run ``run_id``'s cancel request, if any (it asked to stop a run that has ended since)."""
    with writing(engine, f"cannot clear the cancel request of run {run_id}") as conn:
        conn.execute(delete(run_cancels).where(run_cancels.c.run_id == run_id))


def due(conn: Connection, untouched_since: datetime, queue: str, now: datetime) -> list[Waiting]:
    """Runs submitted to ``queue``, queued, running with their owner gone or decided, untouched since then.

    Decided: awaiting approval with every call decided, as when the publish after the decision failed.
    A run of another queue is left to that queue's workers (they may be the only ones
    that know its agent), and a run started without a pool to its own process.
    """
    columns = (runs.c.run_id, runs.c.status, runs.c.owner, runs.c.heartbeat_at, runs.c.updated_at)
    query = (select(*columns)
             .where(runs.c.status.in_([Status.QUEUED, Status.RUNNING]), runs.c.updated_at < untouched_since)
             .order_by(runs.c.updated_at).limit(SWEPT_AT_ONCE))
    rows = [*conn.execute(query).all(), *_decided(conn, untouched_since, columns)]
    submitted = _queues(conn, [row.run_id for row in rows])
    heartbeat_clock = database_now(conn) or now  # the server's on PostgreSQL, as the heartbeats are
    found = []
    for run_id, status, owner, heartbeat_at, updated_at in rows:
        if run_id not in submitted or (submitted[run_id] or DEFAULT_QUEUE) != queue:
            continue
        if status == Status.RUNNING and not judge(status, owner, heartbeat_at, heartbeat_clock, run_id=run_id).gone:
            continue
        found.append(Waiting(str(run_id), Status(status), updated_at))
    return found


def _decided(conn: Connection, untouched_since: datetime, columns: tuple[Any, ...]) -> list[Any]:
    """The rows of runs awaiting approval whose log ends with decisions that leave no call waiting.

    Only a decision's fact ends such a log, so the few runs it ends are read and folded; an undecided
    run costs an index lookup of its last event.
    """
    logged = events.alias("logged")
    last = select(func.max(logged.c.seq)).where(logged.c.run_id == runs.c.run_id).scalar_subquery()
    ends_decided = exists().where(events.c.run_id == runs.c.run_id, events.c.seq == last,
                                  events.c.kind == APPROVAL_DECIDED)
    query = (select(*columns).where(runs.c.status == Status.AWAITING_APPROVAL, runs.c.updated_at < untouched_since,
                                    ends_decided).order_by(runs.c.updated_at).limit(SWEPT_AT_ONCE))
    found = []
    for row in conn.execute(query).all():
        run = read_run(conn, row.run_id)
        if run is not None and not fold(run.facts, run.run_id).pending_approvals:
            found.append(row)
    return found


def touch(engine: Engine, run: Waiting, now: datetime) -> Touched | None:
    """Mark ``run`` as published at ``now`` if its row is still as read, else None.

    The row changes when another worker's sweep took the run, or the run moved on.
    """
    statement = update(runs).where(runs.c.run_id == run.run_id, runs.c.status == run.status,
                                   runs.c.updated_at == run.updated_at).values(updated_at=now)
    with writing(engine, f"cannot sweep run {run.run_id}") as conn:
        return Touched(run.run_id, run.updated_at, now) if conn.execute(statement).rowcount == 1 else None


def untouch(engine: Engine, touched: Sequence[Touched]) -> None:
    """Give back runs a sweep touched but could not publish, unless something changed them since."""
    for run in touched:
        with writing(engine, f"cannot sweep run {run.run_id}") as conn:
            conn.execute(update(runs).where(runs.c.run_id == run.run_id, runs.c.updated_at == run.at)
                         .values(updated_at=run.was))


def _queues(conn: Connection, run_ids: list[str]) -> dict[str, str | None]:
    """The queue each of ``run_ids`` was submitted to, for those a pool's ``submit`` queued."""
    found: dict[str, str | None] = {}
    for start in range(0, len(run_ids), BATCH):
        query = select(events.c.run_id, events.c.seq, events.c.step, events.c.data).where(
            events.c.run_id.in_(run_ids[start:start + BATCH]), events.c.kind == RUN_QUEUED)
        for run_id, seq, step, data in conn.execute(query):
            queued = decode(RUN_QUEUED, event_data(run_id, seq, data), step, run_id)
            if isinstance(queued, RunQueued):
                found[run_id] = queued.queue if isinstance(queued.queue, str) and queued.queue else None
    return found


def _event_row(run_id: str, seq: int, at: datetime, fact: Event) -> dict[str, Any]:
    kind, data = encode(fact)
    return {"run_id": run_id, "seq": seq, "at": at, "step": 0, "kind": kind, "data": dumps(data), "span_id": None}
