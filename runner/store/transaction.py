"""One group's transaction: the writer's held connection, the rows in order, the owner fence.

Each summary update matches only the run's own owner, so a process that lost its lease
writes nothing (``TakenOver``). A dropped connection is replaced and the transaction
retried, for up to ``RECONNECT_S`` on a server; the events' primary key keeps a retry
from writing a fact twice. Why: docs/event-log.md, "The transaction".
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from .engine import answering
from .prepared import Prepared

Row = dict[str, Any]
RECONNECT_S = 15.0  # a server restart or failover, not an outage: past this the commit fails
RECONNECT_FIRST_PAUSE_S = 0.1
RECONNECT_MAX_PAUSE_S = 2.0
ANSWER_S = 10.0  # a commit the server does not answer in this long (it went silent) is a lost connection
UNNAMED = "someone"  # who asked, for a cancel request whose row names nobody (as ``queue.UNNAMED``)
FENCED = frozenset({"update_run", "update_progress"})  # statements that match only the run's own owner


@dataclass(slots=True)
class Parts:
    """A group's rows by statement, in the order they are written, so each run's rows keep their order."""

    new_runs: list[Row]
    starts: list[Row]  # queued runs whose row their start fills in (runner.pool)
    labels: list[Row]
    updates: list[Row]  # whole summaries (the status changed)
    progress: list[Row]  # progress columns only
    events: list[tuple[Any, ...]]  # ``events`` rows in the insert's column order
    tools: list[Row]
    rollups: list[tuple[Any, ...]] = field(default_factory=list)  # the stats' rollups' rows, in key order
    watched: list[str] = field(default_factory=list)  # runs whose cancel request the transaction reads


class ServerGone(Exception):
    """The server stayed out of reach for ``Writer.reconnect_s``; the whole group fails.

    Trying its runs one by one would wait that long for each.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class TakenOver(Exception):
    """Some runs of a group have another owner now (``owners``: run id -> that owner)."""

    def __init__(self, owners: dict[str, str]) -> None:
        super().__init__(owners)
        self.owners = owners


# Deadlocks and serialization failures a commit is tried again after, at once.
CLASHES = 3
_CLASH_STATES = frozenset({"40P01", "40001"})


