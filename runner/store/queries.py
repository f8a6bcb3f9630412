"""The store's read queries, each on a connection inside ``RunStore.reading()``.

Runs are walked newest first on the most selective index at hand; run ids are
matched by indexed range scans on ``runs.run_id`` (a ``LIKE`` prefix match cannot
use the index on SQLite), so lookups stay fast on a store of any size. Facts come
back decoded by the event codec, never as payload keys.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar, cast

from sqlalchemy import ColumnElement, Connection, FromClause, Select, exists, func, literal, select
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import JSON

from .._log.codec import fold_in
from .._log.records import RunSummary, StoredEvent, StoredRun, logged_text, summary_fields
from .._log.statuses import Liveness
from ..events import (
    KIND_OF,
    Event,
    EventDecodeError,
    MessageAppended,
    ModelCalled,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    decode,
    decode_all,
)
from . import owner, search
from .clock import database_clock
from .filters import RunFilter
from .rows import NAME_WIDTH, column, event_data
from .tables import events, run_labels, run_tools, runs

# The ``runs`` columns later revisions added, with the revision that did.
LATER_COLUMNS: Final = (("0005", ("cost_known_usd", "costs_unknown")), ("0007", ("parent_call_id",)))
AMBIGUOUS_SHOWN: Final = 5  # run ids an ambiguous prefix's error names before "and N more"
BATCH: Final = 500  # run ids per IN (...) list, well under SQLite's limit on bound parameters
RUN_STARTED: Final = KIND_OF[RunStarted]
TOOL_FINISHED: Final = KIND_OF[ToolFinished]
TIMED: Final = (KIND_OF[StepStarted], KIND_OF[StepFinished], TOOL_FINISHED)
MODEL_CALL: Final = KIND_OF[ModelCalled]
RUN_RESUMED: Final = KIND_OF[RunResumed]

_T = TypeVar("_T")


class Prefixed(NamedTuple):
    """The run ids a prefix matches, in order (at most ``AMBIGUOUS_SHOWN``), and how many more do."""

    found: list[str]
    more: int


def _stored(value: _T, width: int | None = None) -> _T:
    """A filter value as the summary columns store it; anything not a string is left to the database."""
    return cast(_T, column(value, width)) if isinstance(value, str) else value


def check_page(limit: int, offset: int) -> None:
    """``ValueError`` unless ``limit`` and ``offset`` are non-negative integers."""
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def matching(conn: Connection, query: Select[Any], where: RunFilter,
             indexed: bool = True, parent_calls: bool = True) -> tuple[Select[Any], FromClause]:
    """``query`` (a select from ``runs``) narrowed by ``where``, and the table it walks.

    A text search first asks the text index which runs may match (``search``), on ``conn``,
    when the store has one (``indexed``: at revision 0006 or later). ``top`` keeps the runs with no
    ``parent_call_id``, when the store has the column (``parent_calls``: 0007 or later; before, every run).
    """
    # Filters match the columns' rendering of what was recorded (``rows.column``).
    pairs = [(_stored(key, NAME_WIDTH), _stored(value)) for key, value in where.labels.items()]
    tool, text = _stored(where.tool, NAME_WIDTH), _stored(where.text)
    since, until = where.since, where.until
    among = search.candidates(conn, text) if text is not None and indexed else None
    # The newest-first walk runs on the most selective index at hand: a tool's or a
    # label's own (name/key, started_at) index when filtering on one, else the runs'.
    # Unless few runs may hold the text searched: then those drive, each read by its key.
    driver: FromClause = runs
    conditions: list[ColumnElement[bool]] = []
    if among is not None:
        query = query.select_from(search.driving(among, runs.c.run_id))
        if tool is not None:
            conditions.append(exists().where(run_tools.c.run_id == runs.c.run_id, run_tools.c.name == tool))
    elif tool is not None:
        driver = run_tools.alias("driver")
        conditions = [driver.c.name == tool]
    elif pairs:
        key, value = pairs.pop(0)
        driver = run_labels.alias("driver")
        conditions = [driver.c.key == key, driver.c.value == value]
    if driver is not runs:
        query = query.select_from(driver.join(runs, runs.c.run_id == driver.c.run_id))
    query = query.where(*conditions)
    if where.status is not None:
        # Written into the SQL, not bound: PostgreSQL's generic plan for a prepared ``status IN ($1)``
        # guesses a sixth of the runs match and scans them all (psycopg prepares on a statement's 5th use).
        query = query.where(runs.c.status.in_([literal(str(s), literal_execute=True) for s in where.status]))
    if where.top and parent_calls:
        query = query.where(runs.c.parent_call_id.is_(None))
    if since is not None:
        query = query.where(driver.c.started_at >= since)
    if until is not None:
        query = query.where(driver.c.started_at < until)
    if text is not None:
        query = query.where(search.like(text, conn.dialect.name))
    for key, value in pairs:
        query = query.where(exists().where(
            run_labels.c.run_id == runs.c.run_id, run_labels.c.key == key, run_labels.c.value == value))
    return query, driver


def summaries(conn: Connection, query: Select[Any]) -> list[RunSummary]:
    """The runs ``query`` (a select of whole ``runs`` rows) finds, with their labels.

    Each row becomes a plain dict first: a ``RowMapping``'s lookups cost a page of 200 runs some ms.
    """
    found = conn.execute(query)
    names = list(found.keys())
    rows = [dict(zip(names, row, strict=True)) for row in found]
    labels = labels_of(conn, [row["run_id"] for row in rows])
    return [RunSummary(**summary_fields(row, labels.get(row["run_id"], {}), json.loads), judged=judged(row))
            for row in rows]


def judged(row: Mapping[Any, Any]) -> Liveness:
    """How the run of a ``runs`` row stands as it is read, its owner's process looked at where it can be."""
    return owner.judge(row["status"], row["owner"], row["heartbeat_at"], row.get("read_at"), run_id=row["run_id"])


