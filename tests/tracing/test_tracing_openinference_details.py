"""The OpenInference details native instrumentations give, live and rebuilt alike, on each backend.

Chat spans name the model (``llm.model_name``), its provider as OpenInference names it (``llm.provider``)
and the request's known settings (``llm.invocation_parameters``: the model, all a run logs); tool spans
describe their tool from the run's tool specs; every span of a labelled run carries its labels as
``metadata`` (with the run's id) and ``tag.tags``; costs are rounded to ``COST_DIGITS`` decimals.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, RunStore, ScriptedModel, ToolCall, Usage, resume, run_agent
from runner.events import ModelCalled
from runner.tracing import attrs, rebuild_spans
from tests.tracing.helpers import registry, weather

Live = tuple[TracerProvider, InMemorySpanExporter]


class Named(ScriptedModel):
    """A scripted model that says it is another model, of another provider."""

    def __init__(self, replies: Iterable[ModelReply | str], name: str, provider: str) -> None:
        super().__init__(replies)
        self.model_name, self.provider_name = name, provider


def picked(spans: Sequence[ReadableSpan], keys: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Each span's name and its attributes among ``keys``, in the order the spans started."""
    return [(s.name, {k: v for k, v in (s.attributes or {}).items() if k in keys})
            for s in sorted(spans, key=lambda s: (s.start_time or 0, s.name))]


def both(store: RunStore, exporter: InMemorySpanExporter, run_id: str) -> tuple[Sequence[ReadableSpan], ...]:
    """The run's live spans and the same run rebuilt from the store."""
    return tuple(exporter.get_finished_spans()), tuple(rebuild_spans(store.get_run(run_id)))


MODEL_KEYS = ("llm.model_name", "llm.provider", "llm.invocation_parameters")


def test_chat_spans_name_the_model_its_provider_and_its_settings_per_part(store: RunStore, live: Live) -> None:
    provider, exporter = live
    first = run_agent("Weather in Paris?", Named([weather("c1", "Paris")], "gpt-4o-mini", "openai"), registry(),
                      store=store, tracer_provider=provider, max_steps=1)
    assert first.status == "step_limit"
    done = resume(store, first.run_id, Named(["21C"], "gemini-2.0-flash", "gcp.vertex_ai"), registry(),
                  max_steps=3, tracer_provider=provider)
    assert done.status == "done"
    expected = [("chat gpt-4o-mini", {"llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
                                      "llm.invocation_parameters": '{"model": "gpt-4o-mini"}'}),
                ("chat gemini-2.0-flash", {"llm.model_name": "gemini-2.0-flash", "llm.provider": "google",
                                           "llm.invocation_parameters": '{"model": "gemini-2.0-flash"}'})]
    for spans in both(store, exporter, first.run_id):
        assert [one for one in picked(spans, MODEL_KEYS) if one[0].startswith("chat ")] == expected
        assert [name for name, found in picked(spans, MODEL_KEYS) if found] == [name for name, _ in expected]


@pytest.mark.parametrize(("given", "named"), [
    ("openai", "openai"), ("anthropic", "anthropic"), ("aws.bedrock", "aws"), ("azure.ai.openai", "azure"),
    ("gcp.gemini", "google"), ("mistral_ai", "mistralai"), ("Mistral", "mistralai"), ("x-ai", "xai"),
    ("moonshotai", "moonshot"), ("my-vllm", "my-vllm"), (None, None)])
def test_the_provider_goes_by_its_openinference_name(given: str | None, named: str | None) -> None:
    found = attrs.chat_start(attrs.run_ids("r", None), 1, "m", given)
    assert found.get("llm.provider") == named
    assert found.get("gen_ai.provider.name") == given  # the GenAI attribute keeps the run's own name


TOOL_KEYS = ("tool.name", "tool.description", "tool.json_schema", "tool.parameters")


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
def test_tool_spans_describe_their_tool_from_the_runs_tool_specs(store: RunStore, live: Live, content: bool) -> None:
    provider, exporter = live
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"}),
                                           ToolCall("u1", "get_forecast", {"day": 1})]), "21C"])
    result = run_agent("Weather in Paris?", model, registry(), store=store, tracer_provider=provider,
                       record_content=content)
    assert result.status == "done"
    (spec,) = [s for s in registry().specs() if s["name"] == "get_weather"]
    expected = [
        ("execute_tool get_forecast", {"tool.name": "get_forecast"}),  # no such tool: its name alone
        ("execute_tool get_weather", {
            "tool.name": "get_weather", "tool.description": "Temperature in a city.",
            "tool.json_schema": json.dumps({"type": "function", "function": {
                "name": "get_weather", "description": "Temperature in a city.", "parameters": spec["parameters"]}}),
            "tool.parameters": '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}'}),
    ]
    live_spans, rebuilt = both(store, exporter, result.run_id)
    for spans in (live_spans, rebuilt):
        assert sorted(one for one in picked(spans, TOOL_KEYS) if one[1]) == expected


def test_every_span_of_a_labelled_run_carries_its_labels_and_id(store: RunStore, live: Live) -> None:
    provider, exporter = live
    labelled = run_agent("Weather in Paris?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(),
                         store=store, tracer_provider=provider, labels={"team": "search", "env": "prod"})
    live_spans, rebuilt = both(store, exporter, labelled.run_id)
    metadata = json.dumps({"env": "prod", "team": "search", "runner.run_id": labelled.run_id})
    for spans in (live_spans, rebuilt):
        assert len(spans) == 6
        assert {(s.attributes or {}).get("metadata") for s in spans} == {metadata}
        assert {(s.attributes or {}).get("tag.tags") for s in spans} == {("env=prod", "team=search")}
    exporter.clear()
    plain = run_agent("Weather in Paris?", ScriptedModel(["21C"]), registry(), store=store, tracer_provider=provider)
    for spans in both(store, exporter, plain.run_id):
        assert not [k for s in spans for k in (s.attributes or {}) if k in ("metadata", "tag.tags")]


COST_KEYS = ("llm.cost.total", "llm.cost.prompt", "llm.cost.completion")


def test_costs_on_spans_are_rounded_and_the_log_keeps_them_exact(store: RunStore, live: Live) -> None:
    provider, exporter = live
    result = run_agent("Hi", ScriptedModel([ModelReply("hello", usage=Usage(100, 7))]), registry(), store=store,
                       tracer_provider=provider, prices={"scripted": {"input_mtok": 0.3, "output_mtok": 1.2}})
    (called,) = [f for f in store.get_run(result.run_id).facts if isinstance(f, ModelCalled)]
    assert called.completion_cost_usd == 1.2 * 7 / 1e6 == 8.400000000000001e-06  # a float's noise, logged as it is
    for spans in both(store, exporter, result.run_id):
        assert [found for name, found in picked(spans, COST_KEYS) if name == "chat scripted"] == [
            {"llm.cost.total": 3.84e-05, "llm.cost.prompt": 3e-05, "llm.cost.completion": 8.4e-06}]
