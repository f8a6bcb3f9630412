"""The engine factory: SQLite pragmas first, writes in ``BEGIN IMMEDIATE``.

SQLite gets ``busy_timeout``, WAL, foreign keys and ``synchronous=NORMAL`` (``FULL`` on request)
on every connection before anything else touches the file. pysqlite's own transactions are
off: a writer takes the write lock at ``BEGIN IMMEDIATE`` and waits for it, instead of failing
half-way with "database is locked". Readers run read-only (``query_only``, or ``READ ONLY``),
undone before the pool reuses the connection; a ``read_only`` engine never writes at all.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from ..errors import StoreError

# NORMAL in WAL mode never corrupts the file, but a power cut may lose the last commits;
# FULL makes every commit durable at the cost of an fsync each.
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
DEFAULT_BUSY_TIMEOUT_S = 30.0
READ_OPTION = "runner_read"
PG_CONNECT_TIMEOUT_S = 5
# A server the network lost (a partition, a dead host) is given up in about 10 s, on a commit under way
# (``tcp_user_timeout``, ms) as on an idle connection (keepalives: 5 s idle, then 3 probes 2 s apart).
PG_LIVENESS = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
               "tcp_user_timeout": 10_000}
PG_DRIVER_HINT = "the PostgreSQL driver is not installed: pip install 'durable-agent-runner[postgres]'"
# The SQLite URL parameters honoured: runner's (mode=ro only), then those pysqlite takes; it ignores others.
SQLITE_QUERY = ("mode", "synchronous", "cached_statements", "check_same_thread", "detect_types", "isolation_level",
                "timeout")
QUERY_ONLY = "runner_query_only"  # set in a pooled connection's info while a read has it query_only


def parse_url(url: str | os.PathLike[str] | URL) -> URL:
    """A SQLAlchemy URL; a path (or a string without ``://``) means a SQLite file."""
    if isinstance(url, os.PathLike):
        return _no_nul(URL.create("sqlite", database=os.fspath(url)))
    if isinstance(url, str) and "://" not in url:
        if not url.strip():
            raise StoreError("cannot open store: empty URL (use sqlite:///runs.db or postgresql+psycopg://...)")
        return _no_nul(URL.create("sqlite", database=url))
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number, say
        raise StoreError(f"cannot open store: bad URL {_masked(str(url))!r}: {_masked(str(exc))}") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"cannot open store {shown(parsed)}: unsupported backend "
                         f"{parsed.get_backend_name()!r} (use sqlite or postgresql+psycopg)")
    if parsed.get_backend_name() == "sqlite" and "uri" in parsed.query:
        # The driver would open the file the URI names, while every check of the store (is it a
        # runner store? which revision?) would look at a file named like the URI text itself.
        raise StoreError(f"cannot open store {shown(parsed)}: SQLite URI filenames (uri=true) are not "
                         "supported; give the file's path, as in sqlite:///path/to/runs.db")
    if parsed.get_backend_name() == "sqlite":
        _known_sqlite_query(parsed)
        return _no_nul(parsed)
    return parsed


def _known_sqlite_query(url: URL) -> None:
    """Refuse a SQLite URL parameter runner does not honour: the driver would warn and ignore it."""
    for name, value in url.query.items():
        if name not in SQLITE_QUERY:
            raise StoreError(f"cannot open store {shown(url)}: unknown SQLite URL parameter {name!r} "
                             f"(known: {', '.join(SQLITE_QUERY)})")
        if name == "mode" and value != "ro":
            raise StoreError(f"cannot open store {shown(url)}: mode must be ro, got {value!r}")


def read_only_by_url(url: URL) -> tuple[URL, bool]:
    """``url`` without its ``mode=ro``, and whether it had one (the store must then open read-only)."""
    if url.get_backend_name() != "sqlite" or "mode" not in url.query:
        return url, False
    return url.difference_update_query(["mode"]), True


def _masked(text: str) -> str:
    """``text`` with the password of any URL in it starred (an unparsable URL cannot be rendered)."""
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"([?&]password=)[^&\s'\"]*", r"\1***", text)


def _no_nul(url: URL) -> URL:
    if "\x00" in (url.database or ""):
        raise StoreError(f"cannot open store {url.database!r}: a file name cannot hold a NUL character")
    return url


def shown(url: URL) -> str:
    """``url`` as people may see it: its password starred, in its user part or as ``?password=``."""
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def shown_url(url: str | os.PathLike[str] | URL) -> str:
    """A store's URL (or path) as people may see it, with any password starred; the one place that says how.

    Hints, errors and pages print a store's URL; a password in it would end in terminals and logs.
    """
    if isinstance(url, URL):
        return shown(url)
    if isinstance(url, os.PathLike) or "://" not in url:
        return os.fspath(url)
    try:
        return shown(make_url(url))
    except (ArgumentError, ValueError):
        return _masked(url)


