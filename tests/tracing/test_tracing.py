"""Live spans: the tree a run leaves on an injected TracerProvider, normalised."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, NoOpTracerProvider, Span

from runner import Limits, ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, run_agent
from runner._loop.core import AgentCore
from runner._loop.sync import run_core
from runner._run.opening import new_run_opening
from runner.events import (
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    RunStarted,
    StepFinished,
    StepStarted,
    span_key,
)
from runner.recorder import FanoutRecorder
from runner.tracing import TracingRecorder, derived_span_id, live
from tests.tracing.helpers import RUN, RUN_ID, chat, chat_model, registry, step, tool, tree, weather


@pytest.fixture
def spans(live: tuple[TracerProvider, InMemorySpanExporter]) -> tuple[TracerProvider, InMemorySpanExporter]:
    """``live`` (tests/conftest.py): an injected provider and its exporter, under the name used here."""
    return live


def test_happy_path_tree(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([weather("c1", "Paris"), ModelReply("21C", usage=Usage(100, 7))])
    result = run_agent("Weather in Paris?", model, registry(), tracer_provider=provider, run_id=RUN_ID)
    assert result.status == "done"
    got = exporter.get_finished_spans()
    assert tree(got) == [
        ["invoke_agent", "UNSET", {**RUN, "runner.status": "done"}, [
            ["step 1", "UNSET", step(1), [
                ["chat scripted", "UNSET", chat(1, 115, 29, "tool_call"), []],
                ["execute_tool get_weather", "UNSET", tool(1, "get_weather", "c1"), []],
            ]],
            ["step 2", "UNSET", step(2), [
                ["chat scripted", "UNSET", chat(2, 100, 7, "stop", estimated=False), []],
            ]],
        ]],
    ]
    assert {s.attributes["gen_ai.conversation.id"] for s in got if s.attributes} == {RUN_ID}
    assert {s.attributes["runner.run_id"] for s in got if s.attributes} == {RUN_ID}
    assert [(s.attributes or {}).get("session.id") for s in got if s.parent is None] == [RUN_ID]
    assert len({s.context.trace_id for s in got if s.context}) == 1
    assert all("gen_ai.usage.input_tokens" not in (s.attributes or {}) for s in got if s.name != "chat scripted")


def test_tool_error_marks_the_tool_span(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([weather("c1", "Atlantis"), "sorry"])
    run_agent("Weather in Atlantis?", model, registry(), tracer_provider=provider)
    (root,) = tree(exporter.get_finished_spans())
    step1 = root[3][0]
    assert step1[3][1] == ["execute_tool get_weather",
                           "ERROR: KeyError",
                           tool(1, "get_weather", "c1", error="KeyError"), []]
    assert root[1] == "UNSET"


def test_unknown_and_invalid_calls_get_spans_that_did_not_run(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([
        ModelReply("", [ToolCall("u1", "get_forecast", {}), ToolCall("b1", "get_weather", {"town": "Paris"})]),
        "done"])
    run_agent("Forecast?", model, registry(), tracer_provider=provider)
    (root,) = tree(exporter.get_finished_spans())
    unknown, invalid = root[3][0][3][1:]
    assert unknown[:3] == ["execute_tool get_forecast",
                           "ERROR: unknown_tool",
                           tool(1, "get_forecast", "u1", ran=False, error="unknown_tool")]
    assert invalid[0] == "execute_tool get_weather"
    assert invalid[2] == tool(1, "get_weather", "b1", ran=False, error="invalid_arguments")


def test_timeout_and_repeat_classes() -> None:
    from runner.tracing.classify import tool_error_type

    assert tool_error_type("slow", "ERROR: slow timed out after 0.05 s", True) == "timeout"
    assert tool_error_type("f", "ERROR: f failed: some text", True) == "tool_error"
    assert tool_error_type("f", "ERROR: deadline", True) == "deadline"
    assert tool_error_type("f", "ERROR: f returned a value that is not JSON-serialisable: x", True) == "invalid_result"
    assert tool_error_type("f", "ERROR: f was already called 2 times in a row with these", False) == "repeated_call"
    assert tool_error_type("f", "ERROR: the call to f was denied by the approver; x", False) == "denied"


def test_a_step_limit_is_named_on_the_root_and_is_not_an_error(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([weather("c1", "Paris"), weather("c2", "Paris")])
    result = run_agent("Loop", model, registry(), max_steps=2, tracer_provider=provider, agent_name="looper")
    assert result.status == "step_limit"
    (root,) = tree(exporter.get_finished_spans())
    assert root[:3] == ["invoke_agent looper", "UNSET",  # a stop the run may be resumed from
                        {**RUN, "gen_ai.agent.name": "looper", "agent.name": "looper", "runner.status": "step_limit",
                         "output.value": "stopped: step_limit (a resume continues the run)",
                         "output.mime_type": "text/plain"}]
    assert [step[0] for step in root[3]] == ["step 1", "step 2"]
    assert all(c[1] == "UNSET" for step in root[3] for c in step[3])


def test_model_error_marks_chat_and_root(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans

    def broken(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down")

    result = run_agent("Hi", broken, registry(), tracer_provider=provider)
    assert result.status == "model_error"
    (root,) = tree(exporter.get_finished_spans())
    assert root[1] == "ERROR: model_error"
    assert root[2]["error.type"] == "model_error"
    assert root[3] == [["step 1", "UNSET", step(1), [
        ["chat broken", "ERROR: ConnectionError",
         {"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat", "runner.step": 1,
          **chat_model("broken"), "error.type": "ConnectionError"}, []]]]]


def test_deadline_while_a_tool_runs_ends_every_span(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([ModelReply("", [ToolCall("s1", "slow", {"seconds": 0.3})])])
    reg = ToolRegistry()
    reg.register("slow", "Sleeps.", {"type": "object", "properties": {"seconds": {"type": "number"}}},
                 lambda seconds: time.sleep(seconds))
    result = run_agent("Wait", model, reg, timeout_s=0.05, tracer_provider=provider)
    assert result.status == "deadline"
    (root,) = tree(exporter.get_finished_spans())
    assert root[3][0][3][1][:2] == ["execute_tool slow", "ERROR: deadline"]
    assert root[3][0][3][1][2]["error.type"] == "deadline"
    assert len(exporter.get_finished_spans()) == 4


def test_content_only_when_opted_in(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    script: list[ModelReply | str] = [weather("c1", "Paris"), "21C"]
    run_agent("Weather in Paris?", ScriptedModel(script), registry(), tracer_provider=provider)
    keys = {k for s in exporter.get_finished_spans() for k in (s.attributes or {})}
    assert not {k for k in keys if "messages" in k or "arguments" in k or "result" in k}
    exporter.clear()
    run_agent("Weather in Paris?", ScriptedModel(script), registry(), system="Be brief.",
              tracer_provider=provider, record_content=True)
    by_name = {(s.name, (s.attributes or {}).get("runner.step")): s.attributes or {}
               for s in exporter.get_finished_spans()}
    first = by_name[("chat scripted", 1)]
    assert json.loads(str(first["gen_ai.input.messages"])) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    assert json.loads(str(first["gen_ai.output.messages"])) == [
        {"role": "assistant", "finish_reason": "tool_call",
         "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]}]
    second = json.loads(str(by_name[("chat scripted", 2)]["gen_ai.input.messages"]))
    assert second[-1] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                                     "response": '{"celsius": 21}'}]}
    tool_attrs = by_name[("execute_tool get_weather", 1)]
    assert tool_attrs["gen_ai.tool.call.arguments"] == '{"city": "Paris"}'
    assert tool_attrs["gen_ai.tool.call.result"] == '{"celsius": 21}'


class FactLog:
    """A stand-in for the store: each fact with its span key, resolved to span ids afterwards."""

    def __init__(self, tracing: TracingRecorder) -> None:
        self.tracing = tracing
        self.facts: list[tuple[str, str]] = []

    def record(self, event: Event) -> None:
        label = type(event).__name__
        if isinstance(event, MessageAppended):
            label = f"message {event.message['role']}"
        self.facts.append((label, span_key(event)))

    def sync(self) -> None:
        pass

    @property
    def seen(self) -> list[tuple[str, str | None]]:
        return [(label, self.tracing.span_id_for(key)) for label, key in self.facts]


def _span_ids_per_fact(provider: Any) -> tuple[TracingRecorder, list[tuple[str, str | None]]]:
    tracing = TracingRecorder(provider, run_id=RUN_ID)
    log = FactLog(tracing)
    model = ScriptedModel([weather("c1", "Paris"), "21C"])
    fan = FanoutRecorder([log, tracing])  # any order: span ids are asked for by key
    reg = registry()
    run_core(AgentCore(model, reg, run_id=RUN_ID, limits=Limits(), recorder=fan,
                    opening=new_run_opening(RUN_ID, "Weather?", "s", Limits(), reg, model)))
    return tracing, log.seen


def test_each_fact_reports_the_span_it_belongs_to(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracing, seen = _span_ids_per_fact(provider)
    hexes = {(s.name, (s.attributes or {}).get("runner.step")): format(s.context.span_id, "016x")
             for s in exporter.get_finished_spans() if s.context}
    run, step1, chat1 = hexes[("invoke_agent", 0)], hexes[("step 1", 1)], hexes[("chat scripted", 1)]
    tool1, step2, chat2 = hexes[("execute_tool get_weather", 1)], hexes[("step 2", 2)], hexes[("chat scripted", 2)]
    assert seen == [
        ("RunStarted", run), ("message system", run), ("message user", run),
        ("StepStarted", step1), ("ModelCallStarted", chat1), ("message assistant", chat1),
        ("ModelCalled", chat1), ("ToolStarted", tool1), ("ToolFinished", tool1), ("message tool", tool1),
        ("StepFinished", step1),
        ("StepStarted", step2), ("ModelCallStarted", chat2), ("message assistant", chat2),
        ("ModelCalled", chat2), ("StepFinished", step2), ("RunFinished", run),
    ]
    (root,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert root.context is not None
    assert tracing.trace_id == format(root.context.trace_id, "032x")


@pytest.mark.parametrize("provider", [None, NoOpTracerProvider()], ids=["global-proxy", "noop"])
def test_without_an_sdk_ids_are_derived_from_the_run_id(provider: Any) -> None:
    tracing, seen = _span_ids_per_fact(provider)
    assert tracing.trace_id == RUN_ID

    def d(key: str) -> str:
        return derived_span_id(RUN_ID, key)

    assert seen == [
        ("RunStarted", d("run")), ("message system", d("run")), ("message user", d("run")),
        ("StepStarted", d("step:1")), ("ModelCallStarted", d("chat:1")), ("message assistant", d("chat:1")),
        ("ModelCalled", d("chat:1")), ("ToolStarted", d("tool:c1")), ("ToolFinished", d("tool:c1")),
        ("message tool", d("tool:c1")), ("StepFinished", d("step:1")),
        ("StepStarted", d("step:2")), ("ModelCallStarted", d("chat:2")), ("message assistant", d("chat:2")),
        ("ModelCalled", d("chat:2")), ("StepFinished", d("step:2")), ("RunFinished", d("run")),
    ]
    assert d("run") == hashlib.sha256(f"{RUN_ID}:run".encode()).hexdigest()[:16]


def test_the_no_op_path_does_no_work_per_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing recording, the facts after the root make no span and no span key: the work, counted."""
    spans: list[str] = []
    keys: list[str] = []
    start_span = NoOpTracer.start_span

    def counted_span(tracer: NoOpTracer, name: str, *args: Any, **kwargs: Any) -> Span:
        spans.append(name)
        return start_span(tracer, name, *args, **kwargs)

    def counted_key(event: Event, segment: int = 0) -> str:
        keys.append(type(event).__name__)
        return span_key(event, segment)

    monkeypatch.setattr(NoOpTracer, "start_span", counted_span)
    monkeypatch.setattr(live, "span_key", counted_key)
    tracing = TracingRecorder(NoOpTracerProvider(), run_id=RUN_ID)
    tracing.record(RunStarted(run_id=RUN_ID, task="t", system="s", limits={}, tool_specs=[], model="m"))
    for i in range(1, 2001):
        tracing.record(StepStarted(step=i))
        tracing.record(ModelCallStarted(step=i, prompt_tokens=10))
        tracing.record(ModelCalled(step=i, prompt_tokens=10, reply_tokens=1, reply=ModelReply("x")))
        tracing.record(StepFinished(step=i))
    assert (spans, keys, tracing.idle) == ([], ["RunStarted"], True)  # not even a root: no SDK, no span
    assert tracing.span_id_for("step:7") == derived_span_id(RUN_ID, "step:7")  # derived when asked for


