"""A streamed chat span records its time to the first piece of text, live and rebuilt from the log."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ScriptedModel, ToolRegistry, rebuild_spans, run_agent
from runner.store import RunStore
from tests.streaming.helpers import StreamingModel

FIRST = "gen_ai.response.time_to_first_chunk"


def chats(spans: Sequence[ReadableSpan]) -> list[dict[str, object]]:
    return [dict(span.attributes or {}) for span in spans if span.name.startswith("chat")]


def test_a_streamed_chat_span_has_its_time_to_first_chunk_live_and_rebuilt(store: RunStore) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = run_agent("write", StreamingModel(["one two three"], pause_s=0.02), ToolRegistry(), store=store,
                       stream=True, tracer_provider=provider)
    live = chats(exporter.get_finished_spans())
    rebuilt = chats(rebuild_spans(store.get_run(result.run_id)))
    assert len(live) == len(rebuilt) == 1
    first = live[0][FIRST]
    assert isinstance(first, float)
    assert 0 <= first < 0.5
    assert rebuilt[0][FIRST] == first
    plain = run_agent("write", ScriptedModel(["one two three"]), ToolRegistry(), store=store,
                      tracer_provider=provider)
    assert FIRST not in chats(rebuild_spans(store.get_run(plain.run_id)))[0]
