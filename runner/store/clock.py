"""The recorder's clock: each fact's timestamp, already in the form its store keeps.

On SQLite ``utc_text`` reads the clock and writes the text ``UTCDateTime`` keeps in one go,
formatting the date and time of day once per second: a ``datetime`` per fact, turned into
text later, cost more than the fact's JSON. A server database takes the ``datetime``.
On PostgreSQL heartbeats use the server's clock (``database_clock``, ``database_now``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Connection, func, select

from .tables import UTCDateTime

# The second last formatted, and its text: replaced whole, so threads never see half of it.
_second: tuple[int, str] = (-1, "")


def utc_text() -> str:
    """Now, as SQLite's UTC text."""
    global _second
    micro = time.time_ns() // 1000
    second, fraction = divmod(micro, 1_000_000)
    known = _second
    if known[0] != second:
        known = _second = (second, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second)))
    return f"{known[1]}.{fraction:06d}"


def utc_now() -> datetime:
    return datetime.now(UTC)


def clock_for(dialect_name: str) -> Callable[[], datetime | str]:
    """The recorder's timestamps for a store of ``dialect_name``: text on SQLite, else ``datetime``."""
    return utc_text if dialect_name == "sqlite" else utc_now


def database_clock(dialect_name: str) -> tuple[ColumnElement[datetime], ...]:
    """The ``read_at`` column to select with a run's row: the server's clock on PostgreSQL, else none."""
    return (func.now(type_=UTCDateTime()).label("read_at"),) if dialect_name == "postgresql" else ()


def database_now(conn: Connection) -> datetime | None:
    """The database server's clock on PostgreSQL; None elsewhere (this process's clock judges)."""
    clock = database_clock(conn.dialect.name)
    return conn.execute(select(*clock)).scalar_one() if clock else None
