"""The stats' rollups (``rollups``): written with the facts they count, read instead of the log.

A row holds what the runs started in one hour add up to under a key (``tally.Key``). The
recorder adds its run's rows in each commit; triggers on ``runs`` keep the ``status`` rows as
runs are inserted, change status and are deleted; ``prune`` takes its runs' other rows away.
``read`` adds the rows of whole hours up; ``scan`` works the same figures out from the log
(a window's ragged edges, filters the rollups do not key, and ``refill``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, Dialect, Insert, Select, bindparam, delete, func, literal_column, select
from sqlalchemy.dialects import postgresql, sqlite

from .._log import tally
from .._log.tally import FIELDS, Figures, Key, Rollup, Tally
from ..events import KIND_OF, ModelCalled, RunResumed, RunStarted, StepFinished, StepStarted, ToolFinished, decode
from . import queries
from .filters import RunFilter
from .rows import NAME_WIDTH, column, event_data
from .tables import UTCDateTime, events, rollups, runs

# The facts a tally reads, as the log names their kinds.
COUNTED: Final = tuple(KIND_OF[kind] for kind in (RunStarted, RunResumed, StepStarted, StepFinished, ModelCalled,
                                                  ToolFinished))
CHUNK: Final = 500  # runs whose facts one statement reads
KEY: Final = ("hour", "kind", "name", "bucket")


class HourRow(NamedTuple):
    """A rollup row: an hour, a key, the figures."""

    hour: datetime
    key: Key
    figures: Figures


def hour_sql(dialect: str, column_sql: str) -> str:
    """SQL for the hour a timestamp column falls in, as ``rollups.hour`` keeps it."""
    if dialect == "sqlite":  # 'YYYY-MM-DD HH:MM:SS.ffffff' (``tables.UTCDateTime``)
        return f"substr({column_sql}, 1, 13) || ':00:00.000000'"
    return f"date_trunc('hour', {column_sql}, 'UTC')"


def day_sql(dialect: str, column_sql: str) -> str:
    """SQL for the UTC date of an hour column, as ISO text."""
    if dialect == "sqlite":
        return f"substr({column_sql}, 1, 10)"
    return f"to_char({column_sql} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


def hour_of(moment: datetime) -> datetime:
    """The hour ``moment`` falls in."""
    return moment.replace(minute=0, second=0, microsecond=0)


def stored(key: Key) -> Key:
    """``key`` as its row keeps it: the name cut to the column's width."""
    return Key(key.kind, column(key.name, NAME_WIDTH), key.bucket)


def _adding(dialect: Dialect, query: Select[Any] | None = None) -> Insert:
    """An insert of ``rollups`` rows (from ``query``, else given) that adds their figures to rows that exist."""
    insert = postgresql.insert(rollups) if dialect.name == "postgresql" else sqlite.insert(rollups)
    if query is not None:
        insert = insert.from_select([*KEY, *FIELDS], query)
    added = {name: rollups.c[name] + insert.excluded[name] for name in FIELDS}
    return insert.on_conflict_do_update(index_elements=[rollups.c[name] for name in KEY], set_=added)


def upsert(dialect: Dialect) -> Insert:
    """The recorder's statement: a run's row (``run_id``, kind, name, bucket, figures) added to its hour's.

    The hour is the run's ``started_at``'s, read in the same statement (a queued run's start
    moves it, earlier in the same transaction).
    """
    hour = literal_column(hour_sql(dialect.name, "runs.started_at"), UTCDateTime())
    values = [bindparam(name, type_=rollups.c[name].type) for name in ("kind", "name", "bucket", *FIELDS)]
    query = select(hour, *values).where(runs.c.run_id == bindparam("run_id"))
    return _adding(dialect, query)


# ``upsert``'s parameters, in the order its compiled statement takes them.
PARAMETERS: Final = ("kind", "name", "bucket", *FIELDS, "run_id")


