"""Group commit: one transaction carries the pending facts of every run that shares a store.

A waiting thread leads when nobody writes, taking every queued batch; ``submit``'s batches
go to a background writer. A run has at most one batch under way, so its events stay in
order. A failed group is retried one batch per transaction, so only the faulty run fails.
The invariants and why: docs/event-log.md, "Commits: the invariants".
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from . import rollups
from .engine import one_line
from .prepared import Prepared
from .transaction import Parts, Row, ServerGone, TakenOver, Writer

if TYPE_CHECKING:
    import asyncio


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
    cancel_seen: Callable[[str | None], None] | None = None  # told who asked to cancel the run, after its commit
    committed: Callable[[], None] | None = None  # called once its commit is done (by whichever thread did it)
    rollups: list[tuple[Any, ...]] = field(default_factory=list)  # the run's additions to the stats' rollups
    future: asyncio.Future[None] | None = None  # the submitting event loop's, for ``submit``
    taken: bool = False  # a leader has it in its group
    waiter: threading.Condition | None = None  # the waiting thread's own condition, if a thread waits
    done: bool = False
    error: StoreError | None = None


# Groups under way at once on a server database (docs/event-log.md, "Group commit").
SERVER_LEADERS = 2


class GroupCommitter:
    """The writer of a store's run logs: commits queued batches in groups, each run's in order."""

    def __init__(self, engine: Engine, statements: Callable[[], dict[str, Prepared]],
                 leaders: int | None = None) -> None:
        self.engine = engine
        self._statements = statements
        self.leaders = leaders or (1 if engine.dialect.name == "sqlite" else SERVER_LEADERS)
        self.writer = Writer(engine, statements)  # the first leader's (one connection per leader)
        self._writers = [self.writer]
        self._closed = False
        self.largest_group = 0  # the most batches one transaction has carried (for tests and benchmarks)
        self._start_afresh()

    def _start_afresh(self) -> None:
        """No commit under way, nothing queued, no writer thread (at start, and in a forked child)."""
        self._free = list(self._writers)  # a writer opens a connection of its own in a new process
        # One lock; every waiting thread sleeps on a condition of its own, so a commit wakes
        # the threads it carried and the next leader, never all fifty waiters at once.
        self._lock = threading.Lock()
        self._mine = threading.local()
        self._writer_wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)  # notified when a commit ends, if someone waits on it
        self._closers = 0  # threads waiting for the commits under way (``close``, ``hold_for_fork``)
        self._queue: list[Batch] = []
        self._leading = 0  # groups under way
        self._background: list[threading.Thread] = []

    def after_fork(self) -> None:
        """Forget the parent's commits, queued batches, threads and lock, in a forked child."""
        self._start_afresh()

    def hold_for_fork(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for the commits under way, then start none until ``release_after_fork``.

        A SQLite child forked mid-commit would find the file locked for ever
        (docs/event-log.md, "Forks"). The child starts afresh, with a lock of its own.
        """
        self._lock.acquire()
        deadline = time.monotonic() + wait_s
        self._closers += 1
        try:
            while self._leading and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)
        except BaseException:  # Ctrl-C while waiting: no fork follows, the commits go on
            self._closers -= 1
            self._lock.release()
            raise
        self._closers -= 1

    def release_after_fork(self) -> None:
        """In the parent, after the fork: commits go on."""
        self._lock.release()

    @property
    def commits(self) -> int:
        """Transactions committed (for tests and benchmarks)."""
        return sum(writer.commits for writer in self._writers)

    @property
    def busy(self) -> bool:
        """Whether a commit is under way right now."""
        return self._leading > 0

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

    def submit(self, batch: Batch) -> asyncio.Future[None]:
        """Queue ``batch`` for the background writer; a future of the running loop completes with its commit.

        Cancelling the future calls nothing off: the rows are the run's log,
        and ``wait`` still blocks until they are committed.
        """
        import asyncio  # only async runs come here: a plain run does not load it

        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        batch.future = future
        with self._lock:
            self._queue.append(batch)
            self._background = [thread for thread in self._background if thread.is_alive()]
            if len(self._background) < self.leaders:
                self._closed = False
                thread = threading.Thread(target=self._write_forever, name="runner-group-commit", daemon=True)
                self._background.append(thread)
                thread.start()
            self._writer_wake.notify()
        return future

    def close(self) -> None:
        """Let the background writer finish what is queued and stop; hand the connection back."""
        with self._lock:
            self._closed = True
            self._writer_wake.notify_all()
            background = list(self._background)
        for thread in background:
            if thread is not threading.current_thread():
                thread.join(timeout=60)
        with self._lock:
            self._closers += 1
            try:
                while self._leading:
                    self._idle.wait()
            finally:
                self._closers -= 1
            for writer in self._writers:
                writer.close()

    # -- leading ------------------------------------------------------------------

    def _wait_locked(self, batch: Batch) -> None:
        """Lead a commit when a leader is free, else sleep until ``batch`` is done or it is our turn; lock held."""
        while not batch.done:
            if batch.taken or self._leading >= self.leaders:
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
                if self._queue and self._leading < self.leaders:
                    self._lead_locked()
                elif self._closed and not self._queue:
                    self._background.remove(threading.current_thread())
                    self._writer_wake.notify()  # the next background writer sees the close too
                    return
                else:
                    self._writer_wake.wait()

    def _lead_locked(self) -> None:
        """Take everything queued and commit it with the lock released; wake whom it concerns."""
        self._leading += 1
        writer = self._free.pop() if self._free else self._new_writer()
        group, self._queue = self._queue, []
        for batch in group:
            batch.taken = True
        self.largest_group = max(self.largest_group, len(group))
        self._lock.release()
        try:
            self._write(group, writer)
        except BaseException as exc:  # Ctrl-C while writing: the group's fate is unknown, say so
            for batch in group:
                if not batch.done:
                    batch.error = StoreError(f"cannot write run {batch.run_id} to the store: "
                                             f"{type(exc).__name__} while committing")
                    batch.done = True
            raise
        finally:
            _complete_futures(group)
            self._lock.acquire()
            self._leading -= 1
            self._free.append(writer)
            for batch in group:
                if batch.waiter is not None:
                    batch.waiter.notify()
            self._hand_over_locked()
            if self._closers:
                self._idle.notify_all()

    def _new_writer(self) -> Writer:
        writer = Writer(self.engine, self._statements)
        self._writers.append(writer)
        return writer

    def _hand_over_locked(self) -> None:
        """Wake the next leader for the batches queued meanwhile: a waiting thread, or a background writer.

        The background writer is woken too when a queued batch has no thread waiting on it.
        """
        if not self._queue or self._leading >= self.leaders:
            return
        first = next((b for b in self._queue if b.waiter is not None), None)
        if first is not None and first.waiter is not None:
            first.waiter.notify()
        if first is None or any(b.future is not None for b in self._queue):
            self._writer_wake.notify()

    def _write(self, group: list[Batch], writer: Writer) -> None:
        try:
            _seen(group, writer.write(_parts(group)))
        except TakenOver as lost:
            for batch in group:
                if batch.run_id in lost.owners:
                    batch.error = _taken_over(batch, lost.owners[batch.run_id])
            rest = [batch for batch in group if batch.error is None]
            if len(rest) == len(group):  # no run of this group was taken over: nothing to retry without
                for batch in rest:
                    batch.error = StoreError(f"cannot write run {batch.run_id} to the store: its summary "
                                             "update matched fewer runs than it carried, none of them taken over")
            elif rest:
                self._write(rest, writer)
        except ServerGone as gone:  # every run of the group fails alike: no use trying them one by one
            for batch in group:
                batch.error = _error(batch, gone.cause)
        except (SQLAlchemyError, writer.dbapi_error) as exc:
            if len(group) == 1:
                group[0].error = _error(group[0], exc)
            else:
                self._one_by_one(group, writer)
        for batch in group:
            batch.done = True

    def _one_by_one(self, group: list[Batch], writer: Writer) -> None:
        """After a failed group: each batch in its own transaction, so only the faulty run fails."""
        failed: set[str] = set()
        gone: ServerGone | None = None
        for batch in group:
            if gone is not None:  # waited for the server once already: not again for each run
                batch.error = _error(batch, gone.cause)
                continue
            if batch.run_id in failed:
                batch.error = StoreError(f"cannot write run {batch.run_id} to the store: "
                                         "an earlier commit of the run failed")
                continue
            try:
                _seen([batch], writer.write(_parts([batch])))
            except TakenOver as lost:
                batch.error = _taken_over(batch, lost.owners[batch.run_id])
                failed.add(batch.run_id)
            except ServerGone as exc:
                batch.error = _error(batch, exc.cause)
                gone = exc
            except (SQLAlchemyError, writer.dbapi_error) as exc:
                batch.error = _error(batch, exc)
                failed.add(batch.run_id)


def _seen(group: Sequence[Batch], requests: dict[str, str]) -> None:
    """Tell each committed batch's run who asked to cancel it (as the commit read it), and that it is in."""
    for batch in group:
        if batch.cancel_seen is not None:
            batch.cancel_seen(requests.get(batch.run_id))
        if batch.committed is not None:
            batch.committed()


def _parts(group: Sequence[Batch]) -> Parts:
    if len(group) == 1:  # a run alone (the common case): its rows as they are
        b = group[0]
        new_run = [b.new_run] if b.new_run is not None else []
        update = [b.update] if b.update is not None else []
        return Parts(new_runs=[] if b.queued else new_run, starts=new_run if b.queued else [], labels=b.labels,
                     updates=update if b.full_update else [], progress=[] if b.full_update else update,
                     events=b.events, tools=b.tools, rollups=b.rollups,
                     watched=[b.run_id] if b.cancel_seen is not None else [])
    return Parts(
        new_runs=[b.new_run for b in group if b.new_run is not None and not b.queued],
        starts=[b.new_run for b in group if b.new_run is not None and b.queued],
        labels=[row for b in group for row in b.labels],
        updates=[b.update for b in group if b.update is not None and b.full_update],
        progress=[b.update for b in group if b.update is not None and not b.full_update],
        events=[row for b in group for row in b.events],
        tools=[row for b in group for row in b.tools],
        rollups=sorted((row for b in group for row in b.rollups), key=rollups.lock_order),
        watched=sorted({b.run_id for b in group if b.cancel_seen is not None}))


def _taken_over(batch: Batch, owner: str) -> StoreError:
    return StoreError(f"run {batch.run_id} was taken over by {owner} while this process was not renewing "
                      "its lease; this process writes nothing more to it")


def _error(batch: Batch, exc: BaseException) -> StoreError:
    return StoreError(f"cannot write run {batch.run_id} to the store: {one_line(exc)}")


def _complete_futures(group: Sequence[Batch]) -> None:
    """Hand each event loop the outcomes of its batches in one callback: one wake-up per loop and commit."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Batch]] = {}
    for batch in group:
        if batch.future is not None:
            by_loop.setdefault(batch.future.get_loop(), []).append(batch)
    for loop, batches in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits these any more
            loop.call_soon_threadsafe(_settle_all, batches)


def _settle_all(batches: Sequence[Batch]) -> None:
    for batch in batches:
        future = batch.future
        if future is None or future.done():  # its coroutine was cancelled meanwhile
            continue
        if batch.error is not None:
            future.set_exception(batch.error)
        else:
            future.set_result(None)
