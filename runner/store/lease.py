"""Who drives a run: the owner lease, taken by compare-and-set, kept alive by a heartbeat.

A run's row names its ``owner`` (the process driving it) and when that owner last
showed signs of life (``heartbeat_at``). While a run is live its process refreshes
the heartbeat every ``HEARTBEAT_S`` from a background thread, even while the model
or a tool is busy for minutes, so a run whose process died is seen as gone after
``LEASE_S`` anywhere (and at once where the process itself can be checked: its host,
boot and PID namespace). On PostgreSQL the heartbeat is the server's clock (``now()``),
never the process's: hosts whose clocks disagree still agree on a heartbeat's age.

Taking a run over is one ``UPDATE ... WHERE`` the row is still exactly as the taker
read it (status, owner, heartbeat): of two processes that race for a run, one
update matches and the other matches nothing. A worker pool relies on this too.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import ColumnElement, Engine, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from .._log.statuses import RUNNING
from ..errors import StoreError
from .engine import one_line
from .records import STALE_AFTER_S, RunSummary
from .tables import UTCDateTime, runs

HEARTBEAT_S: Final = 10.0
LEASE_S: Final = STALE_AFTER_S


def heartbeat_now(engine: Engine) -> datetime | ColumnElement[datetime]:
    """What a heartbeat written now holds: the server's clock on PostgreSQL, this process's elsewhere."""
    if engine.dialect.name == "postgresql":
        return func.now(type_=UTCDateTime())
    return datetime.now(UTC)


def claim(engine: Engine, seen: RunSummary, owner: str) -> bool:
    """Make ``owner`` the run's owner if the row is still as ``seen``; whether it was."""
    now = datetime.now(UTC)
    statement = (update(runs)
                 .where(runs.c.run_id == seen.run_id, runs.c.status == seen.status,
                        runs.c.owner.is_not_distinct_from(seen.owner),
                        runs.c.heartbeat_at.is_not_distinct_from(seen.heartbeat_at))
                 .values(owner=owner, status=RUNNING, heartbeat_at=heartbeat_now(engine), updated_at=now,
                         finished_at=None))
    try:
        with engine.begin() as conn:
            return conn.execute(statement).rowcount == 1
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot take over run {seen.run_id}: {one_line(exc)}") from None


class Heartbeat:
    """Refreshes ``heartbeat_at`` of the runs this process drives, every ``interval_s``.

    One daemon thread per store, started with the first run and idle (gone) when
    none is left. A failed refresh is retried at the next beat: the commits of the
    runs themselves refresh the heartbeat too, so one missed beat loses nothing.
    """

    def __init__(self, engine: Engine, owner: Callable[[], str], interval_s: float = HEARTBEAT_S) -> None:
        self._engine = weakref.ref(engine)
        self._owner = owner
        self.interval_s = interval_s
        self.after_fork()

    def after_fork(self) -> None:
        """No run to beat for and no thread (at start, and in a forked child: the parent's runs
        are the parent's, and its lock may have been held by its beating thread)."""
        self._runs: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, run_id: str) -> None:
        with self._lock:
            self._runs.add(run_id)
            if self._thread is None or not self._thread.is_alive():
                self._wake.clear()
                self._thread = threading.Thread(target=self._beat, name="runner-heartbeat", daemon=True)
                self._thread.start()

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def stop(self) -> None:
        with self._lock:
            self._runs.clear()
        self._wake.set()

    def beat(self) -> None:
        """Refresh every run this process drives now (the thread calls this each interval)."""
        with self._lock:
            run_ids = sorted(self._runs)
        engine = self._engine()
        if not run_ids or engine is None:
            return
        mine = (runs.c.run_id.in_(run_ids), runs.c.owner == self._owner(), runs.c.status == RUNNING)
        if engine.dialect.name == "postgresql":
            # A row another transaction holds is a run's own commit under way, which refreshes its
            # heartbeat anyway: skip it rather than wait for it (or deadlock with a group commit
            # that locks the same runs in another order).
            free = select(runs.c.run_id).where(*mine).with_for_update(skip_locked=True).scalar_subquery()
            statement = update(runs).where(runs.c.run_id.in_(free)).values(heartbeat_at=heartbeat_now(engine))
        else:
            statement = update(runs).where(*mine).values(heartbeat_at=heartbeat_now(engine))
        try:
            with engine.begin() as conn:
                conn.execute(statement)
        except SQLAlchemyError:
            pass  # the next beat, or the run's next commit, refreshes it

    def _beat(self) -> None:
        while not self._wake.wait(self.interval_s):
            with self._lock:
                if not self._runs:
                    self._thread = None
                    return
            self.beat()
