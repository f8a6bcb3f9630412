"""The engine factory: SQLite pragmas first, writes in ``BEGIN IMMEDIATE``.

SQLite settings, per connection and before anything else touches the file:
``busy_timeout`` (wait for another writer instead of failing), ``journal_mode=WAL``
(readers never block the writer, several processes can share one file),
``foreign_keys=ON`` and ``synchronous=NORMAL``. NORMAL in WAL mode never corrupts
the file; a power cut may lose the last commits. ``synchronous="FULL"`` (argument
to ``open_store``, or ``?synchronous=FULL`` in the URL) makes every commit durable
at the cost of an fsync each.

pysqlite's own transaction handling is switched off and every transaction starts
with ``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe), so a writer takes the
write lock at the start and waits for it under the busy timeout instead of failing
half-way with "database is locked". Readers pass the ``runner_read`` execution
option and get a plain deferred ``BEGIN``.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from ..errors import StoreError

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
DEFAULT_BUSY_TIMEOUT_S = 30.0
READ_OPTION = "runner_read"
PG_CONNECT_TIMEOUT_S = 10


def parse_url(url: str | os.PathLike[str] | URL) -> URL:
    """A SQLAlchemy URL; a path (or a string without ``://``) means a SQLite file."""
    if isinstance(url, os.PathLike):
        return URL.create("sqlite", database=os.fspath(url))
    if isinstance(url, str) and "://" not in url:
        if not url.strip():
            raise StoreError("cannot open store: empty URL (use sqlite:///runs.db or postgresql+psycopg://...)")
        return URL.create("sqlite", database=url)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"cannot open store: bad URL {str(url)!r}: {exc}") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"cannot open store {shown(parsed)}: unsupported backend "
                         f"{parsed.get_backend_name()!r} (use sqlite or postgresql+psycopg)")
    return parsed


def shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def is_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(url: URL, *, synchronous: str | None = None,
                busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> Engine:
    """An engine for ``url`` (already parsed); SQLite gets its pragmas and BEGIN IMMEDIATE."""
    kwargs: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        from_url = url.query.get("synchronous")
        url = url.difference_update_query(["synchronous"])
        chosen = (synchronous or (from_url if isinstance(from_url, str) else None) or "NORMAL").upper()
        if chosen not in SYNCHRONOUS:
            raise StoreError(f"cannot open store {shown(url)}: synchronous must be one of "
                             f"{', '.join(SYNCHRONOUS)}, got {chosen!r}")
        if is_memory(url):
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        if synchronous is not None:
            raise StoreError(f"cannot open store {shown(url)}: synchronous applies to SQLite only")
        if "connect_timeout" not in url.query:  # an unreachable host fails in seconds, not minutes
            kwargs["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    try:
        engine = create_engine(url, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"cannot open store {shown(url)}: {type(exc).__name__}: {exc}") from None
    if url.get_backend_name() == "sqlite":
        _sqlite_events(engine, chosen, busy_timeout_s, wal=not is_memory(url))
    return engine


def _sqlite_events(engine: Engine, synchronous: str, busy_timeout_s: float, *, wal: bool) -> None:
    pragmas = [f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}"]
    if wal:
        pragmas.append("PRAGMA journal_mode = WAL")
    pragmas += ["PRAGMA foreign_keys = ON", f"PRAGMA synchronous = {synchronous}"]

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        # SQLite's own lower() folds ASCII only; the text search must match 'ÉTÉ' to 'été'
        # on SQLite as it does on PostgreSQL.
        dbapi_connection.create_function("lower", 1, _unicode_lower, deterministic=True)
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Any) -> None:
        # Readers (execution option ``runner_read``) must not take the write lock.
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_OPTION) else "BEGIN IMMEDIATE")


def _unicode_lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def one_line(exc: BaseException) -> str:
    """The first line of a database error's own message."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