def test_an_invalid_reply_marks_the_chat_span(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    model = ScriptedModel([ModelReply("", [ToolCall("same", "get_weather", {"city": "Paris"}),
                                           ToolCall("same", "get_weather", {"city": "Paris"})])])
    result = run_agent("Twice", model, registry(), tracer_provider=provider)
    assert result.status == "invalid_reply"
    (root,) = tree(exporter.get_finished_spans())
    chat_span = root[3][0][3][0]
    assert chat_span[:2] == ["chat scripted", "ERROR: invalid_reply"]
    assert chat_span[2]["error.type"] == "invalid_reply"
    assert root[2]["error.type"] == "invalid_reply"


def test_a_run_inside_a_caller_span_joins_its_trace_and_leaves_its_context_alone(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("request") as request:
        run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), tracer_provider=provider)
        assert trace.get_current_span() is request
    got = {s.name: s for s in exporter.get_finished_spans()}
    root, outer = got["invoke_agent"], got["request"]
    assert root.parent is not None
    assert outer.context is not None
    assert root.parent.span_id == outer.context.span_id
    assert {s.context.trace_id for s in got.values() if s.context} == {outer.context.trace_id}


def test_concurrent_runs_on_threads_keep_separate_trees(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    ids = [f"{i:032x}" for i in range(1, 9)]

    def one(run_id: str) -> None:
        run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), tracer_provider=provider,
                  run_id=run_id)

    threads = [threading.Thread(target=one, args=(run_id,)) for run_id in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_run: dict[Any, list[ReadableSpan]] = {}
    for s in exporter.get_finished_spans():
        by_run.setdefault((s.attributes or {})["runner.run_id"], []).append(s)
    assert sorted(by_run) == ids
    shapes = [tree(group) for group in by_run.values()]
    assert all(shape == shapes[0] for shape in shapes)
    assert len(shapes[0]) == 1  # one root per run: no span leaked into another run's tree


def test_the_tracing_surface_is_exactly_these_names() -> None:
    import runner.tracing

    assert runner.tracing.__all__ == [
        "TracingRecorder", "TracingSetupError", "configure_tracing", "derived_span_id", "derived_trace_id",
        "export_run", "otlp_exporter", "rebuild_spans"]


@pytest.mark.process
def test_a_plain_run_does_not_load_the_otel_sdk() -> None:
    """Without a store or a tracer, a run consults only the OpenTelemetry API's global provider."""
    code = ("import sys, runner\n"
            "print('opentelemetry' in sys.modules)\n"
            "result = runner.run_agent('Hi', runner.ScriptedModel(['hello']), runner.ToolRegistry())\n"
            "print(result.status, 'opentelemetry.sdk' in sys.modules, 'sqlalchemy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "done", "False", "False"]