def is_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(url: URL, *, synchronous: str | None = None, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
                read_only: bool = False, immutable: bool = False) -> Engine:
    """An engine for ``url`` (already parsed); SQLite gets its pragmas and BEGIN IMMEDIATE.

    ``read_only`` makes an engine that cannot write: SQLite files ``mode=ro`` with ``query_only``,
    PostgreSQL connections read-only. ``immutable`` (SQLite, with ``read_only``) opens the file
    without locking or a WAL index, for a directory that cannot hold one (a read-only mount);
    it is safe only while nobody writes the file.
    """
    kwargs: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        from_url = url.query.get("synchronous")
        url = url.difference_update_query(["synchronous", "mode"])  # mode=ro: see read_only_by_url
        chosen = (synchronous or (from_url if isinstance(from_url, str) else None) or "NORMAL").upper()
        if chosen not in SYNCHRONOUS:
            raise StoreError(f"cannot open store {shown(url)}: synchronous must be one of "
                             f"{', '.join(SYNCHRONOUS)}, got {chosen!r}")
        if is_memory(url):
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
        elif read_only:
            assert url.database is not None
            kwargs["creator"] = _read_only_sqlite(Path(url.database), immutable, busy_timeout_s)
    else:
        if synchronous is not None:
            raise StoreError(f"cannot open store {shown(url)}: synchronous applies to SQLite only")
        # An unreachable host fails in seconds, not minutes; a URL's own settings win.
        defaults: dict[str, Any] = {"connect_timeout": PG_CONNECT_TIMEOUT_S, **PG_LIVENESS}
        kwargs["connect_args"] = {key: value for key, value in defaults.items() if key not in url.query}
        # A connection the server dropped while it sat in the pool (a restart, a failover, a proxy's
        # idle timeout) is replaced when it is checked out, not handed to a read that then fails.
        # The writer holds its own connection between commits, so its commits pay nothing for this.
        kwargs["pool_pre_ping"] = True
        if read_only:
            kwargs["execution_options"] = {"postgresql_readonly": True}
    try:
        engine = create_engine(url, **kwargs)
    except ImportError as exc:
        if url.get_backend_name() == "postgresql" and "psycopg" in str(exc):
            raise StoreError(f"cannot open store {shown(url)}: {PG_DRIVER_HINT}") from None
        raise StoreError(f"cannot open store {shown(url)}: {type(exc).__name__}: {exc}") from None
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:  # ValueError: a query value of the wrong kind
        raise StoreError(f"cannot open store {shown(url)}: {type(exc).__name__}: {exc}") from None
    if url.get_backend_name() == "sqlite":
        _sqlite_events(engine, chosen, busy_timeout_s, wal=not is_memory(url) and not read_only,
                       read_only=read_only)
    elif engine.dialect.driver == "psycopg":
        from . import pg_answer  # here: psycopg is an optional dependency, imported once it is used

        pg_answer.install(engine)
    return engine


@contextmanager
def answering(raw: Any, seconds: float) -> Iterator[None]:
    """Bound the waits for the server of ``raw`` (a checked-out connection) to ``seconds`` meanwhile.

    Only a psycopg connection of ``make_engine``'s has a bound (``pg_answer``); others are unchanged.
    """
    driver: Any = getattr(raw, "driver_connection", None)
    if not hasattr(driver, "answer_s"):
        yield
        return
    before, driver.answer_s = driver.answer_s, seconds
    try:
        yield
    finally:
        driver.answer_s = before


def sqlite_ro_uri(path: Path, *, immutable: bool = False) -> str:
    """A ``file:`` URI opening ``path`` read-only (percent-encoded, so any file name works)."""
    return f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def _read_only_sqlite(path: Path, immutable: bool, busy_timeout_s: float) -> Callable[[], sqlite3.Connection]:
    uri = sqlite_ro_uri(path, immutable=immutable)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False)

    return connect


def read_connection(engine: Engine) -> Connection:
    """A connection whose transactions cannot write, undone before the pool reuses it.

    SQLite reads in a deferred ``BEGIN`` under ``PRAGMA query_only``, PostgreSQL in a
    ``READ ONLY`` transaction; the next writer of the connection is not read-only.
    """
    options: dict[str, Any] = {READ_OPTION: True}
    if engine.dialect.name == "postgresql":
        options["postgresql_readonly"] = True
    return engine.connect().execution_options(**options)


def _sqlite_events(engine: Engine, synchronous: str, busy_timeout_s: float, *, wal: bool,
                   read_only: bool) -> None:
    pragmas = [f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}"]
    if wal:
        pragmas.append("PRAGMA journal_mode = WAL")
    if read_only:
        pragmas.append("PRAGMA query_only = ON")
    else:
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
                if pragma.startswith("PRAGMA journal_mode"):
                    _waiting_for_writers(cursor, pragma, busy_timeout_s)
                else:
                    cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Any) -> None:
        # Readers (execution option ``runner_read``) neither take the write lock nor write.
        if not conn.get_execution_options().get(READ_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return
        if not read_only:
            conn.exec_driver_sql("PRAGMA query_only = ON")
            conn.connection.info[QUERY_ONLY] = True
        conn.exec_driver_sql("BEGIN")

    if not read_only:
        @event.listens_for(engine, "checkin")
        def on_checkin(dbapi_connection: Any, record: Any) -> None:
            if dbapi_connection is not None and record.info.pop(QUERY_ONLY, False):
                try:
                    dbapi_connection.execute("PRAGMA query_only = OFF")
                except sqlite3.Error as exc:
                    record.invalidate(exc)  # never hand a writer a connection stuck read-only


def _waiting_for_writers(cursor: Any, statement: str, busy_timeout_s: float) -> None:
    """Run ``statement`` (the switch to WAL), waiting for another writer as long as the busy timeout.

    Switching a new file to WAL needs it to itself. When another connection holds the write
    lock meanwhile (a second process creating the same store), SQLite answers "database is
    locked" at once, without its busy handler (waiting could deadlock a reader upgrading to
    a writer): so the wait is done here, and the store opens once the other one has.
    """
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.005
    while True:
        try:
            cursor.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _unicode_lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def one_line(exc: BaseException) -> str:
    """The first line of a database error's own message."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
