"""Tracing with the real store: each event knows its span, the run its trace, and rebuilds match."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from runner import ModelReply, RunStore, ScriptedModel, ToolCall, run_agent
from runner.tracing import derived_span_id, rebuild_spans
from tests.tracing.helpers import RUN, SCENARIOS, ids_of, registry, step, tree, weather


@pytest.mark.parametrize("record_content", [False, True], ids=["plain", "content"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_spans_rebuilt_from_the_store_equal_the_live_ones(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], scenario: str,
        record_content: bool) -> None:
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


def test_an_untraced_run_logs_the_ids_a_no_op_tracer_reports(store: RunStore) -> None:
    def run(**kw: Any) -> list[tuple[str, str | None]]:
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
    assert traced == [(kind, derived_span_id("b" * 32, key_of[str(span)])) for kind, span in plain]


@pytest.mark.parametrize("record_content", [False, True], ids=["plain", "content"])
def test_a_run_awaiting_approval_is_not_an_error_on_its_root_span(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], record_content: bool) -> None:
    provider, exporter = live
    reg = registry()
    reg.register("pay", "Pays.", {"type": "object", "properties": {"amount": {"type": "number"}}},
                 lambda amount: "paid", needs_approval=True)
    model = ScriptedModel([ModelReply("", [ToolCall("p1", "pay", {"amount": 5})])])
    result = run_agent("Pay", model, reg, store=store, tracer_provider=provider, record_content=record_content)
    assert result.status == "awaiting_approval"
    root = {**RUN, "runner.status": "awaiting_approval", "output.mime_type": "text/plain",
            "output.value": "stopped: awaiting_approval (a resume continues the run)"}  # not an answer: a stop
    if record_content:
        root.update({"runner.stop_reason": "call p1 (pay) needs approval", "input.value": "Pay",
                     "input.mime_type": "text/plain"})
    for spans in (exporter.get_finished_spans(), rebuild_spans(store.get_run(result.run_id),
                                                                record_content=record_content)):
        (got,) = tree(spans)
        assert got[:3] == ["invoke_agent", "UNSET", root]
        assert [step[:3] for step in got[3]] == [["step 1", "UNSET", step(1)]]
        assert [(span[0], span[1], "error.type" in span[2], span[2].get("runner.tool.awaiting_approval"))
                for span in got[3][0][3]] == [
            ("chat scripted", "UNSET", False, None),
            ("execute_tool pay", "UNSET", False, True)]  # the call waits for a decision: not run, no error
