"""Latency where users feel it: a reply's tool calls run together, and what a step costs the harness.

    .venv/bin/python bench/latency.py                 # this version
    .venv/bin/python bench/latency.py --old /tmp/old  # and the per-step overhead of runner/ in /tmp/old

1. A reply with 5 tool calls that each sleep 0.2 s (plain functions with ``run_agent`` and
   ``arun_agent``, coroutines with ``arun_agent``): the step's wall time at ``max_parallel_tools``
   1 and 8 (best of 3).
2. A run of 20 such steps with a model that answers in 0.5 s, logged (SQLite) and traced (an SDK
   provider), at 1 and 8: wall time, and what is left once the model's and the tools' sleeps are taken off.
3. The per-step overhead, one instant call per step (plain, logged, traced; best of 3 runs of 200
   steps), for this version and, with ``--old DIR``, for the ``runner/`` in DIR in a subprocess
   (``git archive <commit> runner migrations | tar -x -C DIR``). Wall-clock on a noisy machine: count
   instructions with ``bench/instructions.py`` under callgrind for a figure to trust (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from workload import registry, script

from runner import ModelReply, ToolCall, ToolRegistry, arun_agent, open_store, run_agent

CALLS, NAP_S, MODEL_S, STEPS = 5, 0.2, 0.5, 20
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def napping(kind: str) -> ToolRegistry:
    """A tool ``nap(n)`` that sleeps ``NAP_S``: a plain function, or a coroutine (``kind`` "async")."""
    def nap(n: int) -> int:
        time.sleep(NAP_S)
        return n

    async def anap(n: int) -> int:
        await asyncio.sleep(NAP_S)
        return n

    tools = ToolRegistry()
    tools.register("nap", "Sleep a while.", SCHEMA, anap if kind == "async" else nap)
    return tools


class Planner:
    """A model that asks for ``CALLS`` naps a step for ``steps`` steps, then answers; each reply after ``think_s``."""

    model_name = "planner"

    def __init__(self, steps: int, think_s: float = 0.0) -> None:
        self.steps, self.think_s, self.made = steps, think_s, 0

    def reply(self) -> ModelReply:
        self.made += 1
        if self.made > self.steps:
            return ModelReply("done")
        return ModelReply("", [ToolCall(f"s{self.made}c{i}", "nap", {"n": i}) for i in range(CALLS)])

    def __call__(self, messages: Any, specs: Any) -> ModelReply:
        time.sleep(self.think_s)
        return self.reply()


class AsyncPlanner(Planner):
    async def __call__(self, messages: Any, specs: Any) -> ModelReply:  # type: ignore[override]
        await asyncio.sleep(self.think_s)
        return self.reply()


def one_step(driver: str, kind: str, parallel: int) -> float:
    """The wall time of a run whose one step asks for ``CALLS`` naps (the answer after it is instant)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        if driver == "sync":
            result = run_agent("nap", Planner(1), napping(kind), max_parallel_tools=parallel)
        else:
            result = asyncio.run(arun_agent("nap", AsyncPlanner(1), napping(kind), max_parallel_tools=parallel))
        best = min(best, time.perf_counter() - started)
        assert (result.status, result.tool_calls) == ("done", CALLS), result
    return best


def provider() -> TracerProvider:
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return made


def long_run(parallel: int) -> float:
    """The wall time of a logged, traced run of ``STEPS`` steps, the model answering in ``MODEL_S``."""
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "runs.db") as store:
        started = time.perf_counter()
        result = run_agent("nap", Planner(STEPS, MODEL_S), napping("sync"), store=store, tracer_provider=provider(),
                           max_steps=STEPS + 1, token_budget=10**9, max_parallel_tools=parallel)
        elapsed = time.perf_counter() - started
    assert (result.status, result.tool_calls) == ("done", STEPS * CALLS), result
    return elapsed


def overhead() -> dict[str, float]:
    """Microseconds a step, one instant call per step, best of 3 runs of 200 steps: plain, logged, traced."""
    found: dict[str, float] = {}
    for mode in ("plain", "logged", "traced"):
        best = float("inf")
        for _ in range(3):
            options: dict[str, Any] = {}
            with tempfile.TemporaryDirectory() as tmp:
                if mode == "logged":
                    options["store"] = open_store(Path(tmp) / "runs.db")
                if mode == "traced":
                    options["tracer_provider"] = provider()
                started = time.perf_counter()
                result = run_agent("bench", script(200), registry(), max_steps=200, token_budget=10**12, **options)
                best = min(best, time.perf_counter() - started)
                if "store" in options:
                    options["store"].close()
            assert result.status == "done", result
        found[mode] = best / 200 * 1e6
    return found


def old_overhead(old: str) -> dict[str, float]:
    """``overhead()`` with the ``runner/`` in ``old``, in a subprocess."""
    bench = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([old, bench])}
    out = subprocess.run([sys.executable, __file__, "--overhead-only"], env=env, cwd=tempfile.gettempdir(),
                         capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(out.stdout)
    return figures


def main(argv: list[str]) -> None:
    if argv == ["--overhead-only"]:
        print(json.dumps(overhead()))
        return
    old = argv[1] if len(argv) == 2 and argv[0] == "--old" else None
    if argv and old is None:
        raise SystemExit(__doc__)
    print(f"1. one step of {CALLS} calls of {NAP_S} s (best of 3)")
    print(f"{'driver':>10} {'tools':>6} {'1 at a time':>12} {'8 at a time':>12} {'speed-up':>9}")
    for driver, kind in (("sync", "sync"), ("async", "sync"), ("async", "async")):
        alone, together = one_step(driver, kind, 1), one_step(driver, kind, 8)
        print(f"{driver:>10} {kind:>6} {alone:>11.3f}s {together:>11.3f}s {alone / together:>8.1f}x")
    print(f"\n2. {STEPS} steps, the model answering in {MODEL_S} s, logged and traced")
    slept = STEPS * MODEL_S
    for parallel in (1, 8):
        wall = long_run(parallel)
        tools = STEPS * NAP_S * (CALLS if parallel == 1 else 1)
        print(f"   max_parallel_tools={parallel}: {wall:.2f}s ({wall / STEPS:.3f}s a step; "
              f"{(wall - slept - tools) / STEPS * 1e3:.1f} ms a step beyond the model's and the tools' sleeps)")
    print("\n3. per-step overhead, one instant call per step (us, best of 3 x 200 steps)")
    now = overhead()
    before = old_overhead(old) if old is not None else None
    print(f"{'mode':>8} {'this':>8}" + (f" {'old':>8} {'this/old':>9}" if before else ""))
    for mode, us in now.items():
        row = f"{mode:>8} {us:>8.1f}"
        if before:
            row += f" {before[mode]:>8.1f} {us / before[mode]:>8.3f}x"
        print(row)


if __name__ == "__main__":
    main(sys.argv[1:])
