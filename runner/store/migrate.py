"""Alembic, driven in code: find the scripts, check the version cheaply, upgrade.

The scripts are ``migrations/`` in a checkout, ``runner/_migrations`` in the wheel. Opening
a store at head costs one read-only look at ``alembic_version`` (on SQLite a ``mode=ro``
connection, before any pragma touches the file); only a store behind head takes the write
lock and runs Alembic. Only an empty database or one that is recognisably ours is ever
migrated into (see ``_check``).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from .engine import is_memory, make_engine, one_line, parse_url, read_connection, shown, sqlite_ro_uri

SQLITE_HEADER = b"SQLite format 3\x00"
PG_LOCK_KEY = 0x72756E6E6572  # "runner": one migrator at a time per database
OUR_TABLES = {"runs", "events", "run_labels", "run_tools"}
# What SQLite says when a mode=ro connection cannot create the WAL index beside the file.
READ_ONLY_PLACE = re.compile(r"attempt to write a readonly database|unable to open database file")


def script_location() -> Path:
    """The migrations directory: ``runner/_migrations`` (wheel) or ``migrations/`` (checkout)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError(f"cannot find the migration scripts (looked in {package / '_migrations'} "
                     f"and {package.parent / 'migrations'}); reinstall durable-agent-runner")


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _script(location: str) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    heads = _script(str(script_location())).get_heads()
    if len(heads) != 1:
        raise StoreError(f"migration scripts have {len(heads)} heads, expected one")
    return heads[0]


def known_revisions() -> set[str]:
    return {rev.revision for rev in _script(str(script_location())).walk_revisions()}


class NoStoreError(StoreError):
    """A read-only open found no runner store (a missing or empty file, a database without tables)."""

    def __init__(self, location: str) -> None:
        super().__init__(f"no runner store at {location} (open_store(url) without read_only creates one)")
        self.location = location


@dataclass(frozen=True, slots=True)
class Probe:
    """What a read-only look at a database found: its revision (None: empty) and how it can be read."""

    revision: str | None
    immutable: bool = False  # SQLite: only an ``immutable=1`` connection could read it
    readonly_reason: str = ""  # why a ``mode=ro`` connection could not read it


def current_revision(engine: Engine, url: URL) -> str | None:
    """The store's revision (None: empty), read without modifying anything; ``StoreError`` if not ours."""
    return probe(engine, url).revision


class SchemaState(NamedTuple):
    """A database's schema revision (None: empty or absent) and the migration scripts' head."""

    db: str  # where it is, as shown (no password)
    revision: str | None
    head: str

    @property
    def at_head(self) -> bool:
        return self.revision == self.head


def schema_state(db: str) -> SchemaState:
    """The revision of the database at ``db`` and the scripts' head, read without modifying anything."""
    url = parse_url(db)
    engine = make_engine(url)
    try:
        revision = current_revision(engine, url)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"cannot open store {shown(url)}: {one_line(exc)}") from None
    finally:
        engine.dispose()
    return SchemaState(shown(url), revision, head_revision())


def probe(engine: Engine, url: URL) -> Probe:
    """Look at the database without modifying it (on SQLite before any pragma touches the file)."""
    where = shown(url)
    if url.get_backend_name() == "sqlite" and not is_memory(url):
        assert url.database is not None
        return _sqlite_probe(Path(url.database), where)
    try:
        with read_connection(engine) as conn:
            return Probe(_revision(conn, where))
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open store {where}: {one_line(exc)}") from None


def ensure_schema(engine: Engine, url: URL) -> None:
    """Bring the database to head, or raise ``StoreError`` without touching it."""
    where = shown(url)
    found = probe(engine, url)
    if found.immutable:
        raise StoreError(f"cannot open store {where} for writing: {found.readonly_reason} "
                         "(its directory is not writable; it can still be opened read-only)")
    if found.revision == head_revision():
        return
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
            command.upgrade(alembic_config(conn), "head")
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot migrate store {where}: {one_line(exc)}") from None


