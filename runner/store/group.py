"""Group commit: one transaction carries the pending facts of every run that shares a store.

SQLite has one writer and a commit costs far more than the rows it carries, so when
many runs (threads, or coroutines of one event loop) write one store, each committing
on its own spends the store's time on commits. Instead every run hands its buffered
rows to the store's ``GroupCommitter`` as a ``Batch``:

- a thread that must wait (``commit``) becomes the *leader* when nobody is writing:
  it takes every batch queued so far, its own included, and commits them in one
  transaction. Batches handed in meanwhile wait for the next leader. A run alone
  therefore commits on its own thread with no hand-off, as it always did;
- a batch nobody blocks on (``submit``, the async driver's way, so the event loop's
  thread never waits on the database) is committed by a background writer thread,
  and its ``future`` completes when the commit that carries it is done.

Batches are committed in the order they were handed in, and a run hands in its next
batch only after the previous one is committed (the loop waits for each before it
acts), so each run's events stay contiguous and in order. When a group's transaction
fails, its batches are retried one transaction each, so a run whose rows cannot be
written (a taken run id, say) fails alone; a later batch of that run in the same
group is not written either (its log must not skip events).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from .engine import one_line
from .prepared import Prepared

Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class Batch:
    """One run's rows for one commit: its ``runs`` row (new) or summary update, events, tools."""

    run_id: str
    new_run: Row | None
    labels: list[Row]
    update: Row | None
    events: list[tuple[Any, ...]]  # ``events`` rows, in the insert's column order
    tools: list[Row]
    queued: bool = False  # ``new_run`` fills in the row a queued run already has (runner.pool)
    full_update: bool = True  # ``update`` holds the whole summary, not just the progress columns
    future: Future[None] | None = None
    waiter: threading.Condition | None = None  # the waiting thread's own condition, if a thread waits
    done: bool = False
    error: StoreError | None = None