def recorded(run_id: str, rows: Mapping[Key, Sequence[int]], names: dict[str, str]) -> list[tuple[Any, ...]]:
    """A tally's rows as ``upsert``'s parameters (``PARAMETERS``), in key order: the order rows are locked in.

    ``names`` remembers each name as its column keeps it (a run names the same few again and again).
    """
    found = []
    for key, figures in sorted(rows.items()):
        name = names.get(key.name)
        if name is None:
            name = names[key.name] = column(key.name, NAME_WIDTH)
        found.append((key.kind, name, key.bucket, *figures, run_id))
    return found


def lock_order(row: Sequence[Any]) -> tuple[Any, ...]:
    """Where ``recorded``'s row comes in the order every writer adds rows in."""
    return tuple(row[:3])


def figures_of(rows: Sequence[Sequence[Any]]) -> dict[Key, Figures]:
    """``recorded``'s rows as a tally's rows again (a failed commit's, to be committed later)."""
    return {Key(row[0], row[1], row[2]): Figures(*row[3:3 + len(FIELDS)]) for row in rows}


def add(conn: Connection, rows: Sequence[HourRow], sign: int = 1) -> None:
    """Add ``rows`` (``sign`` -1: take them away) to the rollups, in key order."""
    if not rows:
        return
    params = [{"hour": row.hour, **stored(row.key)._asdict(), **{name: sign * value for name, value
                                                                 in row.figures._asdict().items()}}
              for row in sorted(rows, key=lambda row: (row.hour, row.key))]
    conn.execute(_adding(conn.dialect), params)


def read(conn: Connection, first: datetime | None, last: datetime | None) -> Rollup:
    """The rollups of the hours in [first, last) (None: unbounded) added up, and day by day for the charts."""
    def window(query: Select[Any]) -> Select[Any]:
        if first is not None:
            query = query.where(rollups.c.hour >= first)
        if last is not None:
            query = query.where(rollups.c.hour < last)
        return query

    sums = [func.sum(rollups.c[name]) for name in FIELDS]
    found = Rollup()
    for kind, name, bucket, *figures in conn.execute(window(
            select(rollups.c.kind, rollups.c.name, rollups.c.bucket, *sums)
            .group_by(rollups.c.kind, rollups.c.name, rollups.c.bucket))):
        found.add(Key(kind, name, bucket), (int(value or 0) for value in figures))
    day: Any = literal_column(day_sql(conn.dialect.name, "rollups.hour"))
    for day_text, kind, name, *figures in conn.execute(window(
            select(day, rollups.c.kind, rollups.c.name, *sums)
            .where(rollups.c.kind.in_(sorted(tally.DAILY)))
            .group_by(day, rollups.c.kind, rollups.c.name))):
        found.days[(date.fromisoformat(str(day_text)), Key(kind, name))] = [int(value or 0) for value in figures]
    return found


def scan(conn: Connection, run_ids: Select[Any], *, statuses: bool = True) -> list[HourRow]:
    """The rollup rows of the runs ``run_ids`` selects, worked out from their rows and their facts.

    ``statuses``: with the ``status`` rows (the triggers keep those; a prune leaves them to its delete).
    """
    found: dict[tuple[datetime, Key], list[int]] = {}

    def put(hour: datetime, rows: Mapping[Key, Sequence[int]]) -> None:
        for key, figures in rows.items():
            key = stored(key)
            row = found.get((hour, key))
            if row is None:
                found[(hour, key)] = list(figures)
            else:
                for i, value in enumerate(figures):
                    row[i] += value

    hours: dict[str, datetime] = {}
    for run_id, status, started_at, tokens, tool_calls in conn.execute(
            select(runs.c.run_id, runs.c.status, runs.c.started_at, runs.c.tokens, runs.c.tool_calls)
            .where(runs.c.run_id.in_(run_ids.scalar_subquery()))):
        hour = hours[run_id] = hour_of(started_at)
        run = Tally()
        run.ran(int(tokens or 0), int(tool_calls or 0))
        rows = run.take()
        if statuses:
            rows[Key(tally.STATUS, str(status))] = list(Figures(number=1))
        put(hour, rows)
    for run_id, facts in _facts(conn, sorted(hours)):
        run = Tally()
        for at, fact in facts:
            run.feed(fact, at)
        put(hours[run_id], run.take())
    return [HourRow(hour, key, Figures(*figures)) for (hour, key), figures in found.items()]


