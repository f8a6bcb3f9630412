"""Wall-clock per step of two trees of the runner, side by side in one run: before and after a change.

Each (tree, mode) is measured in its own process (``PYTHONPATH`` = the tree), the trees taking
turns, REPEATS times; a figure is the best of its repeats of a run of STEPS steps (a scripted
model and a trivial tool: the harness is all there is). Modes: ``plain`` (no store, no tracer),
``logged`` (a SQLite file), ``traced`` (an SDK provider, ``BatchSpanProcessor`` into memory),
``logged+traced``. Wall-clock moves with the machine's load: read the ratios of one run, and
count instructions with ``bench/instructions.py`` for a verdict.

    mkdir -p /tmp/before && git archive HEAD~1 runner | tar -x -C /tmp/before
    .venv/bin/python bench/runner_step.py /tmp/before .          # BEFORE AFTER
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STEPS = 200
REPEATS = 5
MODES = ("plain", "logged", "traced", "logged+traced")
HERE = Path(__file__).resolve().parent


def one(mode: str) -> float:
    """Seconds a step of one run in ``mode``, in this process (the tree on ``sys.path``)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from workload import registry, script

    from runner import open_store, run_agent

    options: dict[str, Any] = {}
    provider = None
    if "traced" in mode:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        options["tracer_provider"] = provider
    store = open_store(Path(tempfile.mkdtemp()) / "runs.db") if "logged" in mode else None
    if store is not None:
        options["store"] = store
    run_agent("bench", script(3), registry(), max_steps=3, token_budget=10**12, **options)  # warm
    began = time.perf_counter()
    result = run_agent("bench", script(STEPS), registry(), max_steps=STEPS, token_budget=10**12, **options)
    took = time.perf_counter() - began
    if (result.status, result.steps) != ("done", STEPS):
        raise SystemExit(f"bench run ended {result.status} after {result.steps} steps")
    if provider is not None:
        provider.shutdown()
    if store is not None:
        store.close()
    return took / STEPS


def measured(tree: Path, mode: str) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(HERE)]))
    out = subprocess.run([sys.executable, __file__, "--one", mode], env=env, capture_output=True, text=True,
                         check=True, cwd=tree)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--one":
        print(json.dumps(one(argv[1])))
        return
    if len(argv) != 2:
        raise SystemExit(__doc__)
    trees = [Path(a).resolve() for a in argv]
    best: dict[tuple[int, str], float] = {}
    for _ in range(REPEATS):
        for mode in MODES:
            for i, tree in enumerate(trees):
                seconds = measured(tree, mode)
                best[i, mode] = min(best.get((i, mode), seconds), seconds)
    print(f"{'us a step':<16}{'before':>10}{'after':>10}{'after/before':>14}")
    for mode in MODES:
        before, after = best[0, mode] * 1e6, best[1, mode] * 1e6
        print(f"{mode:<16}{before:>10.1f}{after:>10.1f}{after / before:>14.2f}")
    for i, name in enumerate(("before", "after")):
        ratio = best[i, "logged+traced"] / best[i, "logged"]
        print(f"{name}: logged + traced / logged = {ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
