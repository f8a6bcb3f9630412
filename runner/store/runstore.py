"""``open_store`` and ``RunStore``: open (migrating on the way), record, query.

Queries read in one plain (deferred) transaction, so they never wait on a
writer's lock on SQLite and see one consistent snapshot.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, Connection, Engine, FromClause, Select, exists, func, literal, or_, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .._log.owner import owner_id
from .._log.records import LIVE, RunSummary, StoredEvent, StoredRun, logged_text, summary_fields
from .._log.state import RunState
from .._log.statuses import Status
from ..errors import RunInUse, RunNotFound, StoreError
from ..events import MessageAppended, decode_all
from .clock import database_clock
from .engine import DEFAULT_BUSY_TIMEOUT_S, is_memory, make_engine, one_line, parse_url, read_connection, shown
from .group import GroupCommitter
from .lease import Heartbeat, take_over
from .migrate import NoStoreError, ensure_schema, location, probe
from .prune import DEFAULT_BATCH, PrunedRun, PruneResult, count_events, delete_batch, plan, prunable_statuses
from .recording import NAME_WIDTH, SpanSource, StoreRecorder, column, statements
from .tables import events, run_labels, run_tools, runs

Label = tuple[str, str] | Mapping[str, str]
AMBIGUOUS_SHOWN = 5  # run ids an ambiguous prefix's error names before "and N more"


_T = TypeVar("_T")

# Every store open in this process, so a forked child can start each one afresh (see ``_after_fork``).
_OPEN: weakref.WeakSet[RunStore] = weakref.WeakSet()


# The stores whose commits ``_stores_before_fork`` held off, to let go of in the parent.
_HELD: list[RunStore] = []


def _stores_before_fork() -> None:
    for store in list(_OPEN):
        if store._hold_for_fork():
            _HELD.append(store)


def _stores_after_fork_in_parent() -> None:
    while _HELD:
        _HELD.pop().committer.release_after_fork()


def _stores_after_fork() -> None:
    _HELD.clear()
    for store in list(_OPEN):
        store._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX: Windows has no fork
    os.register_at_fork(before=_stores_before_fork, after_in_parent=_stores_after_fork_in_parent,
                        after_in_child=_stores_after_fork)


def _stored(value: _T, width: int | None = None) -> _T:
    """A filter value as the summary columns store it; anything not a string is left to the database."""
    return cast(_T, column(value, width)) if isinstance(value, str) else value


def open_store(url: str | os.PathLike[str] | URL = "sqlite:///runs.db", *, synchronous: str | None = None,
               busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, read_only: bool = False) -> RunStore:
    """Open the event log at ``url``, applying any pending migration.

    ``url`` is a SQLAlchemy URL (``sqlite:///runs.db``, ``postgresql+psycopg://...``)
    or a SQLite file path (a ``Path``, or a string without ``://``). ``synchronous`` (SQLite only, default ``NORMAL``;
    also ``?synchronous=FULL`` in the URL) trades commit speed for durability
    across power loss. Raises ``StoreError`` with one line on any failure, without
    modifying a database that is not a runner store.

    ``read_only=True`` is for inspection: it never creates, migrates or writes
    anything (an older revision is read as it is), works on a file in a directory
    it cannot write, and raises ``NoStoreError`` (a ``StoreError``) when there is
    no store yet: a missing or empty file, or a database without our tables.
    """
    parsed = parse_url(url)
    if read_only:
        return _open_read_only(parsed, synchronous, busy_timeout_s)
    engine = make_engine(parsed, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
    try:
        ensure_schema(engine, parsed)
    except BaseException:
        engine.dispose()
        raise
    return RunStore(engine, parsed, busy_timeout_s=busy_timeout_s)


def _open_read_only(url: URL, synchronous: str | None, busy_timeout_s: float) -> RunStore:
    engine = make_engine(url, synchronous=synchronous, busy_timeout_s=busy_timeout_s, read_only=True)
    try:
        found = probe(engine, url)
        if found.revision is None:
            raise NoStoreError(location(url))
        if found.immutable:  # the probe needed immutable=1: so will every query
            engine.dispose()
            engine = make_engine(url, synchronous=synchronous, busy_timeout_s=busy_timeout_s, read_only=True,
                                 immutable=True)
    except BaseException:
        engine.dispose()
        raise
    return RunStore(engine, url, read_only=True, busy_timeout_s=busy_timeout_s)


class RunStore:
    """The runs and events of one database; close it when done.

    Thread-safe on a file or a server. An in-memory store (``sqlite://``) is one
    shared connection: use it from one thread (tests), and a file for anything more.
    """

    def __init__(self, engine: Engine, url: URL, *, read_only: bool = False,
                 busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.engine = engine
        self.url = url
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s
        self.closed = False
        self.heartbeat = Heartbeat(engine, owner_id)
        self._clock = database_clock(engine.dialect.name)  # read with each run: its liveness's clock
        # One writer for every run this store records: concurrent runs share its commits.
        self.committer = GroupCommitter(engine, lambda: statements(engine.dialect))
        _OPEN.add(self)

    def _hold_for_fork(self) -> bool:
        """Before a fork, on a SQLite file: let the commits under way end and start no other until
        the fork is done (see ``GroupCommitter.hold_for_fork``). A commit ends within the busy
        timeout; a server database needs no wait (its connections are sockets, nothing the child
        shares). Whether the commits are held."""
        if self.closed or self.engine.dialect.name != "sqlite" or is_memory(self.url):
            return False
        self.committer.hold_for_fork(self.busy_timeout_s + 1.0)
        return True

    def _after_fork(self) -> None:
        """In a forked child: let go of the parent's connections without closing them (they are
        the parent's; SQLite must never use one across a fork) and of its threads and commits.
        An in-memory store keeps its one connection: it is the database, and the child's copy."""
        if not self.closed:
            if not is_memory(self.url):
                self.engine.dispose(close=False)
            self.heartbeat.after_fork()
            self.committer.after_fork()

    def __repr__(self) -> str:
        return f"RunStore({shown(self.url)!r})"

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release every connection. Idempotent."""
        if not self.closed:
            self.closed = True
            self.heartbeat.stop()
            self.committer.close()
            self.engine.dispose()

    def recorder(self, span_source: SpanSource | None = None, resume: RunState | None = None,
                 trace_id: str | None = None, loop_state: RunState | None = None) -> StoreRecorder:
        """A recorder for one run (``run_agent(..., store=store)`` calls this); ``resume``: the
        stored run's folded state, to continue its log; ``loop_state``: the loop's own state,
        read instead of folded again (see ``StoreRecorder``)."""
        self._check_open()
        if self.read_only:
            raise StoreError(f"store {shown(self.url)} is open read-only: it cannot record runs")
        return StoreRecorder(self.engine, span_source, resume, trace_id, self.heartbeat, self.committer,
                             loop_state=loop_state)

    def claim_run(self, seen: RunSummary) -> None:
        """Take over a stopped or orphaned run as this process, if nobody did since ``seen`` was read.

        ``RunInUse`` when its owner is alive, or another process took it first.
        """
        self._check_open()
        if self.read_only:
            raise StoreError(f"store {shown(self.url)} is open read-only: it cannot resume runs")
        if seen.status == Status.RUNNING and seen.liveness == LIVE:
            raise RunInUse(f"run {seen.run_id} is being driven by a live process ({seen.owner}); "
                           "it cannot be taken over")
        if not take_over(self.engine, seen, owner_id(), self.heartbeat):
            raise RunInUse(f"run {seen.run_id} was taken over by another process just now")

    def decide(self, run_id: str, call_id: str, approved: bool, reason: str | None = None, *,
               decided_by: str | None = None) -> bool:
        """Log a decision on a call of run ``run_id`` awaiting approval, without resuming it; whether
        it was logged now (the same decision again logs nothing). ``decided_by`` defaults to the OS user.

        ``CannotResume`` for a call that awaits no decision, or a decision against a logged one.
        """
        self._check_open()
        if self.read_only:
            raise StoreError(f"store {shown(self.url)} is open read-only: it cannot log decisions")
        from .._loop.approvals import decide

        return decide(self, run_id, call_id, approved, reason, decided_by=decided_by)

    def prune(self, before: datetime, *, status: str | Sequence[str] | None = None, dry_run: bool = False,
              batch_size: int = DEFAULT_BATCH) -> PruneResult:
        """Delete whole finished runs started before ``before`` (naive means UTC), with their events,
        labels, tools and cancel requests, ``batch_size`` runs per transaction.

        ``status`` narrows to some finished statuses; ``running``, ``queued`` and
        ``awaiting_approval`` runs are never deleted (asking for them is a ``ValueError``),
        nor a run that a kept run was forked or followed up from (``kept_parents``).
        ``dry_run`` deletes nothing and reports what would go. Single events stay
        undeletable: only this whole-run path gets past the append-only guard.
        """
        self._check_open()
        statuses = prunable_statuses(status)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if self.read_only and not dry_run:
            raise StoreError(f"store {shown(self.url)} is open read-only: it cannot prune runs")
        with self.reading() as conn:
            planned, kept = plan(conn, before, statuses)
            if dry_run:
                total = count_events(conn, [run.run_id for run in planned])
                return PruneResult(tuple(planned), total, tuple(kept), dry_run=True)
        deleted: list[PrunedRun] = []
        total = 0
        try:
            for start in range(0, len(planned), batch_size):
                gone, removed = delete_batch(self.engine, planned[start:start + batch_size], statuses)
                deleted += gone
                total += removed
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot prune runs in {shown(self.url)} (deleted {len(deleted)} before the "
                             f"failure): {one_line(exc)}") from None
        return PruneResult(tuple(deleted), total, tuple(kept), dry_run=False)

    # -- queries -------------------------------------------------------------

    def list_runs(self, *, status: str | Sequence[str] | None = None, since: datetime | None = None,
                  until: datetime | None = None, tool: str | None = None, text: str | None = None,
                  label: Label | None = None, limit: int = 50, offset: int = 0) -> list[RunSummary]:
        """Runs matching every filter given, newest first.

        ``since``/``until`` bound ``started_at`` (inclusive/exclusive; naive means UTC);
        ``tool`` a tool name the model called (run or refused); ``text`` a case-insensitive substring of
        the task or the answer; ``label`` a ``(key, value)`` pair or a mapping of them.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
        query, driver = self._matching(select(runs, *self._clock), status, since, until, tool, text, label)
        query = query.order_by(driver.c.started_at.desc(), driver.c.run_id.desc()).limit(limit).offset(offset)
        with self.reading() as conn:
            rows = conn.execute(query).mappings().all()
            labels = self._labels(conn, [row["run_id"] for row in rows])
        return [RunSummary(**summary_fields(row, labels.get(row["run_id"], {}), json.loads)) for row in rows]

    def count_runs(self, *, status: str | Sequence[str] | None = None, since: datetime | None = None,
                   until: datetime | None = None, tool: str | None = None, text: str | None = None,
                   label: Label | None = None, at_most: int | None = None) -> int:
        """How many runs ``list_runs`` with the same filters would find (no limit).

        ``at_most`` stops counting there: a bounded scan, for "over N more" on a big store
        where an exact count of a text search would read every run.
        """
        if at_most is not None and (isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < 0):
            raise ValueError(f"at_most must be a non-negative integer, got {at_most!r}")
        query, _ = self._matching(select(runs.c.run_id), status, since, until, tool, text, label)
        if at_most is not None:
            query = query.limit(at_most)
        with self.reading() as conn:
            return int(conn.execute(select(func.count()).select_from(query.subquery())).scalar_one())

    @staticmethod
    def _matching(query: Select[Any], status: str | Sequence[str] | None, since: datetime | None,
                  until: datetime | None, tool: str | None, text: str | None,
                  label: Label | None) -> tuple[Select[Any], FromClause]:
        """``query`` (a select from ``runs``) narrowed by the filters, and the table it walks."""
        pairs = [label] if isinstance(label, tuple) else list((label or {}).items())
        # Filters match the columns' rendering of what was recorded (``recorder.column``).
        pairs = [(_stored(key, NAME_WIDTH), _stored(value)) for key, value in pairs]
        tool, text = _stored(tool, NAME_WIDTH), _stored(text)
        # The newest-first walk runs on the most selective index at hand: a tool's or a
        # label's own (name/key, started_at) index when filtering on one, else the runs'.
        driver: FromClause = runs
        if tool is not None:
            driver = run_tools.alias("driver")
            conditions: list[ColumnElement[bool]] = [driver.c.name == tool]
        elif pairs:
            key, value = pairs.pop(0)
            driver = run_labels.alias("driver")
            conditions = [driver.c.key == key, driver.c.value == value]
        else:
            conditions = []
        if driver is not runs:
            query = query.select_from(driver.join(runs, runs.c.run_id == driver.c.run_id))
        query = query.where(*conditions)
        if status is not None:
            query = query.where(runs.c.status.in_([status] if isinstance(status, str) else list(status)))
        if since is not None:
            query = query.where(driver.c.started_at >= since)
        if until is not None:
            query = query.where(driver.c.started_at < until)
        if text is not None:
            # Both sides lowered by the database, so the needle folds as the column does: Python's
            # 'İ'.lower() is two code points where PostgreSQL's lower() gives one.
            escaped = text.replace("/", "//").replace("%", "/%").replace("_", "/_")
            pattern = func.lower(literal(f"%{escaped}%"))
            query = query.where(or_(func.lower(runs.c.task).like(pattern, escape="/"),
                                    func.lower(runs.c.answer).like(pattern, escape="/")))
        for key, value in pairs:
            query = query.where(exists().where(
                run_labels.c.run_id == runs.c.run_id, run_labels.c.key == key, run_labels.c.value == value))
        return query, driver

    def children(self, run_id: str) -> list[RunSummary]:
        """The runs forked from or following up ``run_id`` (their ``parent_run_id``), oldest first.

        Read through the index on ``parent_run_id``: ``show`` links a run to its children with it.
        """
        query = (select(runs, *self._clock).where(runs.c.parent_run_id == run_id)
                 .order_by(runs.c.started_at, runs.c.run_id))
        with self.reading() as conn:
            rows = conn.execute(query).mappings().all()
            labels = self._labels(conn, [row["run_id"] for row in rows])
        return [RunSummary(**summary_fields(row, labels.get(row["run_id"], {}), json.loads)) for row in rows]

    def get_run(self, run_id: str) -> StoredRun:
        """The run with its events and rebuilt messages; ``RunNotFound`` (a ``StoreError``) if there is none."""
        with self.reading() as conn:
            row = conn.execute(select(runs, *self._clock).where(runs.c.run_id == run_id)).mappings().first()
            if row is None:
                raise RunNotFound(f"no run {run_id!r} in {shown(self.url)}")
            labels = self._labels(conn, [run_id]).get(run_id, {})
            rows = conn.execute(select(events.c.seq, events.c.at, events.c.step, events.c.kind,
                                       events.c.data, events.c.span_id)
                                .where(events.c.run_id == run_id).order_by(events.c.seq)).all()
        stored = [StoredEvent(seq, at, step, kind, _event_data(run_id, seq, data), span_id)
                  for seq, at, step, kind, data, span_id in rows]
        facts = tuple(decode_all(stored, run_id))
        messages = [fact.message for fact in facts if isinstance(fact, MessageAppended)]
        fields = summary_fields(row, labels, json.loads) | logged_text(facts)
        return StoredRun(**fields, events=stored, messages=messages, facts=facts)

    def resolve_run_id(self, prefix: str) -> str:
        """The run with exactly this id, else the one run whose id starts with ``prefix``.

        ``StoreError`` when none or several do (naming up to ``AMBIGUOUS_SHOWN`` of them).
        The prefix match is an indexed range scan (a ``LIKE`` alone cannot use the index
        on SQLite). Text no run id can hold (a surrogate; NUL on PostgreSQL) is no run.
        """
        if not prefix:
            raise StoreError("empty run id")
        if not self._storable(prefix):
            raise StoreError(f"no run {prefix!r} in {shown(self.url)}")
        matching = [runs.c.run_id >= prefix, runs.c.run_id.startswith(prefix, autoescape=True)]
        if prefix[-1] != chr(sys.maxunicode):  # else no string is past every match: the range stays open
            matching.append(runs.c.run_id < prefix[:-1] + chr(ord(prefix[-1]) + 1))
        with self.reading() as conn:
            if conn.execute(select(runs.c.run_id).where(runs.c.run_id == prefix)).first() is not None:
                return prefix
            query = select(runs.c.run_id).where(*matching).order_by(runs.c.run_id).limit(AMBIGUOUS_SHOWN + 1)
            found = [str(run_id) for run_id in conn.execute(query).scalars()]
            more = 0
            if len(found) > AMBIGUOUS_SHOWN:
                found.pop()
                counted = conn.execute(select(func.count()).select_from(runs).where(*matching)).scalar_one()
                more = int(counted) - len(found)
        if not found:
            raise StoreError(f"no run {prefix!r} in {shown(self.url)}")
        if len(found) > 1:
            listed = ", ".join(found) + (f" and {more} more" if more else "")
            raise StoreError(f"run id prefix {prefix!r} is ambiguous: {listed}")
        return found[0]

    def _storable(self, text: str) -> bool:
        """Whether a run id could be ``text``: both backends refuse surrogates, PostgreSQL NUL."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return not ("\x00" in text and self.engine.dialect.name == "postgresql")

    def export_fixture(self, run_id: str, path: str | Path) -> Path:
        """Write the run (``run_id`` may be a unique prefix) as a replay fixture file.

        The write is atomic: if it fails, an existing file at ``path`` is left as it was.
        """
        from .._replay.fixture import fixture_from_run

        return fixture_from_run(self.find_run(run_id)).write(path)

    def find_run(self, prefix: str) -> StoredRun:
        """``get_run`` of the run whose id starts with ``prefix`` (for the CLI)."""
        return self.get_run(self.resolve_run_id(prefix))

    # -- plumbing --------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(f"store {shown(self.url)} is closed")

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One read-only transaction for your own queries on the tables: never takes the
        write lock, sees one snapshot, refuses writes (``query_only`` on SQLite, a
        ``READ ONLY`` transaction on PostgreSQL); failures are one ``StoreError`` line."""
        self._check_open()
        try:
            with read_connection(self.engine) as conn, conn.begin():
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read store {shown(self.url)}: {one_line(exc)}") from None

    @staticmethod
    def _labels(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        if not run_ids:
            return found
        rows = conn.execute(select(run_labels.c.run_id, run_labels.c.key, run_labels.c.value)
                            .where(run_labels.c.run_id.in_(run_ids)).order_by(run_labels.c.key))
        for run_id, key, value in rows:
            found.setdefault(run_id, {})[key] = value
        return found


def _event_data(run_id: str, seq: int, data: str) -> Any:
    """An event's ``data``; text that is not JSON (a hand edit, a foreign writer) is one ``StoreError``."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise StoreError(f"run {run_id}: event {seq} holds data that is not JSON ({exc}); "
                         "the log was written by something other than runner") from None
