"""Per-step cost of tracing next to the plain and the logged loop, as ratios in one run.

Loops of 200 steps with a scripted model and a trivial tool (so the harness is
all there is to measure), best of several repeats, for:

- plain: no store, no tracer
- no-op tracer: a tracer with nothing configured (ids derived from the run id)
- traced: a real SDK provider, ``BatchSpanProcessor`` + ``InMemorySpanExporter``
- logged: a SQLite store in a temporary directory
- logged + traced: both
- SDK floor: the very spans a traced run made (names, kinds, parents, attributes, statuses),
  made again straight on the same SDK provider with no loop at all, per step: what the
  OpenTelemetry SDK itself costs, which no tracer built on it can go below

Goals: the logged and traced loop within 1.3x of the logged loop alone (within 2x at first);
the plain loop at most 15 us a step.
Machines are noisy: read the ratios, not the absolute figures.

    .venv/bin/python bench/tracing.py
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from workload import registry, script

from runner import open_store, run_agent

STEPS = 200
REPEATS = 7


def per_step_us(after: Callable[[], Any] = lambda: None, **kwargs: Any) -> float:
    reg = registry()
    best = float("inf")
    for _ in range(REPEATS):
        model = script(STEPS)
        started = time.perf_counter()
        result = run_agent("bench", model, reg, max_steps=STEPS, token_budget=10**12, **kwargs)
        elapsed = time.perf_counter() - started
        after()
        if (result.status, result.steps) != ("done", STEPS):
            raise SystemExit(f"bench run ended {result.status} after {result.steps} steps")
        best = min(best, elapsed)
    return best / STEPS * 1e6


def sdk_floor_us(provider: TracerProvider, spans: list[ReadableSpan], drain: Callable[[], None]) -> float:
    """Per step, the cost of making ``spans`` again straight on ``provider`` (best of the repeats)."""
    tracer = provider.get_tracer("bench-floor")
    ordered = sorted(spans, key=lambda span: span.start_time or 0)
    closing = sorted(spans, key=lambda span: span.end_time or 0)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        made: dict[int, trace.Span] = {}
        for span in ordered:
            parent = made.get(span.parent.span_id) if span.parent is not None else None
            context = trace.set_span_in_context(parent) if parent is not None else None
            assert span.context is not None
            made[span.context.span_id] = tracer.start_span(span.name, context, span.kind, span.attributes)
        for span in closing:
            assert span.context is not None
            again = made[span.context.span_id]
            again.set_status(span.status)
            again.end()
        best = min(best, time.perf_counter() - started)
        drain()
    return best / STEPS * 1e6


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))

    def drain() -> None:
        provider.force_flush()
        exporter.clear()

    rows: dict[str, float] = {}
    try:
        rows["plain"] = per_step_us()
        rows["no-op tracer"] = per_step_us(tracer_provider=NoOpTracerProvider())
        rows["traced"] = per_step_us(drain, tracer_provider=provider)
        run_agent("bench", script(STEPS), registry(), max_steps=STEPS, token_budget=10**12, tracer_provider=provider)
        provider.force_flush()
        spans = list(exporter.get_finished_spans())
        exporter.clear()
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{Path(tmp) / 'bench.db'}")
            try:
                rows["logged"] = per_step_us(store=store)
                rows["logged + traced"] = per_step_us(drain, store=store, tracer_provider=provider)
            finally:
                store.close()
        floor = sdk_floor_us(provider, spans, drain)
    finally:
        provider.shutdown()

    plain = rows["plain"]
    print(f"{'loop':<16} {'us/step':>9} {'vs plain':>9}")
    for name, us in rows.items():
        print(f"{name:<16} {us:>9.1f} {us / plain:>8.2f}x")
    print(f"tracing adds {rows['traced'] - plain:.1f} us/step to the plain loop "
          f"({(rows['traced'] - plain) / plain:.2f}x a plain step)")
    print(f"SDK floor: the same {len(spans) / STEPS:.1f} spans a step, made straight on the SDK: {floor:.1f} us/step; "
          f"the tracer adds {rows['traced'] - plain - floor:.1f} us/step on top "
          f"(tracing's cost is {(rows['traced'] - plain) / floor:.2f}x the SDK's own)")
    if "logged" in rows:
        logged, both = rows["logged"], rows["logged + traced"]
        ratio = both / logged
        print(f"logged + traced is {ratio:.2f}x the logged loop; tracing adds {both - logged:.1f} us/step "
              f"= {(both - logged) / logged:.2f}x a logged step (goal: within 1.3x) -> "
              f"{'ok' if ratio <= 1.3 else 'MISSED'}")
        print(f"  with tracing at the SDK floor alone, logged + traced would be {(logged + floor) / logged:.2f}x "
              "the logged loop")
    else:
        print("runner.store is not available: logged rows skipped")
    print(f"plain loop: {plain:.1f} us/step at {STEPS} steps (goal: at most 15) -> {'ok' if plain <= 15 else 'MISSED'}")


if __name__ == "__main__":
    main()
