"""Who drives a run: the owner lease, taken by compare-and-set, kept alive by a heartbeat.

A background thread refreshes ``heartbeat_at`` of the runs this process drives; on
PostgreSQL it is the server's clock. Taking a run over is one ``UPDATE`` that matches only
the row as the taker read it, so of two racers one wins. A run whose close could not be
committed is let go of, and its row released once the store takes writes again.
Why, in full: docs/event-log.md, "The lease".
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import ColumnElement, Engine, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from .._log.records import STALE_AFTER_S, RunSummary
from .._log.statuses import Status
from ..errors import StoreError
from .engine import one_line
from .owner import forget_let_go, remember_let_go, was_let_go
from .tables import UTCDateTime, runs

HEARTBEAT_S: Final = 10.0
LEASE_S: Final = STALE_AFTER_S
RELEASE_RETRY_S: Final = 1.0  # how often a run this process let go of is offered back while the store fails


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
                 .values(owner=owner, status=Status.RUNNING, heartbeat_at=heartbeat_now(engine), updated_at=now,
                         finished_at=None))
    try:
        with engine.begin() as conn:
            return conn.execute(statement).rowcount == 1
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot take over run {seen.run_id}: {one_line(exc)}") from None


def take_over(engine: Engine, seen: RunSummary, owner: str, heartbeat: Heartbeat) -> bool:
    """``claim``, for a run this process may have let go of since ``seen`` was read.

    Its release may have reached the row meanwhile (no owner, no heartbeat): the claim
    is then made on the released row. No release of the run goes out while it is taken,
    and none after: the run is this process's again.
    """
    with heartbeat.holding_releases():
        taken = claim(engine, seen, owner)
        if not taken and was_let_go(seen.run_id, seen.owner):
            taken = claim(engine, replace(seen, owner=None, heartbeat_at=None), owner)
        if taken:
            heartbeat.taken_back(seen.run_id)
    return taken


class Heartbeat:
    """Refreshes ``heartbeat_at`` of the runs this process drives, every ``interval_s``.

    One daemon thread per store, started with the first run and idle (gone) when
    none is left. A failed refresh is retried at the next beat: the commits of the
    runs themselves refresh the heartbeat too, so one missed beat loses nothing.
    The same thread releases the runs this process let go of (``let_go``), every
    ``RELEASE_RETRY_S`` until the store takes the write.
    """

    def __init__(self, engine: Engine, owner: Callable[[], str], interval_s: float = HEARTBEAT_S) -> None:
        self._engine = weakref.ref(engine)
        self._owner = owner
        self.interval_s = interval_s
        self.after_fork()

    def after_fork(self) -> None:
        """Start with no run to beat for or release, and no thread: at start, and in a forked child.

        In a child the parent's runs are the parent's, and its beating thread may have held the lock.
        """
        self._runs: set[str] = set()
        self._releases: dict[str, str] = {}  # run id -> the owner it was let go of as
        self._lock = threading.Lock()
        self._releasing = threading.Lock()  # held while releases are written, and while a run is taken
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, run_id: str) -> None:
        with self._lock:
            self._runs.add(run_id)
            self._start_locked()

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def let_go(self, run_id: str, owner: str) -> None:
        """This process, as ``owner``, stops driving ``run_id`` without having committed its close.

        From now on the run reads ``stale`` here, and once the store takes the write its row
        names no owner and no heartbeat, so any process may resume it at once. (Kept
        ``running`` as ours, it would read live until this process exits.)
        """
        remember_let_go(run_id, owner)
        with self._lock:
            self._runs.discard(run_id)
            self._releases[run_id] = owner
            self._start_locked()

    def taken_back(self, run_id: str) -> None:
        """This process claimed ``run_id`` again: it is not to be released."""
        with self._lock:
            self._releases.pop(run_id, None)
        forget_let_go(run_id)

    @contextmanager
    def holding_releases(self) -> Iterator[None]:
        """No release is written while this is held (a claim of a run this process let go of)."""
        with self._releasing:
            yield

    def stop(self) -> None:
        """Stop beating, as the store closes; the releases still owed get one last try.

        Past it, a run this process let go of reads live to other processes
        on this host until this one exits.
        """
        if self._releases:
            self.release()
        with self._lock:
            self._runs.clear()
            self._releases.clear()
        self._wake.set()

    def beat(self) -> None:
        """Refresh every run this process drives now (the thread calls this each interval)."""
        with self._lock:
            run_ids = sorted(self._runs)
        engine = self._engine()
        if not run_ids or engine is None:
            return
        mine = (runs.c.run_id.in_(run_ids), runs.c.owner == self._owner(), runs.c.status == Status.RUNNING)
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

    def release(self) -> None:
        """Write the releases still owed: each row loses its owner and heartbeat.

        Only a row still running as this process left it is released. The thread
        calls this; a failure waits for the next try.
        """
        engine = self._engine()
        if engine is None:
            return
        with self._releasing:
            with self._lock:
                owed = dict(self._releases)
            for run_id, owner in sorted(owed.items()):
                statement = (update(runs).where(runs.c.run_id == run_id, runs.c.owner == owner,
                                                runs.c.status == Status.RUNNING).values(owner=None, heartbeat_at=None))
                try:
                    with engine.begin() as conn:
                        conn.execute(statement)
                except SQLAlchemyError:
                    return  # the store still fails: the next try writes the rest
                with self._lock:
                    if self._releases.get(run_id) == owner:
                        del self._releases[run_id]

    def _start_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._wake.clear()
            self._thread = threading.Thread(target=self._beat, name="runner-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._wake.wait(min(self.interval_s, RELEASE_RETRY_S) if self._releases else self.interval_s):
            with self._lock:
                if not self._runs and not self._releases:
                    self._thread = None
                    return
            self.beat()
            if self._releases:
                self.release()
