"""OTLP export for real: an OTLP/HTTP receiver on 127.0.0.1 decodes what the exporter sends.

A live run's spans and the spans rebuilt from its stored log must arrive with
the same trace id, span ids, names, parents and attributes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, RunStore, ScriptedModel, ToolCall, run_agent
from runner.tracing import TracingSetupError, configure_tracing, export_run, otlp_exporter
from tests.cli.helpers import invoke
from tests.tracing.helpers import Receiver, registry, weather


def test_live_and_rebuilt_spans_arrive_at_a_real_otlp_receiver(receiver: Receiver, store: RunStore) -> None:
    provider = configure_tracing("ignored-when-env-names-one")
    try:
        model = ScriptedModel([
            ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"}), ToolCall("u1", "nope", {})]),
            "21C"])
        result = run_agent("Weather in Paris?", model, registry(), store=store, tracer_provider=provider,
                           agent_name="forecaster")
        assert provider.force_flush()
        live = receiver.spans()
        assert receiver.paths[0] == "/v1/traces"
        assert set(receiver.paths) == {"/v1/traces"}
        assert sorted(s["name"] for s in live) == [
            "chat scripted", "chat scripted", "execute_tool get_weather", "execute_tool nope",
            "invoke_agent forecaster", "step 1", "step 2"]
        assert {s["service"] for s in live} == {"otlp-test"}

        stored = store.get_run(result.run_id)
        (trace_id,) = {s["trace_id"] for s in live}
        assert stored.trace_id == trace_id
        span_ids = {s["span_id"] for s in live}
        assert all(e.span_id in span_ids for e in stored.events)
        assert {e.span_id for e in stored.events} == span_ids

        receiver.requests.clear()
        exporter = otlp_exporter()
        try:
            export_run(stored, exporter)
            rebuilt = receiver.spans()
            export_run(stored, exporter)
            again = receiver.spans()[len(rebuilt):]
        finally:
            exporter.shutdown()

        def key(s: dict[str, Any]) -> tuple[Any, ...]:
            return (s["trace_id"], s["span_id"], s["parent"], s["name"], s["kind"], s["status"], s["scope"],
                    s["service"], sorted(s["attrs"].items(), key=lambda kv: kv[0]))

        assert sorted(map(key, rebuilt)) == sorted(map(key, live))
        assert sorted(map(key, again)) == sorted(map(key, live))
    finally:
        provider.shutdown()


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
def test_openinference_kinds_text_and_project_arrive_at_a_real_otlp_receiver(
        receiver: Receiver, store: RunStore, content: bool) -> None:
    provider = configure_tracing()
    try:
        model = ScriptedModel([weather("c1", "Paris"), "21C"])
        result = run_agent("Weather in Paris?", model, registry(), store=store, tracer_provider=provider,
                           record_content=content)
        assert provider.force_flush()
        live = receiver.spans()
    finally:
        provider.shutdown()
    receiver.requests.clear()
    exporter = otlp_exporter()
    try:
        export_run(store.get_run(result.run_id), exporter, record_content=content)
    finally:
        exporter.shutdown()
    rebuilt = receiver.spans()
    text_keys = ("input.value", "output.value")
    for spans in (live, rebuilt):
        assert sorted((s["name"], s["attrs"]["openinference.span.kind"]) for s in spans) == [
            ("chat scripted", "LLM"), ("chat scripted", "LLM"), ("execute_tool get_weather", "TOOL"),
            ("invoke_agent", "AGENT"), ("step 1", "CHAIN"), ("step 2", "CHAIN")]
        assert {(s["service"], s["project"]) for s in spans} == {("otlp-test", "otlp-test")}
        text = {s["name"]: {k: s["attrs"][k] for k in text_keys if k in s["attrs"]} for s in spans}
        if content:
            assert text["invoke_agent"] == {"input.value": "Weather in Paris?", "output.value": "21C"}
            assert text["execute_tool get_weather"] == {"input.value": '{"city": "Paris"}',
                                                        "output.value": '{"celsius": 21}'}
            chats = [s["attrs"] for s in spans if s["name"] == "chat scripted"]
            assert [json.loads(c["llm.tools.0.tool.json_schema"])["function"]["name"] for c in chats] == [
                "get_weather", "get_weather"]
        else:
            assert all(t == {} for t in text.values())
            assert not [k for s in spans for k in s["attrs"] if k.startswith("llm.tools.")]


def test_configure_tracing_uses_the_given_name_only_without_one_in_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    sink = InMemorySpanExporter()
    provider = configure_tracing("my-agent", exporter=sink)
    provider.shutdown()
    assert provider.resource.attributes["service.name"] == "my-agent"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    provider = configure_tracing("my-agent", exporter=sink)
    provider.shutdown()
    assert provider.resource.attributes["service.name"] == "from-env"


def test_configure_tracing_hints_at_the_extra_when_the_exporter_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TracingSetupError, match=r"pip install 'durable-agent-runner\[otlp\]'"):
        configure_tracing()


def test_configure_tracing_rejects_an_unknown_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(TracingSetupError, match="unsupported OTLP protocol 'http/json'"):
        configure_tracing()


def test_the_default_exporter_is_otlp_over_http(receiver: Receiver) -> None:
    exporter = otlp_exporter()
    try:
        otlp = exporter  # narrowed apart: OTLPSpanExporter.shutdown is unannotated, SpanExporter's is typed
        assert isinstance(otlp, OTLPSpanExporter)
        assert otlp._endpoint == f"{receiver.url}/v1/traces"
    finally:
        exporter.shutdown()


def test_a_live_run_without_a_store_is_delivered(receiver: Receiver) -> None:
    provider = configure_tracing()
    try:
        run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), tracer_provider=provider)
    finally:
        provider.shutdown()  # flushes the batch
    assert len(receiver.spans()) == 6


def _traced_run(store: Any, provider: Any) -> str:
    result = run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), store=store,
                       tracer_provider=provider)
    return result.run_id


def test_rebuilt_spans_are_resent_under_the_live_service_name(
        receiver: Receiver, store: RunStore, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = configure_tracing("weather-agent")
    try:
        run_id = _traced_run(store, provider)
    finally:
        provider.shutdown()
    assert {s["service"] for s in receiver.spans()} == {"weather-agent"}
    stored = store.get_run(run_id)
    assert stored.events[0].data["service_name"] == "weather-agent"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "the-exporting-process")  # the run's own name still wins

    def resent(**kw: Any) -> set[Any]:
        receiver.requests.clear()
        exporter = otlp_exporter()
        try:
            export_run(stored, exporter, **kw)
        finally:
            exporter.shutdown()
        return {s["service"] for s in receiver.spans()}

    assert resent() == {"weather-agent"}
    assert resent(resource=Resource({"service.name": "caller"})) == {"caller"}
    receiver.requests.clear()
    cli_result = invoke("spans", run_id, "--db", store_url, "--endpoint", f"{receiver.url}/v1/traces")
    assert cli_result.exit_code == 0, cli_result.output
    assert {s["service"] for s in receiver.spans()} == {"weather-agent"}


def test_a_run_traced_by_nothing_is_resent_under_the_environments_service_or_runner(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    stored = store.get_run(_traced_run(store, None))
    assert "service_name" not in stored.events[0].data

    def service() -> set[Any]:
        sink = InMemorySpanExporter()
        export_run(stored, sink)
        return {s.resource.attributes["service.name"] for s in sink.get_finished_spans()}

    assert service() == {"runner"}
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert service() == {"from-env"}


@pytest.mark.parametrize(("env", "endpoint", "timeout_s"), [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces", 10.0),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": " GRPC"}, "http://c:4317", 10.0),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x",
      "OTEL_EXPORTER_OTLP_TIMEOUT": "3", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "4.5"}, "http://t:1/x", 4.5),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
     "http://c:4318/v1/traces", 10.0),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "-1"},
     "http://c:4318/v1/traces", 10.0),
])
def test_the_otlp_settings_the_runner_reads_itself(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                   endpoint: str, timeout_s: float) -> None:
    from runner.tracing.otlp import export_timeout_s, otlp_setting, traces_endpoint

    for name in ("ENDPOINT", "PROTOCOL", "TIMEOUT"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_TRACES_{name}", raising=False)
    assert otlp_setting("ENDPOINT") is None
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (traces_endpoint(), export_timeout_s(), otlp_setting("ENDPOINT")) == (
        endpoint, timeout_s, env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env["OTEL_EXPORTER_OTLP_ENDPOINT"]))
