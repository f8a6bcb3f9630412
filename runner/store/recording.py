"""``StoreRecorder``: the loop's facts, committed to ``events`` before the loop acts.

Events are buffered and committed in one transaction before the model is called, before a
tool runs, and when the run finishes: a step costs one commit, plus one per tool. The
``runs`` row comes with the first commit and its summary is updated in each later one.
Runs hold no connection: the store's one writer (``GroupCommitter``) commits for them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Dialect, Engine, bindparam, func
from sqlalchemy.sql.dml import UpdateBase

from .._log.ids import derived_span_id, derived_trace_id
from .._log.state import RunState
from .._log.statuses import Status
from .._log.tally import Tally
from ..errors import StoreError
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
    encode,
    span_key,
)
from . import rollups
from .clock import clock_for
from .group import Batch, GroupCommitter
from .lease import Heartbeat
from .owner import owner_id
from .pg_bulk import CopyInsert
from .prepared import Prepared
from .rows import NAME_WIDTH, column, dumps, insert_new, label_rows, labels_upsert, run_row
from .tables import events, run_tools, runs

if TYPE_CHECKING:
    import asyncio

# Told, after each commit of a run, who asked for the run to be cancelled (None: nobody yet).
CancelSeen = Callable[[str | None], None]


class SpanSource(Protocol):
    """What the tracing recorder offers: the run's trace id and each span key's span id.

    A source may also have a ``service_name`` (the ``service.name`` the live spans
    went out under, None when nothing recorded them), a ``parent_span_id`` (the span the
    root went under: the caller's, or a sub-agent's call) and a ``linked_span`` (a fork's
    link): all are logged with ``run_started``, so spans rebuilt later are the live ones. Its ``settle``
    (``settle_after`` a commit's future, async) is called once the run's close committed, on the run's thread.
    """

    trace_id: str

    def span_id_for(self, key: str) -> str | None: ...


# Told the facts of each commit as they were logged: (time as the store keeps it, span id, fact), in order.
OnCommit = Callable[[list[tuple[Any, str, Event]]], None]


class StoreRecorder:
    """Records one run into the store's tables. Use a fresh recorder per run (or per resume).

    It folds the facts it records into its own ``RunState`` (the summary columns are the loop's
    figures). ``resume`` is the state a stored run's facts fold into: its log continues after them.
    ``loop_state`` is the loop's own state, advanced before each fact is recorded: read instead of
    folding every fact twice. ``cancel_seen`` is told, after each commit, what the commit's
    transaction read of the run's cancel request.
    """

    def __init__(self, engine: Engine, span_source: SpanSource | None = None, resume: RunState | None = None,
                 trace_id: str | None = None, heartbeat: Heartbeat | None = None,
                 committer: GroupCommitter | None = None, loop_state: RunState | None = None,
                 cancel_seen: CancelSeen | None = None, on_commit: OnCommit | None = None) -> None:
        self.engine = engine
        self.cancel_seen = cancel_seen
        self.on_commit = on_commit
        self.heartbeat = heartbeat
        self.span_source = span_source
        self._folds = loop_state is None
        self.state = loop_state if loop_state is not None else resume.copy() if resume is not None else RunState()
        self.run_id = self.state.run_id
        self.trace_id = trace_id or ""
        self._seq = self.state.events
        # A run queued for a worker pool (``runner.pool``) has its row and a ``run_queued``
        # fact, and no ``run_started`` yet: its start fills that row in instead of inserting one.
        self._queued = resume is not None and resume.started is None
        # Each fact as its ``events`` row in column order (EVENT_COLUMNS), then its span key and the fact.
        self._pending: list[tuple[Any, ...]] = []
        self._new_run: dict[str, Any] | None = None
        self._labels: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._tool_names: set[str] = set()  # as the facts name them
        self._tool_columns: set[str] = set()  # as ``run_tools`` holds them
        self._span_ids: dict[str, str] = {}
        # The observation of each call this recorder logged finished: its tool message refers to it (``encode``).
        self._observations: dict[str, str] = {}
        # The run's share of the stats' rollups, added in a commit of the facts it counts (``_batch``).
        self._tally = Tally(self.state.model, self.state.started_calls)
        self._counts = self._tally.counters()
        self._step_began: tuple[int, datetime | str] | None = None  # the open step's number and start, to time it
        self._ran = self.state.tool_calls  # the run's tool calls that ran, as counted so far (``Tally.ran``)
        self._rolled = 0  # the seq of the last fact added (``runs.rolled``); and when
        self._rolled_at: float | None = None  # (None: add at the next commit)
        self._names: dict[str, str] = {}  # each tool and model name as the rollups' column keeps it
        self._now = clock_for(engine.dialect.name)  # timestamps as the store keeps them (text on SQLite)
        self._started_at = self._now()
        self._summary: dict[str, Any] = {"status": Status.RUNNING, "answer": None, "error": None, "finished_at": None}
        # Whether the next commit must write the whole summary (status, answer, error, finished_at
        # changed): otherwise it writes the progress columns only, which leaves the status index alone.
        self._summary_changed = resume is not None
        self._closing = False
        self._committer = committer if committer is not None else GroupCommitter(
            engine, lambda: statements(engine.dialect))
        self._inflight: Batch | None = None
        self._unsent: tuple[dict[str, Any] | None, list[tuple[Any, ...]]] = (None, [])

    # -- the Recorder protocol -------------------------------------------------

    def record(self, event: Event) -> None:
        kind = type(event)
        if kind not in _PLAIN_FACTS:  # the transient fact, or one that changes the run's row
            if kind is ModelCallStarted:
                return
            if kind is RunFinished:
                if self._closing:  # a retry after a failed commit: the close is buffered already
                    return
                self._closing = True
        if self._folds:
            self.state.apply(event)
        now = self._now()
        if kind is ToolStarted or kind is ToolFinished:
            assert isinstance(event, (ToolStarted, ToolFinished))
            if event.name not in self._tool_names:
                self._used(event.name)  # refused calls count too: "which runs tried the tool we removed?"
        elif kind not in _PLAIN_FACTS:
            event = self._run_changed(event, now)
        if kind is ToolFinished:
            assert isinstance(event, ToolFinished)
            self._observations[event.call_id] = event.observation
        counts = self._counts.get(kind)
        if counts is not None:
            counts(event, None)
        elif kind is StepStarted:
            self._step_began = (event.step, now)
        elif kind is StepFinished and self._step_began is not None and self._step_began[0] == event.step:
            began = self._step_began[1]
            self._tally.took(began if isinstance(began, datetime) else datetime.fromisoformat(began),
                             now if isinstance(now, datetime) else datetime.fromisoformat(now))
            self._step_began = None
        code, data = encode(event, self._observations)
        self._seq += 1
        self._pending.append((self.run_id, self._seq, now, event.step, code, dumps(data),
                              span_key(event, self.state.segment), event))

    def _run_changed(self, event: Event, now: datetime | str) -> Event:
        """A fact that starts, ends or resumes the run: its row changes too. The fact as logged."""
        if isinstance(event, RunStarted):
            return self._run_started(event, now)
        if isinstance(event, RunFinished):
            self._summary.update(status=event.status, answer=column(event.answer), error=column(event.error),
                                 finished_at=now)
            self._summary_changed = True
            if self.heartbeat is not None:
                self.heartbeat.discard(self.run_id)
        elif isinstance(event, RunResumed):
            self.run_id = event.run_id
            self._tally.give_back(rollups.unrolled(self.engine, self.run_id))  # what its last recorder never added
            self._step_began = None  # a new part: a step is timed within one
            self._closing = False
            self._summary.update(status=Status.RUNNING, answer=None, error=None, finished_at=None)
            self._summary_changed = True
            if self.heartbeat is not None:
                self.heartbeat.add(self.run_id)
        return event

    def sync(self) -> None:
        self.flush()

    def _run_started(self, run: RunStarted, now: datetime | str) -> RunStarted:
        """Prepare the run's row; the fact as logged (with the live service name and parent span, if any)."""
        self.run_id = self.state.run_id
        if self.span_source is not None:
            self.trace_id = self.span_source.trace_id
        elif not self.trace_id:
            self.trace_id = derived_trace_id(self.run_id)
        self._new_run = run_row(self.run_id, run, self.trace_id, owner_id(), now)
        self._ran = 0  # a new row counts from none
        self._started_at = now
        if self.heartbeat is not None:
            self.heartbeat.add(self.run_id)
        self._labels = label_rows(self.run_id, run.labels, now)
        service = getattr(self.span_source, "service_name", None)
        if service and not run.service_name:
            run = replace(run, service_name=service)
        parent = getattr(self.span_source, "parent_span_id", None)
        if parent and not run.parent_span_id:
            run = replace(run, parent_span_id=parent)
        linked = getattr(self.span_source, "linked_span", None)
        return replace(run, linked_span=linked) if linked and not run.linked_span else run

    def _span_id(self, key: str) -> str:
        if self.span_source is not None:
            found = self.span_source.span_id_for(key)
            if found is not None:
                return found
        span_id = self._span_ids.get(key)
        if span_id is None:
            span_id = self._span_ids[key] = derived_span_id(self.run_id, key)
        return span_id

    # -- buffering and commits ---------------------------------------------------

    def _used(self, name: str) -> None:
        """Buffer the ``run_tools`` row of a tool name this run has not named yet.

        Two long names that render to the same column text are one row.
        """
        self._tool_names.add(name)
        key = column(name, NAME_WIDTH)
        if key not in self._tool_columns:
            self._tool_columns.add(key)
            self._tools.append({"run_id": self.run_id, "name": key, "started_at": self._started_at})

    def flush(self) -> None:
        """Commit the buffered events and the run's summary (with other runs' rows, if any wait).

        The store's ``GroupCommitter`` carries them: alone, this thread commits them at
        once; with other runs writing, one transaction carries all their rows. Returns
        once a commit holding these rows is done; on failure the rows stay buffered,
        so the next flush retries them (the run's events stay contiguous).
        """
        self._settle_inflight()
        batch = self._batch()
        try:
            self._committer.commit(batch)
        except StoreError:
            self._restore(batch)
            self._let_go_if_closing()
            raise
        if self._closing and (settle := getattr(self.span_source, "settle", None)) is not None:
            settle()  # the run's spans, waited for here: never in the commit, which other runs' rows may share

    def sync_later(self) -> list[asyncio.Future[None]]:
        """Hand the buffered rows to the store's writer thread; the future completes once they are committed.

        This is ``sync`` without blocking, for an event loop's thread; the async driver awaits the future.
        """
        self._settle_inflight()
        batch = self._inflight = self._batch()
        future = self._committer.submit(batch)
        settle = getattr(self.span_source, "settle_after", None) if self._closing else None
        return [future if settle is None else settle(future)]

    def _settle_inflight(self) -> None:
        """Wait for the batch handed to the writer thread; put its rows back if it failed."""
        batch, self._inflight = self._inflight, None
        if batch is not None:
            self._committer.wait(batch)
            if batch.error is not None:
                self._restore(batch)
                self._let_go_if_closing()

    def _let_go_if_closing(self) -> None:
        """Let go of the run when a commit failed with its close buffered.

        The loop is done with the run, so this process lets go of it (``lease.Heartbeat.let_go``)
        rather than leave it running as its own. Should the close's retry commit after all,
        the run is finished and nothing is released.
        """
        if self._closing and self.heartbeat is not None:
            self.heartbeat.let_go(self.run_id, owner_id())

    def _batch(self) -> Batch:
        """The buffered rows as one batch (the buffers start empty again)."""
        now = self._now()
        state = self.state
        full = self._summary_changed or self._queued
        added: list[tuple[Any, ...]] = []
        clock = time.monotonic()
        if full or self._new_run is not None or self._rolled_at is None or clock - self._rolled_at >= ROLL_EVERY_S:
            self._tally.ran(state.tool_calls - self._ran)
            self._ran = state.tool_calls
            added = rollups.recorded(self.run_id, self._tally.take(), self._names)
            self._rolled, self._rolled_at = self._seq, clock
        progress = {"steps": state.steps, "tokens": state.spent, "tool_calls": state.tool_calls,
                    "cost_known_usd": state.cost_usd, "costs_unknown": state.costs_unknown,
                    "updated_at": now, "heartbeat_at": now, "rolled": self._rolled}  # PROGRESS_COLUMNS
        rows = []
        ids: dict[str, str] = {}  # a step's facts share a few spans: each span's id looked up once
        handing: list[tuple[Any, str, Event]] | None = [] if self.on_commit is not None else None
        for run_id, seq, at, step, code, data, key, event in self._pending:
            span_id = ids.get(key)
            if span_id is None:
                span_id = ids[key] = self._span_id(key)
            rows.append((run_id, seq, at, step, code, data, span_id))
            if handing is not None:
                handing.append((at, span_id, event))
        new_run = update = None
        if self._new_run is not None:
            new_run = dict(self._new_run, **self._summary, **progress, _run_id=self.run_id)
        elif full:
            update = dict(self._summary, **progress, _run_id=self.run_id, _owner=owner_id())
        else:
            update = dict(progress, _run_id=self.run_id, _owner=owner_id())  # the progress columns only
        batch = Batch(self.run_id, new_run, self._labels, update, rows, self._tools, queued=self._queued,
                      full_update=full, cancel_seen=self.cancel_seen, rollups=added,
                      committed=partial(self.on_commit, handing) if self.on_commit is not None and handing else None)
        self._summary_changed = False
        self._unsent = (self._new_run, self._pending)
        self._new_run = None
        self._labels, self._pending, self._tools = [], [], []
        return batch

    def _restore(self, batch: Batch) -> None:
        """Buffer a failed batch's rows again, ahead of anything recorded since."""
        new_run, pending = self._unsent
        self._new_run = new_run
        self._summary_changed = self._summary_changed or batch.full_update
        self._labels = batch.labels + self._labels
        self._pending = pending + self._pending
        self._tools = batch.tools + self._tools
        self._tally.give_back(rollups.figures_of(batch.rollups))
        self._rolled_at = None  # the next commit adds them, before it moves ``runs.rolled`` past them


# Facts that leave the run's row as it is: only its log and progress columns change.
_PLAIN_FACTS: frozenset[type] = frozenset({StepStarted, StepFinished, MessageAppended, ModelCalled, ToolStarted,
                                           ToolFinished, ApprovalRequested, ApprovalDecided, CancelRequested,
                                           ModelDelta})
# How often a running run's rollups are added to at most: each addition costs a step about a tenth.
ROLL_EVERY_S = 1.0
_STATEMENTS: dict[str, dict[str, Prepared]] = {}
SUMMARY_COLUMNS = ("status", "answer", "error", "steps", "tokens", "tool_calls", "cost_known_usd", "costs_unknown",
                   "updated_at", "heartbeat_at", "finished_at", "rolled")
EVENT_COLUMNS = ("run_id", "seq", "at", "step", "kind", "data", "span_id")
PROGRESS_COLUMNS = ("steps", "tokens", "tool_calls", "cost_known_usd", "costs_unknown", "updated_at", "heartbeat_at",
                    "rolled")
# Every timestamp parameter of the recorder's statements (the columns' names are their parameters' names).
_TIMESTAMPS = ("at", "started_at", "updated_at", "heartbeat_at", "finished_at")


def statements(dialect: Dialect) -> dict[str, Prepared]:
    """The recorder's statements, compiled once per dialect."""
    key = f"{dialect.name}+{dialect.driver}"
    found = _STATEMENTS.get(key)
    if found is None:
        copy = dialect.name == "postgresql" and dialect.driver == "psycopg"  # see pg_bulk
        # On SQLite every timestamp the recorder writes is its clock's text already (``clock``).
        rendered = _TIMESTAMPS if dialect.name == "sqlite" else ()

        # On PostgreSQL the heartbeat is the server's clock (see ``lease``): the row's own value is not sent.
        server_clock = dialect.name == "postgresql"

        def prepared(statement: UpdateBase) -> Prepared:
            return Prepared(statement, dialect, rendered)

        def values(names: Iterable[str]) -> dict[str, Any]:
            return {name: func.now() if server_clock and name == "heartbeat_at"
                    else bindparam(name, type_=runs.c[name].type) for name in names}

        def update(columns: tuple[str, ...]) -> Prepared:
            """A summary update fenced by the owner: it matches only while this process owns the run."""
            return prepared(runs.update().where(runs.c.run_id == bindparam("_run_id"),
                                                runs.c.owner == bindparam("_owner")).values(values(columns)))
        found = _STATEMENTS[key] = {
            "runs": prepared(runs.insert().values(values(c.name for c in runs.c))),
            "run_labels": prepared(labels_upsert(dialect)),
            "events": CopyInsert(events, dialect) if copy else prepared(events.insert()),
            "run_tools": prepared(insert_new(run_tools, dialect)),
            "rollups": prepared(rollups.upsert(dialect, rollups.HOURS)),
            "rollup_minutes": prepared(rollups.upsert(dialect, rollups.MINUTES)),
            "update_run": update(SUMMARY_COLUMNS), "update_progress": update(PROGRESS_COLUMNS),
            "start_queued": prepared(runs.update().where(runs.c.run_id == bindparam("_run_id")).values(
                values(c.name for c in runs.c if c.name != "run_id")))}
        assert tuple(found["events"].names) == EVENT_COLUMNS  # the order the recorder builds its rows in
        assert tuple(found["rollups"].names) == tuple(found["rollup_minutes"].names) == rollups.PARAMETERS
    return found
