"""OpenInference attributes beside the GenAI ones, so Phoenix and friends read the traces well.

Every span has an ``openinference.span.kind``; with content on, the root carries the task
and the answer, tool spans their arguments and observation, chat spans the tools offered;
with content off none of that text. Live and rebuilt spans carry the same, on each backend.
Estimated token counts are never reported as provider usage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, RunStore, ScriptedModel, ToolSpec, Usage, resume, run_agent
from runner.tracing import configure_tracing, rebuild_spans
from runner.tracing.rebuild import run_resource
from tests.loop.helpers import call, reply, weather_registry
from tests.tracing.helpers import registry, weather

KINDS = {"invoke_agent": "AGENT", "step": "CHAIN", "chat": "LLM", "execute_tool": "TOOL"}
TEXT_KEYS = ("input.value", "output.value", "input.mime_type", "output.mime_type")


def kinds(spans: Sequence[ReadableSpan]) -> list[tuple[str, Any]]:
    return sorted((s.name, (s.attributes or {}).get("openinference.span.kind")) for s in spans)


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in sorted(spans, key=lambda s: s.start_time or 0) if s.name == name]


def oi_text(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k in TEXT_KEYS or k.startswith("llm.tools.")}


def openai_tool(spec: ToolSpec) -> str:
    return json.dumps({"type": "function", "function": spec}, ensure_ascii=False)


def _weather_run(store: RunStore, provider: TracerProvider, content: bool) -> list[ReadableSpan]:
    model = ScriptedModel([weather("c1", "Paris"), "21C"])
    result = run_agent("Weather in Paris?", model, registry(), store=store, tracer_provider=provider,
                       record_content=content)
    assert result.status == "done"
    return rebuild_spans(store.get_run(result.run_id), record_content=content)


@pytest.mark.parametrize("content", [False, True])
def test_every_span_has_an_openinference_kind_live_and_rebuilt(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], content: bool) -> None:
    provider, exporter = live
    rebuilt = _weather_run(store, provider, content)
    expected = [("chat scripted", "LLM"), ("chat scripted", "LLM"), ("execute_tool get_weather", "TOOL"),
                ("invoke_agent", "AGENT"), ("step 1", "CHAIN"), ("step 2", "CHAIN")]
    assert kinds(exporter.get_finished_spans()) == expected
    assert kinds(rebuilt) == expected


def test_with_content_on_the_root_tools_and_chats_carry_openinference_text(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    rebuilt = _weather_run(store, provider, True)
    tools = [openai_tool(spec) for spec in registry().specs()]
    for spans in (exporter.get_finished_spans(), rebuilt):
        assert [oi_text(a) for a in by_name(spans, "invoke_agent")] == [{
            "input.value": "Weather in Paris?", "input.mime_type": "text/plain",
            "output.value": "21C", "output.mime_type": "text/plain"}]
        assert [oi_text(a) for a in by_name(spans, "execute_tool get_weather")] == [{
            "input.value": '{"city": "Paris"}', "input.mime_type": "application/json",
            "output.value": '{"celsius": 21}'}]
        chats = by_name(spans, "chat scripted")
        assert [oi_text(a) for a in chats] == [
            {f"llm.tools.{i}.tool.json_schema": schema for i, schema in enumerate(tools)}
            | {"input.value": a["gen_ai.input.messages"], "input.mime_type": "application/json",
               "output.value": a["gen_ai.output.messages"], "output.mime_type": "application/json"}
            for a in chats]
        assert [oi_text(a) for a in by_name(spans, "step 1")] == [{}]


def test_with_content_off_no_span_carries_openinference_text(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    rebuilt = _weather_run(store, provider, False)
    for spans in (exporter.get_finished_spans(), rebuilt):
        assert len(spans) == 6
        assert [oi_text(dict(s.attributes or {})) for s in spans] == [{}] * 6


def test_a_resumed_part_has_an_agent_root_with_the_task_and_its_answer(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    script: list[ModelReply | str] = [reply("", call("c1", "get_weather", city="Paris")),
                                      reply("", call("c2", "get_weather", city="Oslo")), "cold"]
    stopped = run_agent("Weather?", ScriptedModel(script), weather_registry(), store=store, max_steps=1,
                        tracer_provider=provider, record_content=True)
    result = resume(store, stopped.run_id, ScriptedModel(script[1:]), weather_registry(), max_steps=5,
                    tracer_provider=provider, record_content=True)
    assert (stopped.status, result.status) == ("step_limit", "done")
    rebuilt = rebuild_spans(store.get_run(stopped.run_id), record_content=True)
    # the first root ended before the resume, and says it stopped; the resumed part is named for why it resumed
    for spans in (exporter.get_finished_spans(), rebuilt):
        roots = by_name(spans, "invoke_agent") + by_name(spans, "invoke_agent (resumed: step_limit)")
        assert [r["openinference.span.kind"] for r in roots] == ["AGENT", "AGENT"]
        assert [(r.get("input.value"), r.get("output.value")) for r in roots] == [
            ("Weather?", "stopped: step_limit (a resume continues the run)"), ("Weather?", "cold")]
        chats = by_name(spans, "chat scripted")
        assert len(chats) == 3
        assert all("llm.tools.1.tool.json_schema" in c for c in chats)


def test_estimated_tokens_are_not_reported_as_provider_usage(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    model = ScriptedModel([weather("c1", "Paris"), ModelReply("21C", usage=Usage(100, 7))])
    result = run_agent("Weather in Paris?", model, registry(), store=store, tracer_provider=provider)
    usage_keys = ("gen_ai.usage.", "llm.token_count.", "runner.usage.")
    rebuilt = rebuild_spans(store.get_run(result.run_id))
    for spans in (exporter.get_finished_spans(), rebuilt):
        chats = [{k: v for k, v in a.items() if k.startswith(usage_keys)} for a in by_name(spans, "chat scripted")]
        assert chats == [
            {"runner.usage.estimated": True, "runner.usage.estimated_input_tokens": 115,
             "runner.usage.estimated_output_tokens": 29},
            {"runner.usage.estimated": False, "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 7,
             "llm.token_count.prompt": 100, "llm.token_count.completion": 7, "llm.token_count.total": 107},
        ]


def test_configure_tracing_names_the_openinference_project_after_the_service(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)

    def project() -> Any:
        provider = configure_tracing("my-agent", exporter=InMemorySpanExporter())
        provider.shutdown()
        return provider.resource.attributes.get("openinference.project.name")

    assert project() == "my-agent"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert project() == "from-env"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=chosen")
    assert project() == "chosen"


def test_rebuilt_runs_land_in_the_project_named_after_their_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert run_resource("weather-agent").attributes.get("openinference.project.name") == "weather-agent"
    assert run_resource(None).attributes.get("openinference.project.name") == "runner"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=chosen")
    assert run_resource("weather-agent").attributes.get("openinference.project.name") == "chosen"
    assert run_resource(None).attributes.get("openinference.project.name") == "chosen"
