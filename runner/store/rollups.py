"""The stats' rollups (``rollups`` by hour, ``rollup_minutes`` by minute): written with the facts they count.

A row holds what the runs started in one period add up to under a key (``tally.Key``). The
recorder adds its run's rows a second's worth at a time, in a commit of the facts, with
``runs.rolled``; triggers on ``runs`` keep the ``status`` rows; ``prune`` takes its runs' other
rows away. ``scan`` works the same figures out from the log. ``rolled_up`` reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple

from sqlalchemy import (
    Connection,
    Dialect,
    Engine,
    Insert,
    Select,
    Table,
    bindparam,
    delete,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from .._log import tally
from .._log.tally import FIELDS, Figures, Key, Tally
from ..errors import StoreError
from ..events import (
    KIND_OF,
    ModelCalled,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
    decode,
)
from .engine import one_line
from .rows import NAME_WIDTH, column, event_data
from .tables import UTCDateTime, events, rollup_minutes, rollups, runs

# The facts a tally reads, as the log names their kinds.
COUNTED: Final = tuple(KIND_OF[kind] for kind in (RunStarted, RunResumed, StepStarted, StepFinished, ModelCalled,
                                                  ToolStarted, ToolFinished))
_TIMED: Final[dict[str, type[StepStarted] | type[StepFinished]]] = {
    KIND_OF[StepStarted]: StepStarted, KIND_OF[StepFinished]: StepFinished}
CHUNK: Final = 500  # runs whose facts one statement reads
KEY: Final = ("start", "kind", "name", "bucket")


class Period(NamedTuple):
    """A rollup table, the unit its rows add runs up by (SQL's name for it), and how long one lasts."""

    table: Table
    unit: str
    length: timedelta


HOURS: Final = Period(rollups, "hour", timedelta(hours=1))
MINUTES: Final = Period(rollup_minutes, "minute", timedelta(minutes=1))
PERIODS: Final = (HOURS, MINUTES)


class MinuteRow(NamedTuple):
    """A rollup row of the runs started in one minute: the minute, a key, the figures."""

    minute: datetime
    key: Key
    figures: Figures


def start_sql(dialect: str, column_sql: str, period: Period) -> str:
    """SQL for the start of the period a timestamp column falls in, as the period's ``start`` keeps it."""
    if dialect == "sqlite":  # 'YYYY-MM-DD HH:MM:SS.ffffff' (``tables.UTCDateTime``)
        return (f"substr({column_sql}, 1, 13) || ':00:00.000000'" if period is HOURS
                else f"substr({column_sql}, 1, 16) || ':00.000000'")
    return f"date_trunc('{period.unit}', {column_sql}, 'UTC')"


def floor_to(moment: datetime, length: timedelta) -> datetime:
    """The start of the hour or minute ``moment`` falls in."""
    if length == HOURS.length:
        return moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(second=0, microsecond=0)


def ceil_to(moment: datetime, length: timedelta) -> datetime:
    """The first hour or minute that starts at or after ``moment``."""
    start = floor_to(moment, length)
    return start if start == moment else start + length


def day_sql(dialect: str, column_sql: str) -> str:
    """SQL for the UTC date of an hour column, as ISO text."""
    if dialect == "sqlite":
        return f"substr({column_sql}, 1, 10)"
    return f"to_char({column_sql} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


def stored(key: Key) -> Key:
    """``key`` as its row keeps it: the name cut to the column's width."""
    return Key(key.kind, column(key.name, NAME_WIDTH), key.bucket)


def _adding(dialect: Dialect, table: Table, query: Select[Any] | None = None) -> Insert:
    """An insert of ``table``'s rows (from ``query``, else given) that adds their figures to rows that exist."""
    insert = postgresql.insert(table) if dialect.name == "postgresql" else sqlite.insert(table)
    if query is not None:
        insert = insert.from_select([*KEY, *FIELDS], query)
    added = {name: table.c[name] + insert.excluded[name] for name in FIELDS}
    return insert.on_conflict_do_update(index_elements=[table.c[name] for name in KEY], set_=added)


def upsert(dialect: Dialect, period: Period) -> Insert:
    """The recorder's statement: a run's row (``run_id``, kind, name, bucket, figures) added to its period's.

    The period is the run's ``started_at``'s, read in the same statement (a queued run's start
    moves it, earlier in the same transaction).
    """
    start = literal_column(start_sql(dialect.name, "runs.started_at", period), UTCDateTime())
    values = [bindparam(name, type_=rollups.c[name].type) for name in ("kind", "name", "bucket", *FIELDS)]
    query = select(start, *values).where(runs.c.run_id == bindparam("run_id"))
    return _adding(dialect, period.table, query)


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


def add(conn: Connection, rows: Sequence[MinuteRow], sign: int = 1) -> None:
    """Add ``rows`` (``sign`` -1: take them away) to the rollups of both periods, in key order."""
    for period in PERIODS:
        summed: dict[tuple[datetime, Key], list[int]] = {}
        for row in rows:
            into = summed.setdefault((floor_to(row.minute, period.length), stored(row.key)), [0] * len(FIELDS))
            for i, value in enumerate(row.figures):
                into[i] += sign * value
        params = [{"start": start, **key._asdict(), **dict(zip(FIELDS, figures, strict=True))}
                  for (start, key), figures in sorted(summed.items())]
        if params:
            conn.execute(_adding(conn.dialect, period.table), params)


def scan(conn: Connection, run_ids: Select[Any], *, statuses: bool = True) -> list[MinuteRow]:
    """The rollup rows of the runs ``run_ids`` selects, worked out from their rows and their facts.

    ``statuses``: with the ``status`` rows (the triggers keep those; a prune leaves them to its delete).
    """
    found: dict[tuple[datetime, Key], list[int]] = {}

    def put(minute: datetime, rows: Mapping[Key, Sequence[int]]) -> None:
        for key, figures in rows.items():
            key = stored(key)
            row = found.get((minute, key))
            if row is None:
                found[(minute, key)] = list(figures)
            else:
                for i, value in enumerate(figures):
                    row[i] += value

    minutes: dict[str, datetime] = {}
    for run_id, status, started_at in conn.execute(
            select(runs.c.run_id, runs.c.status, runs.c.started_at)
            .where(runs.c.run_id.in_(run_ids.scalar_subquery()))):
        minute = minutes[run_id] = floor_to(started_at, MINUTES.length)
        if statuses:
            put(minute, {Key(tally.STATUS, str(status)): list(Figures(number=1))})
    for run_id, facts in _facts(conn, sorted(minutes)):
        run = Tally()
        for _, at, fact in facts:
            run.feed(fact, at)
        put(minutes[run_id], run.take())
    return [MinuteRow(minute, key, Figures(*figures)) for (minute, key), figures in found.items()]


def _facts(conn: Connection, run_ids: list[str]) -> Iterator[tuple[str, list[tuple[int, datetime, Any]]]]:
    """Each run's counted facts in log order, with seqs and the times they were logged, ``CHUNK`` runs a read."""
    for start in range(0, len(run_ids), CHUNK):
        part = run_ids[start:start + CHUNK]
        current: str | None = None
        facts: list[tuple[int, datetime, Any]] = []
        for run_id, seq, kind, at, step, data in conn.execute(
                select(events.c.run_id, events.c.seq, events.c.kind, events.c.at, events.c.step, events.c.data)
                .where(events.c.run_id.in_(part), events.c.kind.in_(COUNTED))
                .order_by(events.c.run_id, events.c.seq)).all():
            if run_id != current:
                if current is not None:
                    yield current, facts
                current, facts = run_id, []
            timed = _TIMED.get(kind)  # a step's start or end: its row's columns say all a tally needs
            facts.append((seq, at, timed(step=step) if timed is not None
                          else decode(kind, event_data(run_id, seq, data), step, run_id)))
        if current is not None:
            yield current, facts


def unrolled(engine: Engine, run_id: str) -> dict[Key, list[int]]:
    """Run ``run_id``'s share of the rollups past ``runs.rolled``: what its last recorder logged and never added."""
    try:
        with engine.connect() as conn:
            return past(conn, run_id, conn.execute(select(runs.c.rolled).where(runs.c.run_id == run_id)).scalar())
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read run {run_id} to resume it: {one_line(exc)}") from None


def past(conn: Connection, run_id: str, rolled: int | None) -> dict[Key, list[int]]:
    """Run ``run_id``'s rollup rows from its facts past ``rolled`` (each fact counted as a whole log counts it).

    Keyed as the tables keep them (``stored``), like every other row read or scanned.
    """
    run = Tally()
    counted = False
    for _, facts in _facts(conn, [run_id]):
        for seq, at, fact in facts:
            if not counted and seq > (rolled or 0):
                run.take()  # what the rollups hold already
                counted = True
            run.feed(fact, at)
    found: dict[Key, list[int]] = {}
    for key, row in run.take().items() if counted else ():
        into = found.setdefault(stored(key), [0] * len(FIELDS))  # two names may render alike
        for i, value in enumerate(row):
            into[i] += value
    return found


def refill(conn: Connection) -> int:
    """Work every rollup out again from the runs and their logs; how many runs were read.

    The migration that adds the rollups fills them this way; so can a store whose rows were
    copied in bulk (``bench/ui_store.py``).
    """
    for period in PERIODS:
        conn.execute(delete(period.table))
    run_ids = [str(run_id) for run_id in conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars()]
    for start in range(0, len(run_ids), CHUNK * 4):
        part = run_ids[start:start + CHUNK * 4]
        add(conn, scan(conn, select(runs.c.run_id).where(runs.c.run_id.in_(part))))
    last = select(func.coalesce(func.max(events.c.seq), 0)).where(events.c.run_id == runs.c.run_id)
    conn.execute(update(runs).values(rolled=last.scalar_subquery()))
    return len(run_ids)
