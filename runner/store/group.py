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
    events: list[Row]
    tools: list[Row]
    queued: bool = False  # ``new_run`` fills in the row a queued run already has (runner.pool)
    future: Future[None] | None = None
    done: bool = False
    error: StoreError | None = None


class GroupCommitter:
    """The one writer of a store's run logs: commits queued batches in groups, in order."""

    def __init__(self, engine: Engine, statements: Callable[[], dict[str, Prepared]]) -> None:
        self.engine = engine
        self._statements = statements
        self._begin = "BEGIN IMMEDIATE" if engine.dialect.name == "sqlite" else ""
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Batch] = []
        self._leading = False
        self._writer: threading.Thread | None = None
        self._closed = False
        self.largest_group = 0  # the most batches one transaction has carried (for tests and benchmarks)

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
        with self._cond:
            self._queue.append(batch)
            self._wait_locked(batch)
        if batch.error is not None:
            raise batch.error

    def wait(self, batch: Batch) -> None:
        """Block until a batch handed in before is committed (or failed); never raises."""
        with self._cond:
            self._wait_locked(batch)

    def submit(self, batch: Batch) -> Future[None]:
        """Queue ``batch`` for the background writer; the future completes with its commit."""
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()  # it cannot be called off: the rows are the run's log
        batch.future = future
        with self._cond:
            self._queue.append(batch)
            if self._writer is None or not self._writer.is_alive():
                self._closed = False
                self._writer = threading.Thread(target=self._write_forever, name="runner-group-commit",
                                                daemon=True)
                self._writer.start()
            self._cond.notify_all()
        return future

    def close(self) -> None:
        """Let the background writer finish what is queued and stop."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=60)

    # -- leading ------------------------------------------------------------------

    def _wait_locked(self, batch: Batch) -> None:
        while not batch.done:
            if self._leading:
                self._cond.wait()
            else:
                self._lead_locked()

    def _write_forever(self) -> None:
        with self._cond:
            while True:
                if self._queue and not self._leading:
                    self._lead_locked()
                elif self._closed and not self._queue:
                    self._writer = None
                    return
                else:
                    self._cond.wait()

    def _lead_locked(self) -> None:
        """Take everything queued and commit it with the lock released; wake the waiters."""
        self._leading = True
        group, self._queue = self._queue, []
        self.largest_group = max(self.largest_group, len(group))
        self._cond.release()
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
            self._cond.acquire()
            self._leading = False
            self._cond.notify_all()
            for batch in group:
                _settle(batch)

    def _write(self, group: list[Batch]) -> None:
        try:
            self._transaction(group)
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
            except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
                batch.error = _error(batch, exc)
                failed.add(batch.run_id)

    def _transaction(self, group: Sequence[Batch]) -> None:
        """One transaction for ``group``, on the pooled driver connection (no Core pipeline):
        new runs first, then summaries, events and tools, so a run's rows keep their order."""
        sql = self._statements()
        new_runs = [b.new_run for b in group if b.new_run is not None and not b.queued]
        starts = [b.new_run for b in group if b.new_run is not None and b.queued]
        labels = [row for b in group for row in b.labels]
        updates = [b.update for b in group if b.update is not None]
        rows = [row for b in group for row in b.events]
        tools = [row for b in group for row in b.tools]
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            try:
                if self._begin:
                    cursor.execute(self._begin)
                sql["runs"].run(cursor, new_runs)
                sql["start_queued"].run(cursor, starts)
                sql["run_labels"].run(cursor, labels)
                sql["update_run"].run(cursor, updates)
                sql["events"].run(cursor, rows)
                sql["run_tools"].run(cursor, tools)
                raw.commit()
            except BaseException:
                raw.rollback()
                raise
            finally:
                cursor.close()
        finally:
            raw.close()  # back to the pool: nobody holds a connection between commits


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
