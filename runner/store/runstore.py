"""``RunStore``: one database's runs and events, recorded, queried, queued for a pool, pruned.

The facade over the store's modules: ``recording`` (a run's facts committed),
``queries`` (reads), ``queue`` (a worker pool's queued runs and cancel requests),
``prune``, ``lease`` (taking a run over). Reads run in one plain (deferred)
transaction, so they never wait on a writer's lock on SQLite and see one consistent
snapshot; a database failure is one ``StoreError`` line, and a missing run ``RunNotFound``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .._log.decisions import Decision, decider
from .._log.records import LIVE, RunSummary, StoredRun
from .._log.state import RunState
from .._log.statuses import Status
from .._log.tally import Rollup
from ..errors import AmbiguousRunId, RunInUse, RunNotFound, StoreError
from ..events import Event, RunQueued, RunStarted, ToolReturnedLate
from . import appending, forks, logs, queries, queue, rolled_up, shortids, tail
from .clock import database_clock
from .engine import DEFAULT_BUSY_TIMEOUT_S, one_line, read_connection, shown
from .filters import Label, RunFilter, chosen
from .following import Following
from .group import GroupCommitter
from .lease import Heartbeat, take_over
from .owner import owner_id
from .prune import DEFAULT_BATCH, PruneResult, prunable_statuses, prune_runs
from .recording import CancelSeen, OnCommit, SpanSource, StoreRecorder, statements
from .tables import runs


class RunStore(Following):
    """The runs and events of one database; close it when done.

    Thread-safe on a file or a server. An in-memory store (``sqlite://``) is one
    shared connection: use it from one thread (tests), and a file for anything more.
    """

    def __init__(self, engine: Engine, url: URL, *, read_only: bool = False,
                 busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, revision: str | None = None) -> None:
        self.engine = engine
        self.url = url
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s
        self.closed = False
        self._late = threading.Lock()  # a late result is appended whole before the store closes, or not at all
        self.heartbeat = Heartbeat(engine, owner_id)
        self._clock = database_clock(engine.dialect.name)  # read with each run: its liveness's clock
        self._runs = queries.run_columns(revision)  # a store read at an older revision lacks some
        self._text_index = queries.text_indexed(revision)  # and, before 0006, the text index
        self._parent_calls = queries.has_parent_calls(revision)  # and, before 0007, runs.parent_call_id
        self._rolled_up = revision is None or revision >= "0008"  # and, before 0008, the stats' rollups
        # One writer for every run this store records: concurrent runs share its commits.
        self.committer = GroupCommitter(engine, lambda: statements(engine.dialect))
        forks.track(self)

    def __repr__(self) -> str:
        return f"RunStore({shown(self.url)!r})"

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release every connection (once a late result being appended is). Idempotent."""
        with self._late:
            if self.closed:
                return
            self.closed = True
            self.heartbeat.stop()
            self.committer.close()
            self.engine.dispose()

    def recorder(self, span_source: SpanSource | None = None, resume: RunState | None = None,
                 trace_id: str | None = None, loop_state: RunState | None = None,
                 cancel_seen: CancelSeen | None = None, on_commit: OnCommit | None = None) -> StoreRecorder:
        """A recorder for one run; ``run_agent(..., store=store)`` calls this.

        ``resume`` is the stored run's folded state, to continue its log. ``loop_state`` is the
        loop's own state, read instead of folded again; ``cancel_seen`` hears what each commit read
        of the run's cancel request, ``on_commit`` each commit's facts (see ``StoreRecorder``).
        """
        self._check_writable("record runs")
        return StoreRecorder(self.engine, span_source, resume, trace_id, self.heartbeat, self.committer,
                             loop_state=loop_state, cancel_seen=cancel_seen, on_commit=on_commit)

    def owner_id(self) -> str:
        """This process's identity as the runs it writes record it (``owner``; a forked child has its own)."""
        return owner_id()

    def claim_run(self, seen: RunSummary, after: int | None = None) -> list[Event]:
        """Take over a stopped or orphaned run as this process, if nobody did since ``seen`` was read.

        ``RunInUse`` when its owner is alive, or another process took it first. ``after``: the last
        ``seq`` the caller read; the facts appended since (a call's late result) are returned.
        """
        self._check_writable("resume runs")
        if seen.status == Status.RUNNING and seen.liveness == LIVE:
            raise RunInUse(f"run {seen.run_id} is being driven by a live process ({seen.owner}); "
                           "it cannot be taken over")
        if not take_over(self.engine, seen, owner_id(), self.heartbeat):
            raise RunInUse(f"run {seen.run_id} was taken over by another process just now")
        with self.reading() as conn:
            return [] if after is None else queries.facts_after(conn, seen.run_id, after)

    def decide(self, run_id: str, call_id: str, approved: bool, reason: str | None = None, *,
               decided_by: str | None = None) -> bool:
        """Log a decision on a call awaiting approval, without resuming the run.

        Returns whether it was logged now: the same decision again logs nothing.
        ``decided_by`` defaults to the OS user.

        Raises:
            CannotResume: the call awaits no decision, or a logged decision says otherwise.
            RunInUse: a live process drives the run.
        """
        self._check_writable("log decisions")
        return appending.decide(self.engine, self.get_run, run_id, call_id, approved, reason, decided_by=decided_by)

    def decide_all(self, run: StoredRun, decisions: Mapping[str, Decision], by: str) -> StoredRun:
        """Log every decision on ``run`` (as the caller read it) at once; the run as appended.

        For a caller that must log before the run goes on (the console; a pool run sent
        back): ``{call_id: True | False | reason}``, all checked before any is logged.
        Raises ``CannotResume`` and ``RunInUse`` as ``decide`` does.
        """
        self._check_writable("log decisions")
        return appending.decide_all(self.engine, self.get_run, run, decisions, by)

    def requeue(self, run: StoredRun, limits: Mapping[str, Any], by: str) -> StoredRun:
        """Log a pool run stopped on a limit or an error (as read) as sent back, with ``limits`` replacing its own.

        The caller then publishes it; a worker resumes it under those limits (``run_requeued``).
        """
        self._check_writable("send runs back")
        return appending.requeue(self.engine, self.get_run, run, limits, by)

    def log_late(self, run_id: str, fact: ToolReturnedLate, segment: int) -> bool:
        """Log a late result of a call of the run's part ``segment``, if the run still ends there (``appending``)."""
        with self._late:
            self._check_writable("log a late result")
            return appending.log_late(self.engine, self.get_run, run_id, fact, segment)

    def prune(self, before: datetime, *, status: str | Sequence[str] | None = None, dry_run: bool = False,
              batch_size: int = DEFAULT_BATCH) -> PruneResult:
        """Delete whole finished runs started before ``before`` (naive means UTC).

        A run goes with its events, labels, tools and cancel requests, ``batch_size`` runs per
        transaction. Running, queued and awaiting-approval runs are never deleted, nor a run
        that a kept run was forked or followed up from (``kept_parents``). Single events stay
        undeletable: only this whole-run path gets past the append-only guard.

        Args:
            status: only these finished statuses (asking for an unfinished one is a ``ValueError``).
            dry_run: delete nothing; report what would go.
        """
        self._check_open()
        return prune_runs(self.engine, self.url, self.reading, before, prunable_statuses(status), dry_run,
                          batch_size, read_only=self.read_only)

    # -- queries -------------------------------------------------------------

    def list_runs(self, where: RunFilter | None = None, *, status: str | Sequence[str] | None = None,
                  since: datetime | None = None, until: datetime | None = None, tool: str | None = None,
                  text: str | None = None, label: Label | None = None, top: bool = False, limit: int = 50,
                  offset: int = 0) -> list[RunSummary]:
        """Runs matching ``where`` (a ``RunFilter``), or the filters given as keywords, newest first.

        The keywords are ``RunFilter``'s fields: ``label`` a ``(key, value)`` pair or a mapping of them.
        """
        queries.check_page(limit, offset)
        found = chosen(where, RunFilter.of(status, since, until, tool, text, label, top))
        with self.reading() as conn:
            query, driver = queries.matching(conn, select(*self._runs, *self._clock), found, self._text_index,
                                             self._parent_calls)
            query = query.order_by(driver.c.started_at.desc(), driver.c.run_id.desc()).limit(limit).offset(offset)
            return queries.summaries(conn, query)

    def count_runs(self, where: RunFilter | None = None, *, status: str | Sequence[str] | None = None,
                   since: datetime | None = None, until: datetime | None = None, tool: str | None = None,
                   text: str | None = None, label: Label | None = None, top: bool = False,
                   at_most: int | None = None) -> int:
        """How many runs ``list_runs`` with the same filters would find (no limit).

        ``at_most`` stops counting there: a bounded scan, for "over N more" on a big store
        where an exact count of a text search would read every run.
        """
        if at_most is not None and (isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < 0):
            raise ValueError(f"at_most must be a non-negative integer, got {at_most!r}")
        found = chosen(where, RunFilter.of(status, since, until, tool, text, label, top))
        with self.reading() as conn:
            query, _ = queries.matching(conn, select(runs.c.run_id), found, self._text_index, self._parent_calls)
            if at_most is not None:
                query = query.limit(at_most)
            return int(conn.execute(select(func.count()).select_from(query.subquery())).scalar_one())

    def children(self, run_id: str) -> list[RunSummary]:
        """The runs forked from, following up or serving a sub-agent's call of ``run_id`` (their ``parent_run_id``).

        Oldest first, read through the index on ``parent_run_id``: ``show`` links a run to its children with it.
        A sub-agent's child run names the call it serves (``parent_call_id``).
        """
        query = (select(*self._runs, *self._clock).where(runs.c.parent_run_id == run_id)
                 .order_by(runs.c.started_at, runs.c.run_id))
        with self.reading() as conn:
            return queries.summaries(conn, query)

    def get_run(self, run_id: str) -> StoredRun:
        """The run with its events, their facts and the messages rebuilt from them.

        ``RunNotFound`` (a ``StoreError``) if there is none.
        """
        with self.reading() as conn:
            found = queries.read_run(conn, run_id, self._runs)
        if found is None:
            raise RunNotFound(f"no run {run_id!r} in {shown(self.url)}")
        return found

    def resolve_run_id(self, prefix: str) -> str:
        """The run with exactly this id, else the one run whose id starts with ``prefix``.

        ``RunNotFound`` when none does, ``StoreError`` when several do (naming up to
        ``AMBIGUOUS_SHOWN`` of them). Text no run id can hold (a surrogate; NUL on
        PostgreSQL) is no run.
        """
        if not prefix:
            raise StoreError("empty run id")
        if not self._storable(prefix):
            raise RunNotFound(f"no run {prefix!r} in {shown(self.url)}")
        with self.reading() as conn:
            found, more = queries.prefixed(conn, prefix)
        if not found:
            raise RunNotFound(f"no run {prefix!r} in {shown(self.url)}")
        if len(found) > 1:
            listed = ", ".join(found) + (f" and {more} more" if more else "")
            raise AmbiguousRunId(f"run id prefix {prefix!r} is ambiguous: {listed}")
        return found[0]

    def find_run(self, prefix: str) -> StoredRun:
        """``get_run`` of the run whose id starts with ``prefix`` (for the CLI); ``RunNotFound`` when none does."""
        return self.get_run(self.resolve_run_id(prefix))

    def short_ids(self, run_ids: list[str]) -> dict[str, str]:
        """For each id, its shortest prefix (8 characters at least) that names no other run in the store."""
        with self.reading() as conn:
            return shortids.short_ids(conn, run_ids)

    def refused_calls(self, run_ids: list[str]) -> dict[str, int]:
        """Per run, its tool calls refused before running (unknown tool, bad arguments, a repeat, denied).

        ``tool_calls`` counts the calls that ran, each once however many attempts it took;
        these are the others, counted over the given runs' events only.
        """
        with self.reading() as conn:
            return queries.refused_calls(conn, run_ids)

    def stats(self, where: RunFilter | None = None) -> Rollup:
        """What the runs ``where`` picks add up to (``runner stats``, ``/stats``): see ``rolled_up.answer``."""
        with self.reading() as conn:
            return rolled_up.answer(conn, where or RunFilter(), rolled_up=self._rolled_up, indexed=self._text_index,
                                  parent_calls=self._parent_calls)

    def facts_of(self, run_ids: list[str]) -> dict[str, tuple[Event, ...]]:
        """Each run's facts, decoded as ``get_run`` decodes them, for many runs in a few statements."""
        with self.reading() as conn:
            return logs.facts_of(conn, run_ids)

    def events_after(self, run_id: str, after: int = 0, limit: int = tail.PAGE) -> tail.Tail:
        """Run ``run_id``'s status, then up to ``limit`` of its events past ``after`` (``tail``); ``RunNotFound``."""
        with self.reading() as conn:
            return tail.events_after(conn, run_id, after, limit, shown(self.url))

    def run_starts(self, run_ids: list[str]) -> dict[str, RunStarted]:
        """The ``run_started`` fact of each of ``run_ids`` that has started (how it came about)."""
        with self.reading() as conn:
            return queries.run_starts(conn, run_ids)

    def export_fixture(self, run_id: str, path: str | Path) -> Path:
        """Write the run (``run_id`` may be a unique prefix) as a replay fixture file.

        Atomic: a failed write leaves an existing file at ``path`` as it was. Sub-agents' child runs come along.
        Replay owns the file's format (``runner._replay.fixture``); this is a shortcut to it.
        """
        from .._replay.fixture import fixture_from_run  # lazily: _replay sits above the store (docs/architecture.md)

        return fixture_from_run(self.find_run(run_id), self).write(path)

    # -- a worker pool's queue ---------------------------------------------------

    def queue_run(self, queued: RunQueued) -> None:
        """Record run ``queued.run_id`` as ``queued`` with its ``run_queued`` fact, for a pool's worker."""
        self._check_writable("queue runs")
        queue.queue_run(self.engine, queued)

    def request_cancel(self, run_id: str, by: str | None = None) -> bool:
        """Ask, as ``by`` (default: the OS user), for run ``run_id`` to be cancelled.

        Its driver sees the request at its next commit, or within a second while it waits on a
        model call, and logs ``cancel_requested`` (naming ``by``) as it stops. False when it was
        asked before (that request stands, with who asked first).
        """
        self._check_writable("cancel runs")
        return queue.request_cancel(self.engine, run_id, by if by is not None else decider())

    def clear_cancel(self, run_id: str) -> None:
        """Forget run ``run_id``'s cancel request (a resume does, for a run that ended since it was asked)."""
        self._check_writable("cancel runs")
        queue.clear_cancel(self.engine, run_id)

    def cancel_queued(self, run_id: str, error: str) -> bool:
        """End a run still queued as cancelled with ``error``, unless a worker claimed it first.

        Returns whether it did.
        """
        self._check_writable("cancel runs")
        return queue.cancel_queued(self.engine, run_id, error)

    def cancel_requested(self, run_id: str) -> bool:
        """Whether someone asked for run ``run_id`` to be cancelled."""
        return self.cancel_request(run_id) is not None

    def cancel_request(self, run_id: str) -> str | None:
        """Who asked for run ``run_id`` to be cancelled, or None when nobody did."""
        with self.reading() as conn:
            return queue.cancel_request(conn, run_id)

    def due_for_publish(self, older_than_s: float, queue_name: str | None = None) -> list[queue.Touched]:
        """The runs a worker on ``queue_name`` (None: the default queue) should be sent again.

        They were submitted to that queue, are queued, running with the owner gone, or awaiting approval
        with every call decided (its publish failed), and were not touched for ``older_than_s``.

        Each is touched (``updated_at``) by compare-and-set, so of several workers sweeping at
        once one publishes it, and it is not published again before ``older_than_s``
        (``untouch`` gives it back when publishing fails).
        """
        self._check_writable("sweep runs")
        now = datetime.now(UTC)
        with self.reading() as conn:
            waiting = queue.due(conn, now - timedelta(seconds=older_than_s), queue_name or queue.DEFAULT_QUEUE, now)
        return [touched for run in waiting if (touched := queue.touch(self.engine, run, now)) is not None]

    def untouch(self, touched: Sequence[queue.Touched]) -> None:
        """Give back runs ``due_for_publish`` touched but could not publish.

        They are as due as if never touched, so other workers' sweeps are not held off an interval.
        """
        self._check_writable("sweep runs")
        queue.untouch(self.engine, touched)

    # -- plumbing --------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(f"store {shown(self.url)} is closed")

    def _check_writable(self, doing: str) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError(f"store {shown(self.url)} is open read-only: it cannot {doing}")

    def _storable(self, text: str) -> bool:
        """Whether a run id could be ``text``: both backends refuse surrogates, PostgreSQL NUL."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return not ("\x00" in text and self.engine.dialect.name == "postgresql")

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One read-only transaction for your own queries on the tables.

        It never takes the write lock, sees one snapshot and refuses writes (``query_only`` on
        SQLite, a ``READ ONLY`` transaction on PostgreSQL). A failure is one ``StoreError`` line.
        """
        self._check_open()
        try:
            with read_connection(self.engine) as conn, conn.begin():
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read store {shown(self.url)}: {one_line(exc)}") from None