def _facts(conn: Connection, run_ids: list[str]) -> Iterator[tuple[str, list[tuple[datetime, Any]]]]:
    """Each run's counted facts in log order, with the times they were logged, ``CHUNK`` runs a statement."""
    for start in range(0, len(run_ids), CHUNK):
        part = run_ids[start:start + CHUNK]
        current: str | None = None
        facts: list[tuple[datetime, Any]] = []
        for run_id, seq, kind, at, step, data in conn.execute(
                select(events.c.run_id, events.c.seq, events.c.kind, events.c.at, events.c.step, events.c.data)
                .where(events.c.run_id.in_(part), events.c.kind.in_(COUNTED))
                .order_by(events.c.run_id, events.c.seq)):
            if run_id != current:
                if current is not None:
                    yield current, facts
                current, facts = run_id, []
            facts.append((at, decode(kind, event_data(run_id, seq, data), step, run_id)))
        if current is not None:
            yield current, facts


def rolled(rows: Sequence[HourRow]) -> Rollup:
    """``rows`` added up as ``read`` adds the stored ones."""
    found = Rollup()
    for row in rows:
        found.add(row.key, row.figures, row.hour.date())
    return found


def merged(into: Rollup, more: Rollup) -> Rollup:
    """``into`` with ``more`` added."""
    for key, figures in more.totals.items():
        into.add(key, figures)
    for (day, key), figures in more.days.items():
        row = into.days.setdefault((day, key), [0] * len(FIELDS))
        for i, value in enumerate(figures):
            row[i] += value
    return into


def refill(conn: Connection) -> int:
    """Work every rollup out again from the runs and their logs; how many runs were read.

    The migration that adds the rollups fills them this way; so can a store whose rows were
    copied in bulk (``bench/ui_store.py``).
    """
    conn.execute(delete(rollups))
    run_ids = [str(run_id) for run_id in conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars()]
    for start in range(0, len(run_ids), CHUNK * 4):
        part = run_ids[start:start + CHUNK * 4]
        add(conn, scan(conn, select(runs.c.run_id).where(runs.c.run_id.in_(part))))
    return len(run_ids)


def ceil_hour(moment: datetime) -> datetime:
    """The first hour that starts at or after ``moment``."""
    hour = hour_of(moment)
    return hour if hour == moment else hour + timedelta(hours=1)


def answer(conn: Connection, where: RunFilter, *, rolled_up: bool = True, indexed: bool = True,
           parent_calls: bool = True) -> Rollup:
    """The rollup of the runs ``where`` picks: whole hours from the rollups, the rest from the log.

    Only a window of start times (``since``, ``until``) is keyed by the rollups: the runs started
    in its ragged first and last hours are read from the log, as are all the runs of any other
    filter, and of a store without rollups (``rolled_up`` False: one opened read-only at an older revision).
    """
    def picked(chosen: RunFilter) -> Rollup:
        query, _ = queries.matching(conn, select(runs.c.run_id), chosen, indexed, parent_calls)
        return rolled(scan(conn, query))

    since, until = _utc(where.since), _utc(where.until)
    if not rolled_up or replace(where, since=None, until=None) != RunFilter():
        return picked(where)
    first = None if since is None else ceil_hour(since)
    last = None if until is None else hour_of(until)
    if first is not None and last is not None and first >= last:  # within an hour or two: the log is quicker
        return picked(where)
    found = read(conn, first, last)
    if since is not None and first is not None and since < first:
        merged(found, picked(RunFilter(since=since, until=first)))
    if until is not None and last is not None and last < until:
        merged(found, picked(RunFilter(since=last, until=until)))
    return found


def _utc(moment: datetime | None) -> datetime | None:
    """``moment`` as an aware UTC time (naive means UTC)."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
