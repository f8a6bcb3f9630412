"""The store's side of a pool: queued runs, cancel requests, and what the sweep re-publishes.

A queued run is a ``runs`` row with status ``queued`` and one fact, ``run_queued``
(task, agent name, the limits and labels chosen at submission). The worker that takes
it appends ``run_started`` and the rest, under the same run id.

Only the owner appends to a run's log, so a cancel request is a ``run_cancels`` row
that the driving worker polls. A run still queued is cancelled at once: the canceller
moves its row from ``queued`` to ``cancelled`` by compare-and-set (no worker can claim
it after that) and appends its ``run_finished`` in the same transaction.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .._log.ids import derived_trace_id
from .._log.owner import owner_id
from .._log.records import DEAD, STALE, liveness
from .._log.statuses import Status
from .._loop.limits import Limits, limit_names
from .._loop.results import checked_run_id
from ..events import KIND_OF, RunFinished, RunQueued, encode
from ..store import RunStore
from ..store.clock import database_now
from ..store.engine import one_line
from ..store.recording import NAME_WIDTH, column, dumps, label_rows
from ..store.tables import events, run_cancels, run_labels, runs
from .agents import PoolError

DEFAULT_QUEUE = "celery"  # Celery's own default
RUN_QUEUED = KIND_OF[RunQueued]
CANCELLED_QUEUED = "cancelled before a worker started it"
CANCELLED_RUNNING = "cancel requested"


def record_queued(store: RunStore, task: str, agent: str, *, labels: Mapping[str, str] | None = None,
                  queue: str | None = None, run_id: str | None = None, **limits: Any) -> str:
    """Record a run as ``queued``: its row and its ``run_queued`` fact, in one transaction."""
    if not isinstance(task, str) or not task:
        raise ValueError("task must be a non-empty string")
    if not isinstance(agent, str) or not agent:
        raise ValueError("agent must be a non-empty agent name")
    unknown = sorted(set(limits) - set(limit_names()))
    if unknown:
        raise TypeError(f"unknown limit(s): {', '.join(unknown)} (known: {', '.join(limit_names())})")
    Limits(**limits)  # refused now rather than when a worker starts the run
    labels = dict(labels or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ValueError("labels must map strings to strings")
    run_id = checked_run_id(run_id)
    fact = RunQueued(run_id=run_id, task=task, agent_name=agent, limits=dict(limits), labels=labels, queue=queue)
    kind, data = encode(fact)
    now = datetime.now(UTC)
    row = {"run_id": run_id, "parent_run_id": None, "task": column(task), "system": "", "model": "",
           "provider": None, "agent_name": column(agent, NAME_WIDTH), "status": Status.QUEUED, "answer": None,
           "error": None, "steps": 0, "tokens": 0, "tool_calls": 0, "limits": dumps(limits), "tool_specs": "[]",
           "trace_id": derived_trace_id(run_id), "owner": None, "started_at": now, "updated_at": now,
           "heartbeat_at": None, "finished_at": None}
    labelled = label_rows(run_id, labels, now)  # so `runs --label` finds it while it waits

    def write(conn: Any) -> None:
        conn.execute(insert(runs), [row])
        if labelled:
            conn.execute(insert(run_labels), labelled)
        conn.execute(insert(events), [{"run_id": run_id, "seq": 1, "at": now, "step": 0, "kind": kind,
                                       "data": dumps(data), "span_id": None}])

    _write(store, f"cannot queue run {run_id}", write)
    return run_id


def request_cancel(store: RunStore, run_id: str) -> str:
    """Ask for run ``run_id`` to be cancelled; the status it has now (``cancelled`` for a queued run)."""
    run = store.get_run(run_id)
    if run.status not in (Status.QUEUED, Status.RUNNING):
        raise PoolError(f"run {run.run_id} has already finished ({run.status}); nothing to cancel")
    now = datetime.now(UTC)
    try:
        _write(store, f"cannot cancel run {run_id}", lambda conn: conn.execute(
            insert(run_cancels), [{"run_id": run_id, "requested_at": now, "requested_by": owner_id()}]))
    except PoolError as exc:
        if not isinstance(exc.__cause__, IntegrityError):
            raise  # else: asked before, and that request stands
    if run.status == Status.QUEUED and _cancel_queued(store, run_id, run.events[-1].seq if run.events else 0):
        return Status.CANCELLED
    return store.get_run(run_id).status


def _cancel_queued(store: RunStore, run_id: str, last_seq: int) -> bool:
    """Move a queued run to ``cancelled`` unless a worker claimed it first; whether it did."""
    finished = RunFinished(status=Status.CANCELLED, error=CANCELLED_QUEUED)
    kind, data = encode(finished)
    now = datetime.now(UTC)

    def work(conn: Any) -> bool:
        moved = conn.execute(update(runs).where(runs.c.run_id == run_id, runs.c.status == Status.QUEUED).values(
            status=Status.CANCELLED, error=CANCELLED_QUEUED, updated_at=now, finished_at=now)).rowcount
        if moved == 1:
            conn.execute(insert(events), [{"run_id": run_id, "seq": last_seq + 1, "at": now, "step": 0,
                                           "kind": kind, "data": dumps(data), "span_id": None}])
        return bool(moved == 1)

    return bool(_write(store, f"cannot cancel run {run_id}", work))


def cancel_requested(store: RunStore, run_id: str) -> bool:
    with store.reading() as conn:
        return conn.execute(select(run_cancels.c.run_id).where(run_cancels.c.run_id == run_id)).first() is not None


class StoreCancel:
    """A run's ``cancel`` option backed by ``run_cancels``: ``is_set()`` reads the store at most
    once every ``every_s`` (the loop polls it every few milliseconds while a model call runs).

    It lets a running tool call finish (``lets_tools_finish``): the run stops before its next
    model or tool call, with every call it started logged with its result, none left in doubt.
    """

    lets_tools_finish = True

    def __init__(self, store: RunStore, run_id: str, every_s: float = 0.5) -> None:
        self.store, self.run_id, self.every_s = store, run_id, every_s
        self._set = False
        self._next = 0.0
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        with self._lock:
            if self._set or time.monotonic() < self._next:
                return self._set
            self._next = time.monotonic() + self.every_s
        try:
            found = cancel_requested(self.store, self.run_id)
        except Exception:
            return False  # the store is briefly unreachable: the run's own next commit will say so
        self._set = self._set or found
        return self._set


@dataclass(frozen=True, slots=True)
class Touched:
    """A run a sweep is to publish: touched at ``at``, its ``updated_at`` having been ``was``."""

    run_id: str
    was: datetime
    at: datetime


def due_for_publish(store: RunStore, older_than_s: float, queue: str | None = None) -> list[Touched]:
    """Runs a worker on ``queue`` (None: the default queue) should get (again): submitted to that
    queue, queued or running with the owner gone, and untouched for ``older_than_s``.

    Each is touched (``updated_at``) by compare-and-set, so of several workers sweeping at once
    one publishes it, and it is not published again before ``older_than_s`` (``untouch`` gives
    it back when publishing fails). A run of another queue is left to that queue's workers (they
    may be the only ones that know its agent), and a run started without a pool to its own process.
    """
    now = datetime.now(UTC)
    cutoff = now - timedelta(seconds=older_than_s)
    query = (select(runs.c.run_id, runs.c.status, runs.c.owner, runs.c.heartbeat_at, runs.c.updated_at)
             .where(runs.c.status.in_([Status.QUEUED, Status.RUNNING]), runs.c.updated_at < cutoff)
             .order_by(runs.c.updated_at).limit(1000))
    with store.reading() as conn:
        rows = conn.execute(query).all()
        submitted = _queues(conn, [row[0] for row in rows])
        heartbeat_clock = database_now(conn) or now  # the server's on PostgreSQL, as the heartbeats are
    mine = queue or DEFAULT_QUEUE
    due: list[Touched] = []
    for run_id, status, owner, heartbeat_at, updated_at in rows:
        if run_id not in submitted or (submitted[run_id] or DEFAULT_QUEUE) != mine:
            continue
        if status == Status.RUNNING and liveness(status, owner, heartbeat_at, heartbeat_clock,
                                             run_id=run_id) not in (DEAD, STALE):
            continue
        touch = (update(runs).where(runs.c.run_id == run_id, runs.c.status == status,
                                    runs.c.updated_at == updated_at).values(updated_at=now))
        if _write(store, f"cannot sweep run {run_id}", lambda conn, s=touch: conn.execute(s).rowcount) == 1:
            due.append(Touched(str(run_id), updated_at, now))
    return due


def untouch(store: RunStore, touched: list[Touched]) -> None:
    """Give back runs a sweep touched but could not publish: as due as if never touched, so the
    other workers' sweeps are not held off a whole interval (unless something changed them since)."""
    for run in touched:
        _write(store, f"cannot sweep run {run.run_id}", lambda conn, r=run: conn.execute(
            update(runs).where(runs.c.run_id == r.run_id, runs.c.updated_at == r.at).values(updated_at=r.was)))


def _queues(conn: Any, run_ids: list[str]) -> dict[str, str | None]:
    """The queue each of ``run_ids`` was submitted to, for those a pool's ``submit`` queued."""
    found: dict[str, str | None] = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start:start + 500]
        for run_id, data in conn.execute(select(events.c.run_id, events.c.data).where(
                events.c.run_id.in_(chunk), events.c.kind == RUN_QUEUED)):
            queue = json.loads(data).get("queue")
            found[run_id] = queue if isinstance(queue, str) and queue else None
    return found


def _write(store: RunStore, what: str, work: Any) -> Any:
    try:
        with store.engine.begin() as conn:
            return work(conn)
    except SQLAlchemyError as exc:
        raise PoolError(f"{what}: {one_line(exc)}") from exc

