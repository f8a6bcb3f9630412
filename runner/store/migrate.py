"""Alembic, driven in code: find the scripts, check the version cheaply, upgrade.

The migration scripts live in the top-level ``migrations/`` of a source checkout
and are mapped to ``runner/_migrations`` in the wheel; both are looked for.
Opening a store at head costs one read-only look at ``alembic_version`` (on
SQLite through a ``mode=ro`` connection, before any pragma can touch the file);
only a store behind head takes the write lock and runs Alembic.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from .engine import READ_OPTION, is_memory, one_line, shown

SQLITE_HEADER = b"SQLite format 3\x00"
PG_LOCK_KEY = 0x72756E6E6572  # "runner": one migrator at a time per database
OUR_TABLES = {"runs", "events", "run_labels", "run_tools"}


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


def current_revision(engine: Engine, url: URL) -> str | None:
    """The store's revision (None: empty), read without modifying anything; ``StoreError`` if not ours."""
    where = shown(url)
    if url.get_backend_name() == "sqlite" and not is_memory(url):
        assert url.database is not None
        return _sqlite_revision(Path(url.database), where)
    try:
        with engine.connect().execution_options(**{READ_OPTION: True}) as conn:
            return _revision(conn, where)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open store {where}: {one_line(exc)}") from None


def ensure_schema(engine: Engine, url: URL) -> None:
    """Bring the database to head, or raise ``StoreError`` without touching it."""
    where = shown(url)
    if current_revision(engine, url) == head_revision():
        return
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
            command.upgrade(alembic_config(conn), "head")
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot migrate store {where}: {one_line(exc)}") from None


def _check(revisions: list[str], tables: set[str], where: str, *, foreign_if_any: bool) -> str | None:
    if "alembic_version" not in tables:
        clash = tables if foreign_if_any else tables & OUR_TABLES
        if clash:
            raise StoreError(f"cannot open store {where}: it holds other tables ({', '.join(sorted(clash)[:5])}) "
                             "and no alembic_version; it is not a runner event log")
        return None
    if not revisions:
        return None
    unknown = [rev for rev in revisions if rev not in known_revisions()]
    if unknown:
        raise StoreError(f"cannot open store {where}: its schema is at revision {unknown[0]}, unknown to "
                         f"this runner (head {head_revision()}); upgrade durable-agent-runner")
    if len(revisions) > 1:
        raise StoreError(f"cannot open store {where}: alembic_version holds {len(revisions)} revisions")
    return revisions[0]


def _revision(conn: Connection, where: str) -> str | None:
    tables = set(inspect(conn).get_table_names())
    revisions: list[str] = []
    if "alembic_version" in tables:
        revisions = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    return _check(revisions, tables, where, foreign_if_any=conn.dialect.name == "sqlite")


def _sqlite_revision(path: Path, where: str) -> str | None:
    """Read the file's revision through a read-only connection; never modifies it."""
    if not path.exists():
        if not path.parent.is_dir():
            raise StoreError(f"cannot open store {where}: directory {path.parent} does not exist")
        return None
    if path.is_dir():
        raise StoreError(f"cannot open store {where}: {path} is a directory")
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot open store {where}: {exc.strerror or exc}") from None
    if not header:
        return None
    if header != SQLITE_HEADER:
        raise StoreError(f"cannot open store {where}: {path} is not a SQLite database")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        try:
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
            revisions: list[str] = []
            if "alembic_version" in tables:
                revisions = [row[0] for row in db.execute("SELECT version_num FROM alembic_version")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {where}: {path} is unreadable or corrupt: {exc}") from None
    return _check(revisions, tables, where, foreign_if_any=True)
