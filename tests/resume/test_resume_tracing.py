"""A resumed run's spans join its trace under its first root; a fork or follow-up starts its own
trace linked to its parent's root; spans rebuilt from the log agree with the live ones."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, ScriptedModel, fork, rebuild_spans, resume, run_agent
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry


def _tree(spans: list[ReadableSpan]) -> set[tuple[str, str, str | None, Any]]:
    """(name, span id, parent span id, resumed_from) of each span, with the trace id checked apart."""
    out = set()
    for s in spans:
        assert s.context is not None
        out.add((s.name, format(s.context.span_id, "016x"),
                 format(s.parent.span_id, "016x") if s.parent else None,
                 (s.attributes or {}).get("runner.resumed_from")))
    return out


def test_a_resumed_run_joins_its_trace_under_its_first_root_and_rebuilds_alike(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    script: list[ModelReply | str] = [reply("", call("c1", "get_weather", city="Paris")),
                                      reply("", call("c2", "get_weather", city="Oslo")), "cold"]
    stopped = run_agent("Weather?", ScriptedModel(script), weather_registry(), store=store, max_steps=1,
                        tracer_provider=provider)
    first = list(exporter.get_finished_spans())
    result = resume(store, stopped.run_id, ScriptedModel(script[1:]), weather_registry(), max_steps=5,
                    tracer_provider=provider)
    spans = list(exporter.get_finished_spans())
    assert (stopped.status, result.status) == ("step_limit", "done")
    assert len({s.context.trace_id for s in [*first, *spans] if s.context}) == 1
    roots = [s for s in spans if s.name.startswith("invoke_agent")]
    assert [s.name for s in sorted(roots, key=lambda s: s.start_time or 0)] == [
        "invoke_agent", "invoke_agent (resumed: step_limit)"]
    first_root, second_root = sorted(roots, key=lambda s: s.start_time or 0)
    assert first_root.parent is None
    assert second_root.parent is not None
    assert first_root.context is not None
    assert second_root.parent.span_id == first_root.context.span_id
    assert (second_root.attributes or {})["runner.resumed_from"] == "step_limit"
    assert second_root.context is not None
    under_second = sorted(s.name for s in spans if s.parent is not None
                          and s.parent.span_id == second_root.context.span_id)
    assert under_second == ["step 2", "step 3"]
    rebuilt = rebuild_spans(store.get_run(stopped.run_id))
    assert _tree(rebuilt) == _tree(spans)
    assert {s.context.trace_id for s in rebuilt if s.context} == {s.context.trace_id for s in spans if s.context}


def test_a_fork_has_its_own_trace_linked_to_its_parents_root(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    script: list[ModelReply | str] = [reply("", call("c1", "get_weather", city="Paris")), "21C"]
    parent = run_agent("Weather?", ScriptedModel(script), weather_registry(), store=store, tracer_provider=provider)
    parent_root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    exporter.clear()
    forked = fork(store, parent.run_id, at_step=2, model=ScriptedModel(["warm"]), registry=weather_registry(),
                  tracer_provider=provider)
    root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert forked.status == "done"
    assert root.context is not None
    assert parent_root.context is not None
    assert root.context.trace_id != parent_root.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in root.links] == [
        (parent_root.context.trace_id, parent_root.context.span_id)]
    assert store.get_run(forked.run_id).trace_id == format(root.context.trace_id, "032x")