def labels_of(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    if not run_ids:
        return found
    rows = conn.execute(select(run_labels.c.run_id, run_labels.c.key, run_labels.c.value)
                        .where(run_labels.c.run_id.in_(run_ids)).order_by(run_labels.c.key))
    for run_id, key, value in rows:
        found.setdefault(run_id, {})[key] = value
    return found


def run_columns(revision: str | None) -> tuple[Any, ...]:
    """The ``runs`` columns a store at ``revision`` has (None: the latest); the others keep their defaults.

    A read-only store is read at the revision it is at; the cost columns came with 0005, ``parent_call_id`` with 0007.
    """
    missing = {name for since, names in LATER_COLUMNS for name in names if revision is not None and revision < since}
    return tuple(column for column in runs.c if column.name not in missing)


def has_parent_calls(revision: str | None) -> bool:
    """Whether a store at ``revision`` (None: the latest) knows its sub-agents' child runs (0007)."""
    return revision is None or revision >= "0007"


def text_indexed(revision: str | None) -> bool:
    """Whether a store at ``revision`` (None: the latest) has the text index (0006)."""
    return revision is None or revision >= "0006"


def read_run(conn: Connection, run_id: str, columns: tuple[Any, ...] | None = None) -> StoredRun | None:
    """Run ``run_id`` with its log, decoded once; None when there is no such run."""
    row = conn.execute(select(*(columns or runs.c), *database_clock(conn.dialect.name))
                       .where(runs.c.run_id == run_id)).mappings().first()
    if row is None:
        return None
    labels = labels_of(conn, [run_id]).get(run_id, {})
    rows = conn.execute(select(events.c.seq, events.c.at, events.c.step, events.c.kind, events.c.data,
                               events.c.span_id).where(events.c.run_id == run_id).order_by(events.c.seq)).all()
    stored = logged_rows(run_id, rows)
    facts = tuple(decode_all(stored, run_id))
    messages = [fact.message for fact in facts if isinstance(fact, MessageAppended)]
    fields = summary_fields(row, labels, json.loads) | logged_text(facts)
    return StoredRun(**fields, events=stored, messages=messages, facts=facts, judged=judged(row))


def logged_rows(run_id: str, rows: Iterable[Sequence[Any]],
                observations: dict[str, str] | None = None) -> list[StoredEvent]:
    """A run's ``events`` rows as it logged them: a tool message stored as a reference gets its content back.

    ``observations``: the calls' observations logged before these rows (and it learns theirs).
    """
    observations = {} if observations is None else observations
    stored = []
    for seq, at, step, kind, data, span_id in rows:
        try:
            folded = fold_in(kind, event_data(run_id, seq, data), observations)
        except EventDecodeError as exc:
            raise EventDecodeError(f"run {run_id} event {seq}: {exc}") from None
        stored.append(StoredEvent(seq, at, step, kind, folded, span_id))
    return stored


def facts_after(conn: Connection, run_id: str, seq: int) -> list[Event]:
    """The facts of run ``run_id`` logged after its event ``seq``, in order."""
    rows = conn.execute(select(events.c.seq, events.c.at, events.c.step, events.c.kind, events.c.data,
                               events.c.span_id).where(events.c.run_id == run_id, events.c.seq > seq)
                        .order_by(events.c.seq)).all()
    return decode_all(logged_rows(run_id, rows), run_id)


def prefixed(conn: Connection, prefix: str) -> Prefixed:
    """The run with exactly the id ``prefix``, else the runs whose id starts with it."""
    if conn.execute(select(runs.c.run_id).where(runs.c.run_id == prefix)).first() is not None:
        return Prefixed([prefix], 0)
    matches = [runs.c.run_id >= prefix, runs.c.run_id.startswith(prefix, autoescape=True)]
    if prefix[-1] != chr(sys.maxunicode):  # else no string is past every match: the range stays open
        matches.append(runs.c.run_id < prefix[:-1] + chr(ord(prefix[-1]) + 1))
    query = select(runs.c.run_id).where(*matches).order_by(runs.c.run_id).limit(AMBIGUOUS_SHOWN + 1)
    found = [str(run_id) for run_id in conn.execute(query).scalars()]
    more = 0
    if len(found) > AMBIGUOUS_SHOWN:
        found.pop()
        more = int(conn.execute(select(func.count()).select_from(runs).where(*matches)).scalar_one()) - len(found)
    return Prefixed(found, more)


def refused_calls(conn: Connection, run_ids: list[str]) -> dict[str, int]:
    """Count, per run, the ``tool_finished`` facts with ``ran`` false.

    SQLite and PostgreSQL count with their JSON functions; another backend's events are read here.
    """
    found: dict[str, int] = dict.fromkeys(run_ids, 0)
    dialect = conn.dialect.name
    refused: ColumnElement[bool] | None = None
    if dialect == "sqlite":
        refused = func.json_extract(events.c.data, "$.ran") == 0
    elif dialect == "postgresql":  # json, not jsonb: jsonb refuses the \u0000 a logged text may hold
        refused = sql_cast(events.c.data, JSON)["ran"].astext == "false"
    for start in range(0, len(run_ids), BATCH):
        chunk = run_ids[start:start + BATCH]
        if refused is None:
            query = select(events.c.run_id, events.c.seq, events.c.step, events.c.data).where(
                events.c.run_id.in_(chunk), events.c.kind == TOOL_FINISHED)
            for run_id, seq, step, data in conn.execute(query):
                fact = decode(TOOL_FINISHED, event_data(run_id, seq, data), step, run_id)
                found[run_id] += isinstance(fact, ToolFinished) and not fact.ran
        else:
            counted = select(events.c.run_id, func.count()).where(
                events.c.run_id.in_(chunk), events.c.kind == TOOL_FINISHED, refused).group_by(events.c.run_id)
            for run_id, count in conn.execute(counted):
                found[run_id] = count
    return found


def run_starts(conn: Connection, run_ids: list[str]) -> dict[str, RunStarted]:
    """The ``run_started`` fact of each of ``run_ids`` that has one (a queued run has none yet)."""
    found: dict[str, RunStarted] = {}
    for start in range(0, len(run_ids), BATCH):
        query = select(events.c.run_id, events.c.seq, events.c.step, events.c.data).where(
            events.c.run_id.in_(run_ids[start:start + BATCH]), events.c.kind == RUN_STARTED)
        for run_id, seq, step, data in conn.execute(query):
            fact = decode(RUN_STARTED, event_data(run_id, seq, data), step, run_id)
            if isinstance(fact, RunStarted):
                found[run_id] = fact
    return found
