"""The root span of a typed run: ``output.value`` is the JSON, ``output.mime_type`` ``application/json``."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.store import RunStore
from runner.tracing import rebuild_spans
from tests.output.helpers import Invoice, final


def root_output(spans: list[object]) -> tuple[object, object]:
    (root,) = [span for span in spans if getattr(span, "parent", None) is None]
    attributes = getattr(root, "attributes", None) or {}
    return attributes.get("output.value"), attributes.get("output.mime_type")


def test_the_root_span_carries_the_typed_result_as_json_live_and_rebuilt(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    result = run_agent("bill", ScriptedModel([final("c1", total=2, currency="EUR")]), ToolRegistry(),
                       output_type=Invoice, store=store, tracer_provider=provider, record_content=True)
    value, mime = root_output(list(exporter.get_finished_spans()))
    assert mime == "application/json"
    assert isinstance(value, str)
    assert json.loads(value) == {"total": 2.0, "currency": "EUR"}
    rebuilt = root_output(list(rebuild_spans(store.get_run(result.run_id), record_content=True)))
    assert rebuilt == (value, mime)


def test_a_free_text_answer_stays_text_plain(live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    run_agent("hi", ScriptedModel(["hello"]), ToolRegistry(), tracer_provider=provider, record_content=True)
    assert root_output(list(exporter.get_finished_spans())) == ("hello", "text/plain")
