"""Which recorders a run gets, from the arguments ``run_agent`` was given.

Tracing comes first so that the store, which follows, can log the ids of the
spans the tracer has just opened or closed ("each event knows its span").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .recorder import FanoutRecorder, NullRecorder, Recorder

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .store import RunStore


def build_recorder(
    *,
    store: RunStore | None,
    tracer_provider: TracerProvider | None,
    record_content: bool,
    extra: Recorder | None,
) -> Recorder:
    recorders: list[Recorder] = []
    span_source = None
    if tracer_provider is not None:
        from .tracing import TracingRecorder

        tracing = TracingRecorder(tracer_provider, record_content=record_content)
        recorders.append(tracing)
        span_source = tracing
    if store is not None:
        recorders.append(store.recorder(span_source=span_source))
    if extra is not None:
        recorders.append(extra)
    if not recorders:
        return NullRecorder()
    return recorders[0] if len(recorders) == 1 else FanoutRecorder(recorders)
