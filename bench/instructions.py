"""One run of N steps, for counting instructions under callgrind (the machine's load does not move them).

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python bench/instructions.py MODE N

Run it for N = 0 and N = 200 and divide the difference of the ``Collected`` totals by 200:
the instructions of one step, everything else (imports, a warm-up run, setup) cancelled out.
MODE is ``plain`` (no store, no tracer), ``logged`` (a SQLite file), ``traced`` (a real SDK
provider with a synchronous in-memory exporter), ``logged+traced`` (both), ``content`` (traced with ``record_content``:
its steps grow with the history, so compare it at the same N only) or ``floor`` (the OpenTelemetry SDK alone:
the spans a traced run of N steps made, read from SPANS, made again straight on a provider).
Write SPANS first, outside callgrind, with ``bench/instructions.py capture N SPANS``; a
``floor`` run with N = 0 reads the file and makes nothing, so reading it cancels out too.
A logged run adds to the stats' rollups once a second: under callgrind, where a step takes ~50x
longer, that is ~50x more often a step than in a real run. ``RUNNER_BENCH_ROLL_EVERY_S=60`` counts
what a real run at a step a millisecond pays.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from workload import registry, script

from runner import open_store, run_agent

MODES = ("plain", "logged", "traced", "logged+traced", "content", "floor")


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    return made, exporter


def run(steps: int, **options: Any) -> None:
    result = run_agent("bench", script(steps), registry(), max_steps=steps, token_budget=10**12, **options)
    if (result.status, result.steps) != ("done", steps):
        raise SystemExit(f"bench run ended {result.status} after {result.steps} steps")


def capture(steps: int, path: Path) -> None:
    made, exporter = provider()
    run(steps, tracer_provider=made)
    spans = list(exporter.get_finished_spans())
    index = {span.context.span_id: i for i, span in enumerate(spans) if span.context is not None}
    path.write_text(json.dumps([{
        "name": span.name, "kind": span.kind.value, "attributes": dict(span.attributes or {}),
        "parent": index.get(span.parent.span_id) if span.parent is not None else None,
        "status": span.status.status_code.value, "description": span.status.description,
        "start": span.start_time, "end": span.end_time} for span in spans]), encoding="utf-8")


def floor(spans: list[dict[str, Any]], make: bool) -> None:
    made, exporter = provider()
    tracer = made.get_tracer("floor")
    for span in spans:  # as the SDK hands them over: sequences are tuples
        span["attributes"] = {k: tuple(v) if isinstance(v, list) else v for k, v in span["attributes"].items()}
    if not make:
        return
    live: dict[int, trace.Span] = {}
    for i in sorted(range(len(spans)), key=lambda i: spans[i]["start"]):
        parent = spans[i]["parent"]
        context = trace.set_span_in_context(live[parent]) if parent is not None else None
        live[i] = tracer.start_span(spans[i]["name"], context, SpanKind(spans[i]["kind"]), spans[i]["attributes"])
    for i in sorted(range(len(spans)), key=lambda i: spans[i]["end"]):
        if spans[i]["status"] != StatusCode.UNSET.value:
            live[i].set_status(Status(StatusCode(spans[i]["status"]), spans[i]["description"]))
        live[i].end()
    exporter.clear()


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "capture":
        capture(int(argv[1]), Path(argv[2]))
        return
    if len(argv) not in (2, 3) or argv[0] not in MODES or (argv[0] == "floor") != (len(argv) == 3):
        raise SystemExit(__doc__)
    mode, steps = argv[0], int(argv[1])
    if mode == "floor":
        floor(json.loads(Path(argv[2]).read_text(encoding="utf-8")), make=steps > 0)
        return
    options: dict[str, Any] = {}
    if mode in ("traced", "logged+traced", "content"):
        options["tracer_provider"] = provider()[0]
        options["record_content"] = mode == "content"
    if mode in ("logged", "logged+traced"):
        options["store"] = open_store(Path(tempfile.mkdtemp()) / "runs.db")
        every = os.environ.get("RUNNER_BENCH_ROLL_EVERY_S")
        if every is not None:  # under callgrind a step takes ~50x longer: as many more stats additions a step
            from runner.store import recording

            recording.ROLL_EVERY_S = float(every)
    run(3, **options)  # warm: first-call costs (imports, caches) are not a step's
    if steps:
        run(steps, **options)


if __name__ == "__main__":
    main(sys.argv[1:])
