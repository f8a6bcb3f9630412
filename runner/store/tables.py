"""The log's tables, typed. Their names and columns are a supported interface.

The tables::

    runs           one row per run: the summary, updated as the run moves
    events         the append-only facts of a run, primary key (run_id, seq)
    run_labels     caller labels of a run (key, value), for the label filter
    run_tools      each tool name a run called, for the tool filter
    run_cancels    runs someone asked to cancel (a worker pool polls it)
    run_deletions  runs being pruned, only inside the pruning transaction (see ``prune``)
    rollups        per hour of the runs' start: counts, tokens, cost, latency histograms (``rollups``)
    rollup_minutes the same per minute

Both filter tables repeat the run's ``started_at``, so a filter walks its own index newest
first and stops after ``limit`` rows. JSON columns hold JSON text on every backend;
timestamps are UTC with microseconds. Only the Alembic migrations in ``migrations/``
create and change the schema; a test checks that these models and it agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite keeps naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: Dialect) -> Any:
        """On SQLite, turn a ``datetime`` into the text SQLAlchemy's ``DATETIME`` makes, in one step.

        The text always has six digits of microseconds. The recorder's own statements skip
        this: its clock gives that text already (``clock``).
        """
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        def to_text(value: datetime | None) -> str | None:
            if value is None:
                return None
            if value.tzinfo is UTC:  # drop the "+00:00" the text ends with
                return value.isoformat(" ", "microseconds")[:-6]
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return value.isoformat(" ", "microseconds")

        return to_text

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Run(Base):
    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    parent_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.run_id"), index=True)
    # A sub-agent's child run: the parent's call it serves (None for every other run, forks and follow-ups too).
    parent_call_id: Mapped[str | None] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(Text)
    system: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str | None] = mapped_column(String(200))
    agent_name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32))
    answer: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    steps: Mapped[int] = mapped_column(Integer)
    # 64 bits: a run's tokens pass 2**31 long before its cost does (SQLite's INTEGER is 64 bits already)
    tokens: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"))
    tool_calls: Mapped[int] = mapped_column(Integer)
    # What the model calls cost, as their model_called facts say: the known part, and how many are unknown.
    cost_known_usd: Mapped[float] = mapped_column(Float, server_default="0")
    costs_unknown: Mapped[int] = mapped_column(Integer, server_default="0")
    # The seq of the last event the stats' rollups count this run up to (``rollups``): its recorder adds a
    # second's facts at a time, and a read of the stats takes a running run's facts past it from its log.
    rolled: Mapped[int] = mapped_column(Integer, server_default="0")
    limits: Mapped[str] = mapped_column(Text)
    tool_specs: Mapped[str] = mapped_column(Text)
    trace_id: Mapped[str] = mapped_column(String(32))
    owner: Mapped[str | None] = mapped_column(String(300))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_runs_started_at", "started_at", "run_id"),
        Index("ix_runs_status_started_at", "status", "started_at", "run_id"),
    )


class Event(Base):
    __tablename__ = "events"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    step: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[str] = mapped_column(Text)
    span_id: Mapped[str | None] = mapped_column(String(16))


class RunLabel(Base):
    __tablename__ = "run_labels"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())  # the run's, so a label filter reads newest first

    __table_args__ = (Index("ix_run_labels_key_value_started_at", "key", "value", "started_at", "run_id"),)


class RunTool(Base):
    __tablename__ = "run_tools"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())  # the run's, so a tool filter reads newest first

    __table_args__ = (Index("ix_run_tools_name_started_at", "name", "started_at", "run_id"),)


class RunCancel(Base):
    """A request to cancel a run (``runner cancel``); the worker driving it polls for its row."""

    __tablename__ = "run_cancels"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime())
    requested_by: Mapped[str | None] = mapped_column(String(300))


class RunDeletion(Base):
    """A run being pruned: the events' DELETE guard lets its events go. Empty outside a prune."""

    __tablename__ = "run_deletions"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)


_COUNTER = BigInteger().with_variant(Integer(), "sqlite")


class _Rollup:
    """The columns of a rollup table: a period's start, the row's key, its figures (``runner._log.tally``)."""

    start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True)
    number: Mapped[int] = mapped_column(_COUNTER, server_default="0")
    errors: Mapped[int] = mapped_column(_COUNTER, server_default="0")
    tokens: Mapped[int] = mapped_column(_COUNTER, server_default="0")
    cost_nusd: Mapped[int] = mapped_column(_COUNTER, server_default="0")
    unknown: Mapped[int] = mapped_column(_COUNTER, server_default="0")
    micros: Mapped[int] = mapped_column(_COUNTER, server_default="0")


class Rollup(_Rollup, Base):
    """What the runs started in an hour add up to, by kind, name and latency bucket (``start``: the hour's).

    Kept in the transaction of the facts it counts: the recorder adds its rows, triggers on ``runs``
    keep the ``status`` rows, a prune takes its runs' share away.
    """

    __tablename__ = "rollups"


class RollupMinute(_Rollup, Base):
    """``rollups`` by minute (``start``: the minute's): a window's ragged hours are read from these."""

    __tablename__ = "rollup_minutes"


# The text search's index (``search``, migration 0006) is not modelled: on SQLite an FTS5 table (and
# FTS5's own tables) with its key table, kept by triggers; on PostgreSQL two GIN indexes of ``runs``.
TEXT_INDEX = frozenset({"run_search", "run_search_keys", "run_search_content", "run_search_data", "run_search_idx",
                        "run_search_config", "ix_runs_task_trgm", "ix_runs_answer_trgm"})


def modelled(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether a schema object is one these models describe (Alembic's ``include_name``): not the text index."""
    return name not in TEXT_INDEX


runs = Base.metadata.tables["runs"]
events = Base.metadata.tables["events"]
run_labels = Base.metadata.tables["run_labels"]
run_tools = Base.metadata.tables["run_tools"]
run_cancels = Base.metadata.tables["run_cancels"]
run_deletions = Base.metadata.tables["run_deletions"]
rollups = Base.metadata.tables["rollups"]
rollup_minutes = Base.metadata.tables["rollup_minutes"]
