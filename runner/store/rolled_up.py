"""The stats read from the rollups (``RunStore.stats``): whole periods from their rows, the rest from the log.

A window of start times reads its whole hours from ``rollups``, the whole minutes of its ragged
first and last hours from ``rollup_minutes``, and the runs started in its ragged first and last
minutes from the log: of each, the smaller part (the runs inside the window, or the whole
minute's rollup less the runs outside it). A running run's facts past ``runs.rolled`` come from
its log too (``tails``). Any other filter is read from the log alone (``rollups.scan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from sqlalchemy import Connection, Select, func, literal_column, select

from .._log import tally
from .._log.statuses import Status
from .._log.tally import FIELDS, Figures, Key, Rollup
from . import queries
from .filters import RunFilter
from .rollups import HOURS, MINUTES, MinuteRow, Period, ceil_to, day_sql, floor_to, past, scan
from .tables import runs


def answer(conn: Connection, where: RunFilter, *, rolled_up: bool = True, indexed: bool = True,
           parent_calls: bool = True) -> Rollup:
    """The rollup of the runs ``where`` picks (see the module docstring).

    ``rolled_up`` False (a store opened read-only at a revision before the rollups) reads the log alone.
    """
    def logged(since: datetime | None, until: datetime | None, chosen: RunFilter | None = None) -> Rollup:
        query, _ = queries.matching(conn, select(runs.c.run_id), chosen or RunFilter(since=since, until=until),
                                    indexed, parent_calls)
        return rolled(scan(conn, query))

    since, until = _utc(where.since), _utc(where.until)
    if not rolled_up or replace(where, since=None, until=None) != RunFilter():
        return logged(since, until, where)
    found = Rollup()
    first = None if since is None else ceil_to(since, HOURS.length)
    last = None if until is None else floor_to(until, HOURS.length)
    ragged: list[tuple[datetime, datetime]] = []
    if since is not None and until is not None and first is not None and last is not None and first >= last:
        ragged.append((since, until))  # no whole hour: its minutes
    else:
        stored(conn, found, HOURS, first, last)
        for start, end in ((since, first), (last, until)):
            if start is not None and end is not None and start < end:
                ragged.append((start, end))
    for start, end in ragged:
        low, high = ceil_to(start, MINUTES.length), floor_to(end, MINUTES.length)
        if low >= high:  # within a minute or two: the log
            merged(found, logged(start, end))
            continue
        stored(conn, found, MINUTES, low, high)
        if start < low:  # the ragged first minute
            if low - start <= HALF_MINUTE:
                merged(found, logged(start, low))
            else:
                stored(conn, found, MINUTES, low - MINUTES.length, low)
                merged(found, logged(low - MINUTES.length, start), -1)
        if high < end:  # the ragged last minute
            if end - high <= HALF_MINUTE:
                merged(found, logged(high, end))
            else:
                stored(conn, found, MINUTES, high, high + MINUTES.length)
                merged(found, logged(end, high + MINUTES.length), -1)
    return found


HALF_MINUTE: Final = timedelta(seconds=30)


def stored(conn: Connection, into: Rollup, period: Period, first: datetime | None, last: datetime | None) -> None:
    """Add to ``into`` the rollups of ``period`` in [first, last), and the running runs' facts they lack."""
    merged(into, read(conn, period, first, last))
    merged(into, tails(conn, first, last))


def read(conn: Connection, period: Period, first: datetime | None, last: datetime | None) -> Rollup:
    """The rows of ``period`` starting in [first, last) (None: unbounded) added up, and by day for the charts."""
    table = period.table

    def window(query: Select[Any]) -> Select[Any]:
        if first is not None:
            query = query.where(table.c.start >= first)
        if last is not None:
            query = query.where(table.c.start < last)
        return query

    sums = [func.sum(table.c[name]) for name in FIELDS]
    found = Rollup()
    for kind, name, bucket, *figures in conn.execute(window(
            select(table.c.kind, table.c.name, table.c.bucket, *sums)
            .group_by(table.c.kind, table.c.name, table.c.bucket))):
        if any(figures):  # a row a status change or a prune left at 0 counts nothing
            found.add(Key(kind, name, bucket), (int(value or 0) for value in figures))
    day: Any = literal_column(day_sql(conn.dialect.name, f"{table.name}.start"))
    for day_text, kind, name, *figures in conn.execute(window(
            select(day, table.c.kind, table.c.name, *sums)
            .where(table.c.kind.in_(sorted(tally.DAILY)))
            .group_by(day, table.c.kind, table.c.name))):
        if any(figures):
            found.days[(date.fromisoformat(str(day_text)), Key(kind, name))] = [int(value or 0) for value in figures]
    return found


def tails(conn: Connection, first: datetime | None, last: datetime | None) -> Rollup:
    """The running runs started in [first, last) past their ``runs.rolled``: what the rollups do not hold yet."""
    query = select(runs.c.run_id, runs.c.started_at, runs.c.rolled).where(runs.c.status == Status.RUNNING)
    if first is not None:
        query = query.where(runs.c.started_at >= first)
    if last is not None:
        query = query.where(runs.c.started_at < last)
    found = Rollup()
    for run_id, started_at, rolled_seq in conn.execute(query).all():
        found.add_hour(started_at, {key: Figures(*row) for key, row in past(conn, run_id, rolled_seq).items()})
    return found


def rolled(rows: Sequence[MinuteRow]) -> Rollup:
    """``rows`` added up as ``read`` adds the stored ones."""
    found = Rollup()
    for row in rows:
        found.add(row.key, row.figures, row.minute.date())
    return found


def merged(into: Rollup, more: Rollup, sign: int = 1) -> Rollup:
    """``into`` with ``more`` added (``sign`` -1: taken away; a row left counting nothing goes)."""
    for key, figures in more.totals.items():
        into.add(key, (sign * value for value in figures))
        if sign < 0 and not any(into.totals[key]):
            del into.totals[key]
    for (day, key), figures in more.days.items():
        row = into.days.setdefault((day, key), [0] * len(FIELDS))
        for i, value in enumerate(figures):
            row[i] += sign * value
        if not any(row):
            del into.days[(day, key)]
    return into


def _utc(moment: datetime | None) -> datetime | None:
    """``moment`` as an aware UTC time (naive means UTC)."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
