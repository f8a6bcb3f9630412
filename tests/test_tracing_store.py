"""Tracing with the real store: each event knows its span, the run its trace, and rebuilds match."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from runner import ScriptedModel, run_agent
from runner.tracing import derived_span_id, rebuild_spans
from tests.test_tracing import ids_of, registry, tree, weather
from tests.test_tracing_rebuild import SCENARIOS

store_mod = pytest.importorskip("runner.store")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    s = store_mod.open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    yield s
    s.close()


@pytest.mark.parametrize("record_content", [False, True], ids=["plain", "content"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_spans_rebuilt_from_the_store_equal_the_live_ones(
        store: Any, live: tuple[TracerProvider, InMemorySpanExporter], scenario: str, record_content: bool) -> None:
    provider, exporter = live
    spec = dict(SCENARIOS[scenario])
    model = spec.pop("model")()
    reg = spec.pop("reg", registry)()
    result = run_agent("Weather in Paris?", model, reg, store=store, tracer_provider=provider,
                       record_content=record_content, agent_name="forecaster", **spec)
    live_spans = exporter.get_finished_spans()
    stored = store.get_run(result.run_id)
    assert stored.trace_id == format(live_spans[0].context.trace_id, "032x")
    assert {e.span_id for e in stored.events} == {format(s.context.span_id, "016x") for s in live_spans}
    rebuilt = rebuild_spans(stored, record_content=record_content)
    assert tree(rebuilt) == tree(live_spans)
    assert ids_of(rebuilt) == ids_of(live_spans)


def test_an_untraced_run_logs_the_ids_a_no_op_tracer_reports(store: Any, tmp_path: Path) -> None:
    def run(**kw: Any) -> list[tuple[str, str]]:
        result = run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(),
                           store=store, run_id=kw.pop("run_id"), **kw)
        stored = store.get_run(result.run_id)
        assert stored.trace_id == result.run_id
        return [(e.kind, e.span_id) for e in stored.events]

    plain = run(run_id="a" * 32)
    traced = run(run_id="b" * 32, tracer_provider=NoOpTracerProvider())
    keys = ("run", "step:1", "chat:1", "tool:c1", "step:2", "chat:2")
    key_of = {derived_span_id("a" * 32, k): k for k in keys}
    assert {span for _, span in plain} == set(key_of)
    assert traced == [(kind, derived_span_id("b" * 32, key_of[span])) for kind, span in plain]
