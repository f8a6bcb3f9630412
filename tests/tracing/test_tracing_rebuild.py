"""Spans rebuilt from a stored log match the live ones: ids, names, attributes, parents.

``FakeLog`` logs each fact the way the store does (through the same codec, with the
span ids of the same keys), so rebuilding is pinned here independently of the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from runner import Limits, ScriptedModel, Status, StoredEvent, StoredRun, ToolRegistry, events
from runner._loop.core import AgentCore
from runner._loop.sync import run_core
from runner._run.opening import new_run_opening
from runner.recorder import FanoutRecorder
from runner.tracing import TracingRecorder, derived_span_id, export_run, rebuild_spans
from tests.tracing.helpers import RUN_ID, SCENARIOS, ids_of, registry, tree, weather


@dataclass
class Event:
    seq: int
    at: datetime
    step: int | None
    kind: str
    data: dict[str, Any]
    span_id: str | None


@dataclass
class Run:
    run_id: str
    status: str = "running"
    error: str | None = None
    task: str = ""
    model: str | None = None
    provider: str | None = None
    agent_name: str | None = None
    trace_id: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    events: list[Event] = field(default_factory=list)


def stored(run: Run) -> StoredRun:
    """The fake log as the store returns a run: frozen values, its facts decoded through the codec."""
    logged = [StoredEvent(e.seq, e.at, e.step or 0, e.kind, e.data, e.span_id) for e in run.events]
    at = logged[0].at if logged else datetime.now(UTC)
    return StoredRun(run_id=run.run_id, status=Status(run.status), answer=None, error=run.error, task=run.task,
                     system="", model=run.model or "", provider=run.provider, agent_name=run.agent_name, steps=0,
                     tokens=0, tool_calls=0, limits={}, tool_specs=[], labels={}, trace_id=run.trace_id or "",
                     parent_run_id=None, started_at=at, updated_at=at, finished_at=run.finished_at, owner=None,
                     heartbeat_at=None, events=logged, facts=tuple(events.decode_all(logged, run.run_id)))


class FakeLog:
    """Logs facts through the event codec as the store does, span ids asked for by key at sync."""

    def __init__(self, tracing: TracingRecorder) -> None:
        self.tracing = tracing
        self.run = Run("")
        self.pending: list[tuple[str, dict[str, Any], int, str]] = []

    def record(self, event: events.Event) -> None:
        if isinstance(event, events.ModelCallStarted):
            return
        if isinstance(event, events.RunStarted):
            if self.tracing.service_name:  # as the store logs it
                event = replace(event, service_name=self.tracing.service_name)
            self.run = Run(event.run_id, task=event.task, model=event.model, provider=event.provider,
                           agent_name=event.agent_name)
        elif isinstance(event, events.RunFinished):
            self.run.status, self.run.error = event.status, event.error
        kind, data = events.encode(event)
        self.pending.append((kind, data, event.step, events.span_key(event)))

    def sync(self) -> None:
        self.run.trace_id = self.tracing.trace_id
        for kind, data, step, key in self.pending:
            self.run.events.append(Event(len(self.run.events) + 1, datetime.now(UTC), step, kind, data,
                                         self.tracing.span_id_for(key)))
        self.pending = []


def logged_run(provider: Any, model: Any, *, reg: ToolRegistry | None = None, record_content: bool = False,
               **limits: Any) -> Run:
    tracing = TracingRecorder(provider, record_content=record_content, run_id=RUN_ID)
    log = FakeLog(tracing)
    reg = reg or registry()
    lim = Limits(**limits)
    core = AgentCore(model, reg, run_id=RUN_ID, limits=lim, recorder=FanoutRecorder([tracing, log]),
                     opening=new_run_opening(RUN_ID, "Weather in Paris?", "Be brief.", lim, reg, model,
                                             agent_name="forecaster"))
    run_core(core)
    return log.run


@pytest.mark.parametrize("record_content", [False, True], ids=["plain", "content"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_rebuilt_spans_equal_the_live_ones(live: tuple[TracerProvider, InMemorySpanExporter], scenario: str,
                                           record_content: bool) -> None:
    provider, exporter = live
    spec = dict(SCENARIOS[scenario])
    model = spec.pop("model")()
    reg = spec.pop("reg", registry)()
    run = logged_run(provider, model, reg=reg, record_content=record_content, **spec)
    live_spans = exporter.get_finished_spans()
    rebuilt = rebuild_spans(stored(run), record_content=record_content)
    assert tree(rebuilt) == tree(live_spans)
    assert ids_of(rebuilt) == ids_of(live_spans)

    def full(spans: Any) -> dict[str, Any]:
        return {format(s.context.span_id, "016x"): (s.kind, s.status.status_code, s.status.description,
                                                     dict(s.attributes or {})) for s in spans}

    assert full(rebuilt) == full(live_spans)
    assert all(e.span_id for e in run.events)
    assert run.trace_id == format(live_spans[0].context.trace_id, "032x")


def test_rebuilt_times_come_from_the_log(live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, _ = live
    run = logged_run(provider, ScriptedModel([weather("c1", "Paris"), "21C"]))
    t0 = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    for event in run.events:
        event.at = t0 + timedelta(seconds=event.seq)
        if event.kind == "model_call":
            event.data["latency_s"] = 0.25
    spans = {s.name + str((s.attributes or {}).get("runner.step")): s for s in rebuild_spans(stored(run))}
    base = 1_893_553_445_678_901_000  # t0 in ns
    by_kind = {e.kind + str(e.step): e.seq for e in run.events}
    root, chat1, tool1 = spans["invoke_agent forecaster0"], spans["chat scripted1"], spans["execute_tool get_weather1"]
    assert root.start_time == base + by_kind["run_started0"] * 10**9
    assert root.end_time == base + by_kind["run_finished2"] * 10**9
    assert chat1.end_time == base + by_kind["model_call1"] * 10**9
    assert chat1.start_time == chat1.end_time - 250_000_000
    assert tool1.start_time == base + by_kind["tool_started1"] * 10**9
    assert tool1.end_time == base + by_kind["tool_finished1"] * 10**9


def test_a_run_traced_by_nothing_rebuilds_with_ids_derived_from_the_run_id() -> None:
    run = logged_run(NoOpTracerProvider(), ScriptedModel([weather("c1", "Paris"), "21C"]))
    assert run.trace_id == RUN_ID
    spans = rebuild_spans(stored(run))
    assert {(s.name, format(s.context.span_id, "016x")) for s in spans if s.context} == {
        ("invoke_agent forecaster", derived_span_id(RUN_ID, "run")),
        ("step 1", derived_span_id(RUN_ID, "step:1")), ("step 2", derived_span_id(RUN_ID, "step:2")),
        ("chat scripted", derived_span_id(RUN_ID, "chat:1")), ("chat scripted", derived_span_id(RUN_ID, "chat:2")),
        ("execute_tool get_weather", derived_span_id(RUN_ID, "tool:c1")),
    }
    assert {s.context.trace_id for s in spans if s.context} == {int(RUN_ID, 16)}


def test_events_without_span_ids_fall_back_to_derived_ids() -> None:
    run = logged_run(NoOpTracerProvider(), ScriptedModel(["hi"]))
    for event in run.events:
        event.span_id = None
    run.trace_id = None
    assert ids_of(rebuild_spans(stored(run))) == ids_of(rebuild_spans(stored(logged_run(
        NoOpTracerProvider(), ScriptedModel(["hi"])))))


def test_exporting_twice_sends_the_same_spans(live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, _ = live
    run = logged_run(provider, ScriptedModel([weather("c1", "Paris"), "21C"]))
    sink = InMemorySpanExporter()
    resource = Resource.create({"service.name": "replayer"})
    assert export_run(stored(run), sink, resource=resource) == SpanExportResult.SUCCESS
    first = list(sink.get_finished_spans())
    sink.clear()
    export_run(stored(run), sink, resource=resource)
    second = list(sink.get_finished_spans())
    assert [s.to_json() for s in first] == [s.to_json() for s in second]
    assert first[0].resource.attributes["service.name"] == "replayer"
    assert first[0].instrumentation_scope is not None
    assert first[0].instrumentation_scope.name == "runner"


def test_an_unfinished_run_ends_its_open_spans_at_the_last_event(
        live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, _ = live
    run = logged_run(provider, ScriptedModel([weather("c1", "Paris"), "21C"]))
    cut = next(e.seq for e in run.events if e.kind == "tool_finished")
    run.events = [e for e in run.events if e.seq < cut]  # killed while the tool ran
    spans: list[ReadableSpan] = rebuild_spans(stored(run))
    assert [s.name for s in spans] == ["invoke_agent forecaster", "step 1", "chat scripted",
                                       "execute_tool get_weather"]
    last = max(e.at for e in run.events)
    tool = spans[-1]
    assert tool.end_time == (last - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    assert "runner.status" not in (spans[0].attributes or {})