def crossed(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL undoing a transaction for a deadlock or a serialization failure."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) in _CLASH_STATES


class Writer:
    """Writes groups of rows in transactions on one held connection (see the module docstring)."""

    def __init__(self, engine: Engine, statements: Callable[[], dict[str, Prepared]]) -> None:
        self.engine = engine
        self._statements = statements
        self._sql: dict[str, Prepared] | None = None  # the statements, once the first commit asked for them
        self._begin = "BEGIN IMMEDIATE" if engine.dialect.name == "sqlite" else ""
        self._mark = "?" if engine.dialect.name == "sqlite" else "%s"
        self.dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._conn: Any = None
        self._conn_pid = 0
        self._cursor: Any = None  # the held connection's cursor, kept with it
        self._closed = False  # after ``close``, a late commit (a run still going) holds nothing
        self._lost = False  # the last attempt found its connection dead
        self._gone = False  # the last commit gave up on the server (``ServerGone``)
        self.commits = 0  # transactions committed (for tests and benchmarks)
        # How long a commit waits for a server that cannot be reached; SQLite has no server to wait for.
        self.reconnect_s = 0.0 if engine.dialect.name == "sqlite" else RECONNECT_S

    @property
    def connection(self) -> Any:
        """The held connection, or None (not opened yet, dropped, or a parent's after a fork)."""
        return self._conn if self._conn_pid == os.getpid() else None

    def write(self, parts: Parts) -> dict[str, str]:
        """One transaction for ``parts``; raises the driver's error, ``TakenOver`` or ``ServerGone``.

        Returns who asked to cancel each of ``parts.watched`` that someone asked to (read in the same
        transaction, so watching a run's cancel requests costs no transaction of its own).

        A connection found dead is replaced and the transaction tried again at once (the server
        dropped idle connections); on a server database, while the server cannot be reached (a
        restart, a failover), again with a growing pause for up to ``reconnect_s``. A deadlock: again at once.
        """
        # The wait counts from the commit's start, attempts included (one may wait for a silent
        # server's answer); right after the server was found gone, a commit tries once more only.
        deadline = time.monotonic() + (0.0 if self._gone else self.reconnect_s)
        pause, retried = RECONNECT_FIRST_PAUSE_S, self._gone
        clashes = 0
        while True:
            try:
                requests = self._attempt(parts)
                self._gone = False
                return requests
            except (self.dbapi_error, DBAPIError) as exc:
                if not self._lost and crossed(exc) and clashes < CLASHES:
                    clashes += 1  # two writers locked rollup rows in opposite orders: the server undid one
                    continue
                if not self._lost:  # the connection is fine: the rows themselves failed
                    raise
                if not retried:
                    retried = True  # once more at once, on a new connection
                    continue
                now = time.monotonic()
                if now >= deadline:
                    self._gone = True
                    raise ServerGone(exc) from exc
                time.sleep(min(pause, deadline - now))
                pause = min(pause * 2, RECONNECT_MAX_PAUSE_S)

    def close(self) -> None:
        """Hand the connection back to the pool.

        A later commit (of a run the store's owner did not wait for) opens a connection
        of its own and closes it when done.
        """
        self._closed = True
        self._drop(broken=False)

    def _attempt(self, parts: Parts) -> dict[str, str]:
        self._lost = False
        sql = self._sql
        if sql is None:
            sql = self._sql = self._statements()
        try:
            raw = self._connect()
        except (self.dbapi_error, DBAPIError):  # the server refuses connections: as lost as a dead one
            self._lost = self.reconnect_s > 0
            raise
        cursor = None
        try:
            cursor = self._cursor
            if cursor is None:
                cursor = self._cursor = raw.cursor()
            with answering(raw, ANSWER_S):
                requests = self._rows(raw, cursor, sql, parts)
            self.commits += 1
            return requests
        except BaseException as exc:
            self._roll_back(raw, cursor, exc)
            raise
        finally:
            if self._closed:
                self._drop(broken=False, keep=False)

    def _rows(self, raw: Any, cursor: Any, sql: dict[str, Prepared], parts: Parts) -> dict[str, str]:
        if self._begin:
            cursor.execute(self._begin)
        for name, rows in (("runs", parts.new_runs), ("start_queued", parts.starts),
                           ("run_labels", parts.labels), ("update_run", parts.updates),
                           ("update_progress", parts.progress)):
            if rows and sql[name].run(cursor, rows) != len(rows) and name in FENCED:
                raise TakenOver(self._owners_now(cursor, rows))
        sql["events"].run_values(cursor, parts.events)
        if parts.tools:
            sql["run_tools"].run(cursor, parts.tools)
        if parts.rollups:
            sql["rollups"].run_values(cursor, parts.rollups)
            sql["rollup_minutes"].run_values(cursor, parts.rollups)
        requests: dict[str, str] = {}
        if parts.watched:
            cursor.execute(f"SELECT run_id, requested_by FROM run_cancels WHERE run_id IN "
                           f"({', '.join([self._mark] * len(parts.watched))})", parts.watched)
            requests = {str(run_id): str(by or UNNAMED) for run_id, by in cursor.fetchall()}
        raw.commit()
        return requests

    def _connect(self) -> Any:
        if self.connection is None:
            self._cursor = None  # a parent's (after a fork), or none
            self._conn = self.engine.raw_connection()
            self._conn_pid = os.getpid()
        return self._conn

    def _drop(self, *, broken: bool, keep: bool = True) -> None:
        """Let go of the held connection: back to the pool (``keep``), or closed for good.

        It is closed for good when ``broken``, or after ``close``: the pool is disposed of already.
        """
        conn, self._conn = self.connection, None  # a forked child never closes its parent's
        cursor, self._cursor = self._cursor, None
        if conn is None:
            return
        if cursor is not None:
            with contextlib.suppress(Exception):
                cursor.close()
        with contextlib.suppress(Exception):  # a connection that cannot even be closed is gone anyway
            if broken:
                conn.invalidate()  # the pool discards it; the next commit connects afresh
            elif keep:
                conn.close()
            else:
                conn.detach()
                conn.close()

    def _roll_back(self, raw: Any, cursor: Any, exc: BaseException) -> None:
        """Undo a failed transaction; a connection found dead is dropped."""
        try:
            raw.rollback()
        except BaseException:
            self._lost = True
        else:
            self._lost = isinstance(exc, self.dbapi_error) and self.engine.dialect.is_disconnect(
                exc, raw.dbapi_connection, cursor)  # type: ignore[arg-type]
        if self._lost:
            self._drop(broken=True)
            if self.engine.dialect.name != "sqlite":  # a server that dropped this one likely dropped the
                self.engine.dispose()  # idle ones too: the retry connects afresh (an in-memory SQLite
                # file must never be disposed of: its one connection is the database)

    def _owners_now(self, cursor: Any, updates: Sequence[Row]) -> dict[str, str]:
        """The runs among ``updates`` whose row names another owner than the batch expected."""
        run_ids = [row["_run_id"] for row in updates]
        cursor.execute(f"SELECT run_id, owner FROM runs WHERE run_id IN ({', '.join([self._mark] * len(run_ids))})",
                       run_ids)
        owners = dict(cursor.fetchall())
        return {row["_run_id"]: str(owners.get(row["_run_id"]) or "nobody (the run is gone)")
                for row in updates if owners.get(row["_run_id"]) != row["_owner"]}