def location(url: URL) -> str:
    """Where a store is, as a person names it: a SQLite file's path, else the URL without password."""
    if url.get_backend_name() == "sqlite" and not is_memory(url) and url.database:
        return url.database
    return shown(url)


def _check(revisions: list[str], tables: set[str], where: str) -> str | None:
    """Only an empty database, or one that is recognisably ours, may be opened.

    Ours: a revision of our history in ``alembic_version``, or our tables with a
    revision we do not know (a newer runner wrote it). An ``alembic_version`` with
    no row and no other table is our own store after ``alembic downgrade base``.
    """
    others = sorted(tables - {"alembic_version"})
    listed = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
    if "alembic_version" not in tables:
        if others:
            raise StoreError(f"cannot open store {where}: it is not a runner store "
                             f"(it holds other tables: {listed}, and no alembic_version)")
        return None
    if not revisions:
        if others:
            raise StoreError(f"cannot open store {where}: it is not a runner store "
                             f"(its alembic_version is empty and it holds other tables: {listed})")
        return None
    if len(revisions) > 1:
        raise StoreError(f"cannot open store {where}: alembic_version holds {len(revisions)} revisions")
    revision = revisions[0]
    if revision in known_revisions():
        return revision
    if tables >= OUR_TABLES:
        raise StoreError(f"cannot open store {where}: its schema is at revision {revision}, unknown to "
                         f"this runner (head {head_revision()}); upgrade durable-agent-runner")
    raise StoreError(f"cannot open store {where}: it is not a runner store "
                     f"(its alembic_version holds revision {revision!r}, which is not ours)")


def _revision(conn: Connection, where: str) -> str | None:
    tables = set(inspect(conn).get_table_names())
    revisions: list[str] = []
    if "alembic_version" in tables:
        revisions = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    return _check(revisions, tables, where)


def _sqlite_probe(path: Path, where: str) -> Probe:
    """Read the file's revision through a read-only connection; never modifies it.

    A WAL file in a directory this process cannot write cannot even be read
    ``mode=ro`` (SQLite must create the ``-shm`` index): then ``immutable=1``.
    """
    if not path.exists():
        if not path.parent.is_dir():
            raise StoreError(f"cannot open store {where}: directory {path.parent} does not exist")
        return Probe(None)
    if path.is_dir():
        raise StoreError(f"cannot open store {where}: {path} is a directory")
    if not path.is_file():  # a FIFO, a device, a socket: opening one can block for ever
        raise StoreError(f"cannot open store {where}: {path} is not a regular file")
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot open store {where}: {exc.strerror or exc}") from None
    if not header:
        return Probe(None)
    if header != SQLITE_HEADER:
        raise StoreError(f"cannot open store {where}: {path} is not a SQLite database")
    try:
        return Probe(_sqlite_read(path, where))
    except sqlite3.OperationalError as exc:
        if not READ_ONLY_PLACE.search(str(exc)):
            raise StoreError(f"cannot open store {where}: {path} is unreadable or corrupt: {exc}") from None
        reason = str(exc)
    try:
        return Probe(_sqlite_read(path, where, immutable=True), immutable=True,
                     readonly_reason=reason)
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot open store {where}: {path} is unreadable or corrupt: {exc}") from None


def _sqlite_read(path: Path, where: str, *, immutable: bool = False) -> str | None:
    try:
        db = sqlite3.connect(sqlite_ro_uri(path, immutable=immutable), uri=True, timeout=30.0)
        try:
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
            revisions: list[str] = []
            if "alembic_version" in tables:
                revisions = [row[0] for row in db.execute("SELECT version_num FROM alembic_version")]
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and READ_ONLY_PLACE.search(str(exc)):
            raise
        raise StoreError(f"cannot open store {where}: {path} is unreadable or corrupt: {exc}") from None
    return _check(revisions, tables, where)
