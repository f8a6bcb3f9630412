"""``StoreRecorder``: the loop's facts, committed to ``events`` before the loop acts.

Events are buffered and committed in one transaction at the three points where
the loop is about to act or stop: ``model_call_started`` (before the model is
called), ``tool_started`` (before the tool function runs) and ``run_finished``.
The ``runs`` row is inserted with the first commit and its summary updated in
every later one, so a step costs one commit plus one per tool that runs. A
connection is taken from the pool for each commit and handed straight back: a
run never holds one while the model or a tool works, so any number of runs (50
coroutines in one event loop, or many threads) can share one engine's pool.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, overload

from sqlalchemy import Dialect, Engine, bindparam
from sqlalchemy.exc import SQLAlchemyError

from ..errors import StoreError
from ..ids import derived_span_id, derived_trace_id
from ..limits import RUNNING
from ..messages import Message, ToolCall
from ..recorder import ModelCallInfo, RunInfo, ToolCallInfo, describe_reply
from ..text import storable
from .engine import one_line
from .owner import owner_id
from .prepared import Prepared
from .tables import events, run_labels, run_tools, runs

if TYPE_CHECKING:
    from ..core import AgentResult


_encode = json.JSONEncoder(separators=(",", ":"), default=repr).encode


class SpanSource(Protocol):
    """What the tracing recorder offers: the run's trace id and the latest fact's span id.

    A source may also have a ``service_name`` (the ``service.name`` the live spans
    went out under, None when nothing recorded them); it is logged with
    ``run_started`` so spans rebuilt later go out under the same name.
    """

    trace_id: str

    def span_id(self) -> str | None: ...


def dumps(value: Any) -> str:
    return _encode(value)


@overload
def column(text: str, width: int | None = None) -> str: ...
@overload
def column(text: None, width: int | None = None) -> None: ...
def column(text: str | None, width: int | None = None) -> str | None:
    """A summary column's rendering of ``text``: ``storable`` (U+FFFD for a lone surrogate
    or NUL), cut to the column's ``width``. The event log keeps the exact text."""
    shown = storable(text)
    return shown if shown is None or width is None else shown[:width]


