"""``open_store``: the engine for a URL, the schema migrated (or only probed, read-only), a ``RunStore``."""

from __future__ import annotations

import os

from sqlalchemy.engine import URL

from .engine import DEFAULT_BUSY_TIMEOUT_S, make_engine, parse_url, read_only_by_url
from .migrate import NoStoreError, ensure_schema, location, probe
from .runstore import RunStore


def open_store(url: str | os.PathLike[str] | URL = "sqlite:///runs.db", *, synchronous: str | None = None,
               busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, read_only: bool = False) -> RunStore:
    """Open the event log at ``url``, applying any pending migration.

    Args:
        url: a SQLAlchemy URL (``sqlite:///runs.db``, ``postgresql+psycopg://...``)
            or a SQLite file path (a ``Path``, or a string without ``://``).
        synchronous: SQLite only, default ``NORMAL`` (also ``?synchronous=FULL`` in the URL);
            trades commit speed for durability across power loss.
        busy_timeout_s: how long a SQLite writer waits for another one.
        read_only: for inspection. Never creates, migrates or writes anything (an older
            revision is read as it is), and works on a file in a directory it cannot write.
            A SQLite URL's ``?mode=ro`` means the same.

    Raises:
        StoreError: one line, on any failure, without modifying a database that is not
            a runner store. ``NoStoreError`` (a ``StoreError``) when ``read_only`` finds no
            store: a missing or empty file, or a database without our tables.
    """
    parsed, ro_by_url = read_only_by_url(parse_url(url))
    if read_only or ro_by_url:
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
    return RunStore(engine, url, read_only=True, busy_timeout_s=busy_timeout_s, revision=found.revision)
