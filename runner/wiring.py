"""Which recorders a run gets, from the arguments ``run_agent`` was given.

Tracing comes first so that the store, which follows, can log the ids of the
spans the tracer has just opened or closed ("each event knows its span").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .recorder import FanoutRecorder, Recorder

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
    from .tracing import TracingRecorder

    # Always traced: with no provider given, the global one (a no-op unless the app
    # configured OpenTelemetry, and then cheap), so every stored event gets a span id.
    tracing = TracingRecorder(tracer_provider, record_content=record_content)
    recorders: list[Recorder] = [tracing]
    if store is not None:
        recorders.append(store.recorder(span_source=tracing))
    if extra is not None:
        recorders.append(extra)
    return recorders[0] if len(recorders) == 1 else FanoutRecorder(recorders)