class StoreRecorder:
    """Records one run into the store's tables. Use a fresh recorder per run."""

    def __init__(self, engine: Engine, span_source: SpanSource | None = None) -> None:
        self.engine = engine
        self.span_source = span_source
        self.run_id = ""
        self.trace_id = ""
        self._seq = 0
        self._step = 0
        self._pending: list[dict[str, Any]] = []
        self._new_run: dict[str, Any] | None = None
        self._labels: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._tool_names: set[str] = set()
        self._span_ids: dict[str, str] = {}
        self._started_at = datetime.now(UTC)
        self._summary: dict[str, Any] = {"status": RUNNING, "answer": None, "error": None, "steps": 0,
                                         "tokens": 0, "tool_calls": 0, "finished_at": None}
        self._closing = False
        self._sql = statements(engine.dialect)
        self._begin = "BEGIN IMMEDIATE" if engine.dialect.name == "sqlite" else ""

    # -- the Recorder protocol -------------------------------------------------

    def run_started(self, run: RunInfo) -> None:
        self.run_id = run.run_id
        if self.span_source is not None:
            self.trace_id = self.span_source.trace_id
        else:
            self.trace_id = derived_trace_id(run.run_id)
        now = datetime.now(UTC)
        limits, specs = run.limits.to_dict(), list(run.tool_specs)
        self._new_run = {
            "run_id": run.run_id, "parent_run_id": run.parent_run_id, "task": column(run.task),
            "system": column(run.system), "model": column(run.model_name, NAME_WIDTH),
            "provider": column(run.provider_name, NAME_WIDTH), "agent_name": column(run.agent_name, NAME_WIDTH),
            "status": RUNNING, "answer": None, "error": None,
            "steps": 0, "tokens": 0, "tool_calls": 0, "limits": dumps(limits),
            "tool_specs": dumps(specs), "trace_id": self.trace_id, "owner": owner_id(),
            "started_at": now, "updated_at": now, "heartbeat_at": now, "finished_at": None,
        }
        labels = dict(run.labels)
        self._started_at = now
        rendered = {column(k, NAME_WIDTH): column(v) for k, v in reversed(labels.items())}  # first of a clash wins
        self._labels = [{"run_id": run.run_id, "key": k, "value": v, "started_at": now}
                        for k, v in reversed(rendered.items())]
        started: dict[str, Any] = {
            "task": run.task, "system": run.system, "limits": limits, "tool_specs": specs,
            "model": run.model_name, "provider": run.provider_name, "agent_name": run.agent_name,
            "labels": labels,
        }
        service = getattr(self.span_source, "service_name", None)
        if service:
            started["service_name"] = service
        self._event("run_started", "run", started, at=now)

    def message_appended(self, index: int, message: Message, step: int) -> None:
        self._step = step
        if message["role"] == "assistant":
            key = f"chat:{step}"
        elif message["role"] == "tool":
            key = f"tool:{message['tool_call_id']}"
        else:
            key = "run"
        self._event("message", key, {"index": index, "message": message})

    def step_started(self, step: int) -> None:
        self._step = step
        self._summary["steps"] = step
        self._event("step_started", f"step:{step}", {"step": step})

    def model_call_started(self, step: int, prompt_tokens: int) -> None:
        self.flush()

    def model_call_finished(self, info: ModelCallInfo) -> None:
        reply = info.reply
        usage = None if reply is None or reply.usage is None else {
            "input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens}
        if reply is not None:
            spent = info.prompt_tokens + info.reply_tokens if usage is None else \
                usage["input_tokens"] + usage["output_tokens"]
            self._summary["tokens"] += spent
        self._event("model_call", f"chat:{info.step}", {
            "step": info.step, "prompt_tokens": info.prompt_tokens, "reply_tokens": info.reply_tokens,
            "usage": usage, "latency_s": info.latency_s,
            "reply": None if reply is None else describe_reply(reply),
            "error": info.error, "error_type": info.error_type,
        })

    def tool_started(self, step: int, call: ToolCall) -> None:
        self._summary["tool_calls"] += 1
        self._used(call.name)
        self._event("tool_started", f"tool:{call.id}", {"call_id": call.id, "name": call.name, "args": call.args})
        self.flush()

    def tool_finished(self, info: ToolCallInfo) -> None:
        call = info.call
        self._used(call.name)  # refused calls count too: "which runs tried the tool we removed?"
        self._event("tool_finished", f"tool:{call.id}", {
            "call_id": call.id, "name": call.name, "observation": info.observation, "ok": info.ok,
            "duration_s": info.duration_s, "ran": info.ran,
        })

    def step_finished(self, step: int) -> None:
        self._event("step_finished", f"step:{step}", {"step": step})

    def run_finished(self, result: AgentResult) -> None:
        if self._closing:  # a retry after a failed commit: the close is buffered, commit it
            self.flush()
            return
        self._closing = True
        self._step = result.steps
        self._event("run_finished", "run", {
            "status": result.status, "answer": result.answer, "steps": result.steps,
            "tokens": result.tokens, "tool_calls": result.tool_calls, "error": result.error,
        })
        now = datetime.now(UTC)
        self._summary.update(status=result.status, answer=column(result.answer), error=column(result.error),
                             steps=result.steps, tokens=result.tokens, tool_calls=result.tool_calls,
                             finished_at=now)
        self.flush()

    # -- buffering and commits ---------------------------------------------------

    def _used(self, name: str) -> None:
        key = column(name, NAME_WIDTH)  # two long names that share the column's width are one row
        if key not in self._tool_names:
            self._tool_names.add(key)
            self._tools.append({"run_id": self.run_id, "name": key, "started_at": self._started_at})

    def _event(self, kind: str, key: str, data: dict[str, Any], at: datetime | None = None) -> None:
        """Buffer one event. ``key`` names its span when there is no span source."""
        source = self.span_source
        if source is not None:
            span_id = source.span_id()
        else:
            span_id = self._span_ids.get(key)
            if span_id is None:
                span_id = self._span_ids[key] = derived_span_id(self.run_id, key)
        self._seq += 1
        self._pending.append({
            "run_id": self.run_id, "seq": self._seq, "at": at or datetime.now(UTC),
            "step": self._step, "kind": kind, "data": dumps(data), "span_id": span_id,
        })

    def flush(self) -> None:
        """Commit the buffered events and the run's summary in one transaction.

        This runs twice a step, so it talks to the pooled driver connection
        directly (no Connection wrapper, no execution events): on SQLite it takes
        the write lock up front with ``BEGIN IMMEDIATE``; PostgreSQL's driver opens
        its transaction on the first statement.
        """
        now = datetime.now(UTC)
        sql = self._sql
        try:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                try:
                    if self._begin:
                        cursor.execute(self._begin)
                    if self._new_run is not None:
                        sql["runs"].run(cursor, [dict(self._new_run, **self._summary, updated_at=now,
                                                      heartbeat_at=now)])
                        sql["run_labels"].run(cursor, self._labels)
                    else:
                        sql["update_run"].run(cursor, [dict(self._summary, _run_id=self.run_id, updated_at=now,
                                                            heartbeat_at=now)])
                    sql["events"].run(cursor, self._pending)
                    sql["run_tools"].run(cursor, self._tools)
                    raw.commit()
                except BaseException:
                    raw.rollback()
                    raise
                finally:
                    cursor.close()
            finally:
                raw.close()  # back to the pool: a run holds no connection between commits
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
            raise StoreError(f"cannot write run {self.run_id} to the store: {one_line(exc)}") from None
        self._new_run = None
        self._labels, self._pending, self._tools = [], [], []


_STATEMENTS: dict[str, dict[str, Prepared]] = {}
# The width of the name columns (runs.model, provider, agent_name; run_labels.key; run_tools.name).
NAME_WIDTH = 200
SUMMARY_COLUMNS = ("status", "answer", "error", "steps", "tokens", "tool_calls", "updated_at", "heartbeat_at",
                   "finished_at")


def statements(dialect: Dialect) -> dict[str, Prepared]:
    """The recorder's statements, compiled once per dialect."""
    found = _STATEMENTS.get(dialect.name)
    if found is None:
        update = runs.update().where(runs.c.run_id == bindparam("_run_id")).values(
            {name: bindparam(name, type_=runs.c[name].type) for name in SUMMARY_COLUMNS})
        found = _STATEMENTS[dialect.name] = {
            "runs": Prepared(runs.insert(), dialect), "run_labels": Prepared(run_labels.insert(), dialect),
            "events": Prepared(events.insert(), dialect), "run_tools": Prepared(run_tools.insert(), dialect),
            "update_run": Prepared(update, dialect)}
    return found