class GroupCommitter:
    """The one writer of a store's run logs: commits queued batches in groups, in order."""

    def __init__(self, engine: Engine, statements: Callable[[], dict[str, Prepared]]) -> None:
        self.engine = engine
        self._statements = statements
        self._begin = "BEGIN IMMEDIATE" if engine.dialect.name == "sqlite" else ""
        self._dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        # One lock; every waiting thread sleeps on a condition of its own, so a commit wakes
        # the threads it carried and the next leader, never all fifty waiters at once.
        self._lock = threading.Lock()
        self._mine = threading.local()
        self._writer_wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)  # notified when a commit ends (``close`` waits on it)
        self._queue: list[Batch] = []
        self._leading = False
        self._writer: threading.Thread | None = None
        self._closed = False
        # The writer's pooled connection, held between commits: one writer needs one, and a
        # checkout plus a reset-on-return per commit would cost as much as SQLite's commit.
        # Only the leader touches it; a forked child (worker pools fork) gets its own.
        self._conn: Any = None
        self._conn_pid = 0
        self.largest_group = 0  # the most batches one transaction has carried (for tests and benchmarks)
        self.commits = 0  # transactions committed (for tests and benchmarks)

    @property
    def busy(self) -> bool:
        """Whether a commit is under way right now."""
        return self._leading

    @property
    def queued(self) -> int:
        """Batches waiting for the next commit."""
        return len(self._queue)

    def commit(self, batch: Batch) -> None:
        """Commit ``batch`` (in a group with whatever else is queued); raise its ``StoreError``."""
        with self._lock:
            self._queue.append(batch)
            self._wait_locked(batch)
        if batch.error is not None:
            raise batch.error

    def wait(self, batch: Batch) -> None:
        """Block until a batch handed in before is committed (or failed); never raises."""
        if batch.done:  # set once, under the lock, after the batch's outcome: nothing to wait for
            return
        with self._lock:
            self._wait_locked(batch)

    def submit(self, batch: Batch) -> Future[None]:
        """Queue ``batch`` for the background writer; the future completes with its commit."""
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()  # it cannot be called off: the rows are the run's log
        batch.future = future
        with self._lock:
            self._queue.append(batch)
            if self._writer is None or not self._writer.is_alive():
                self._closed = False
                self._writer = threading.Thread(target=self._write_forever, name="runner-group-commit",
                                                daemon=True)
                self._writer.start()
            self._writer_wake.notify()
        return future

    def close(self) -> None:
        """Let the background writer finish what is queued and stop; hand the connection back."""
        with self._lock:
            self._closed = True
            self._writer_wake.notify()
            writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=60)
        with self._lock:
            while self._leading:
                self._idle.wait()
            self._drop_connection(broken=False)

    def _connection(self) -> Any:
        """The held writer connection (a new one after a fork or a failure)."""
        if self._conn is None or self._conn_pid != os.getpid():
            self._conn = self.engine.raw_connection()  # a forked child never touches its parent's
            self._conn_pid = os.getpid()
        return self._conn

    def _drop_connection(self, *, broken: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is None or self._conn_pid != os.getpid():
            return
        with contextlib.suppress(Exception):  # a connection that cannot even be closed is gone anyway
            if broken:
                conn.invalidate()  # the pool discards it; the next commit connects afresh
            else:
                conn.close()

    # -- leading ------------------------------------------------------------------

    def _wait_locked(self, batch: Batch) -> None:
        """With the lock held: lead a commit when nobody does, else sleep until this batch is
        committed or leadership is handed to this thread."""
        while not batch.done:
            if self._leading:
                waiter = getattr(self._mine, "cond", None)
                if waiter is None:
                    waiter = self._mine.cond = threading.Condition(self._lock)
                batch.waiter = waiter
                waiter.wait()
            else:
                self._lead_locked()

    def _write_forever(self) -> None:
        with self._lock:
            while True:
                if self._queue and not self._leading:
                    self._lead_locked()
                elif self._closed and not self._queue:
                    self._writer = None
                    return
                else:
                    self._writer_wake.wait()

    def _lead_locked(self) -> None:
        """Take everything queued and commit it with the lock released; wake whom it concerns."""
        self._leading = True
        group, self._queue = self._queue, []
        self.largest_group = max(self.largest_group, len(group))
        self._lock.release()
        try:
            self._write(group)
        except BaseException as exc:  # Ctrl-C while writing: the group's fate is unknown, say so
            for batch in group:
                if not batch.done:
                    batch.error = StoreError(f"cannot write run {batch.run_id} to the store: "
                                             f"{type(exc).__name__} while committing")
                    batch.done = True
            raise
        finally:
            self._lock.acquire()
            self._leading = False
            for batch in group:
                _settle(batch)
                if batch.waiter is not None:
                    batch.waiter.notify()
            self._hand_over_locked()
            self._idle.notify_all()

    def _hand_over_locked(self) -> None:
        """Batches queued during the commit: wake the thread that waits on the first one to lead
        the next, and the background writer when one of them is nobody's to wait on."""
        if not self._queue:
            return
        first = next((b for b in self._queue if b.waiter is not None), None)
        if first is not None and first.waiter is not None:
            first.waiter.notify()
        if first is None or any(b.future is not None for b in self._queue):
            self._writer_wake.notify()

    def _write(self, group: list[Batch]) -> None:
        try:
            self._transaction(group)
        except TakenOver as lost:
            for batch in group:
                if batch.run_id in lost.owners:
                    batch.error = StoreError(
                        f"run {batch.run_id} was taken over by {lost.owners[batch.run_id]} while this process "
                        "was not renewing its lease; this process writes nothing more to it")
            rest = [batch for batch in group if batch.error is None]
            if rest:
                self._write(rest)
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
            if len(group) == 1:
                group[0].error = _error(group[0], exc)
            else:
                self._one_by_one(group)
        for batch in group:
            batch.done = True

    def _one_by_one(self, group: list[Batch]) -> None:
        """After a failed group: each batch in its own transaction, so only the faulty run fails."""
        failed: set[str] = set()
        for batch in group:
            if batch.run_id in failed:
                batch.error = StoreError(f"cannot write run {batch.run_id} to the store: "
                                         "an earlier commit of the run failed")
                continue
            try:
                self._transaction([batch])
            except TakenOver as lost:
                batch.error = StoreError(f"run {batch.run_id} was taken over by {lost.owners[batch.run_id]}")
                failed.add(batch.run_id)
            except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
                batch.error = _error(batch, exc)
                failed.add(batch.run_id)

    def _transaction(self, group: Sequence[Batch]) -> None:
        """One transaction for ``group``, on the held driver connection (no Core pipeline):
        new runs first, then summaries, events and tools, so a run's rows keep their order.

        A connection found dead (the server restarted, an idle timeout) is replaced and the
        transaction tried once more. Should the dead one have committed after all, the retry
        fails on the events' primary key: never a fact written twice.
        """
        sql = self._statements()
        new_runs = [b.new_run for b in group if b.new_run is not None and not b.queued]
        starts = [b.new_run for b in group if b.new_run is not None and b.queued]
        labels = [row for b in group for row in b.labels]
        updates = [b.update for b in group if b.update is not None and b.full_update]
        progress = [b.update for b in group if b.update is not None and not b.full_update]
        rows = [row for b in group for row in b.events]
        tools = [row for b in group for row in b.tools]
        parts: list[tuple[str, list[Any]]] = [
            ("runs", new_runs), ("start_queued", starts), ("run_labels", labels), ("update_run", updates),
            ("update_progress", progress), ("events", rows), ("run_tools", tools)]
        try:
            self._attempt(sql, parts)
        except self._dbapi_error:
            if self._conn is not None:  # the connection is fine: the rows themselves failed
                raise
            self._attempt(sql, parts)  # it was dead (and is dropped): once more, on a new one

    def _attempt(self, sql: dict[str, Prepared], parts: list[tuple[str, list[Any]]]) -> None:
        raw = self._connection()
        cursor = None
        try:
            cursor = raw.cursor()
            if self._begin:
                cursor.execute(self._begin)
            for name, part in parts:
                if name == "events":
                    sql[name].run_values(cursor, part)
                elif sql[name].run(cursor, part) != len(part) and name in FENCED:
                    raise TakenOver(self._owners_now(cursor, part))
            raw.commit()
            self.commits += 1
        except BaseException as exc:
            self._roll_back(raw, cursor, exc)
            raise
        finally:
            if cursor is not None:
                with contextlib.suppress(Exception):
                    cursor.close()

    def _owners_now(self, cursor: Any, updates: list[Row]) -> dict[str, str]:
        """The runs among ``updates`` whose row names another owner than the batch expected."""
        run_ids = [row["_run_id"] for row in updates]
        marks = ", ".join(["?" if self.engine.dialect.name == "sqlite" else "%s"] * len(run_ids))
        cursor.execute(f"SELECT run_id, owner FROM runs WHERE run_id IN ({marks})", run_ids)
        owners = dict(cursor.fetchall())
        return {row["_run_id"]: str(owners.get(row["_run_id"]) or "nobody (the run is gone)")
                for row in updates if owners.get(row["_run_id"]) != row["_owner"]}

    def _roll_back(self, raw: Any, cursor: Any, exc: BaseException) -> None:
        """Undo a failed transaction; a connection found dead is dropped (``_conn`` becomes None)."""
        try:
            raw.rollback()
        except BaseException:
            self._drop_connection(broken=True)
            return
        gone = isinstance(exc, self._dbapi_error) and self.engine.dialect.is_disconnect(
            exc, raw.dbapi_connection, cursor)  # type: ignore[arg-type]
        if gone:
            self._drop_connection(broken=True)


FENCED = frozenset({"update_run", "update_progress"})  # statements that match only the run's own owner


class TakenOver(Exception):
    """Some runs of a group have another owner now (``owners``: run id -> that owner)."""

    def __init__(self, owners: dict[str, str]) -> None:
        super().__init__(owners)
        self.owners = owners


def _error(batch: Batch, exc: BaseException) -> StoreError:
    return StoreError(f"cannot write run {batch.run_id} to the store: {one_line(exc)}")


def _settle(batch: Batch) -> None:
    future = batch.future
    if future is None or future.done():
        return
    if batch.error is not None:
        future.set_exception(batch.error)
    else:
        future.set_result(None)
