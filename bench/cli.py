"""`runner runs --status step_limit --limit 50` on a store of 100,000 runs, timed as a whole process.

Builds the store (migrated by ``open_store``) with SQLAlchemy Core bulk inserts
straight into the ``runs``, ``run_tools``, ``run_labels`` and ``events`` tables:
realistic mixed statuses over the last 30 days, a tool or two and a label per
run, a few events for one run in ten. Then runs the installed ``runner`` entry
point a few times and prints the median wall time next to the goal (issue 6:
under one second, interpreter start and imports included).

    .venv/bin/python bench/cli.py [--runs 100000] [--repeats 5] [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runner.store import open_store
from runner.store.tables import events, run_labels, run_tools, runs

GOAL_S = 1.0
STATUSES = [("done", 70), ("step_limit", 10), ("token_budget", 5), ("model_error", 5), ("tool_budget", 3),
            ("deadline", 3), ("context_budget", 2), ("cancelled", 1), ("awaiting_approval", 1)]
TOOLS = ["get_weather", "c_to_f", "calculate", "convert_currency", "search_docs"]
TASKS = ["What is the weather in {}?", "Convert {} EUR to USD", "Summarise ticket #{}", "Plan a trip to {}"]
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Accra", "Perth"]
CHUNK = 10_000


def build(path: Path, count: int, seed: int = 6) -> None:
    rng = random.Random(seed)
    now = datetime.now(UTC)
    names, weights = zip(*STATUSES, strict=True)
    limits = json.dumps({"max_steps": 8, "token_budget": 4000})
    specs = json.dumps([{"name": t, "description": t, "parameters": {"type": "object"}} for t in TOOLS])
    with open_store(f"sqlite:///{path}") as store, store.engine.begin() as conn:
        for start in range(0, count, CHUNK):
            run_rows: list[dict[str, Any]] = []
            tool_rows: list[dict[str, Any]] = []
            label_rows: list[dict[str, Any]] = []
            event_rows: list[dict[str, Any]] = []
            for n in range(start, min(start + CHUNK, count)):
                run_id = uuid.UUID(int=rng.getrandbits(128), version=4).hex
                status = rng.choices(names, weights)[0]
                started = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
                steps = rng.randint(1, 8)
                used = rng.sample(TOOLS, rng.randint(0, 2))
                run_rows.append({
                    "run_id": run_id, "parent_run_id": None,
                    "task": rng.choice(TASKS).format(rng.choice(CITIES) if n % 2 else n), "system": "You help.",
                    "model": "gpt-4o-mini", "provider": "openai", "agent_name": None, "status": status,
                    "answer": "Done." if status == "done" else None,
                    "error": None if status == "done" else f"stopped: {status}", "steps": steps,
                    "tokens": rng.randint(200, 4000), "tool_calls": len(used) * steps // 2, "limits": limits,
                    "tool_specs": specs, "trace_id": run_id, "owner": "bench:1", "started_at": started,
                    "updated_at": started, "heartbeat_at": started,
                    "finished_at": started + timedelta(seconds=rng.uniform(0.5, 60)),
                })
                tool_rows += [{"run_id": run_id, "name": t, "started_at": started} for t in used]
                label_rows.append({"run_id": run_id, "key": "env", "value": rng.choice(["prod", "dev"]),
                                   "started_at": started})
                if n % 10 == 0:
                    event_rows += [
                        {"run_id": run_id, "seq": 1, "at": started, "step": 0, "kind": "run_started",
                         "data": json.dumps({"task": "t"}), "span_id": None},
                        {"run_id": run_id, "seq": 2, "at": started, "step": 1, "kind": "step_started",
                         "data": json.dumps({"step": 1}), "span_id": None},
                        {"run_id": run_id, "seq": 3, "at": started + timedelta(seconds=1), "step": 1,
                         "kind": "step_finished", "data": json.dumps({"step": 1}), "span_id": None},
                    ]
            conn.execute(runs.insert(), run_rows)
            if tool_rows:
                conn.execute(run_tools.insert(), tool_rows)
            conn.execute(run_labels.insert(), label_rows)
            if event_rows:
                conn.execute(events.insert(), event_rows)


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", type=Path, help="Keep the store at this path (built if missing).")
    args = parser.parse_args()
    runner = str(Path(sys.executable).parent / "runner")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "bench.db"
        if not path.exists():
            began = time.perf_counter()
            build(path, args.runs)
            print(f"built {args.runs:,} runs in {time.perf_counter() - began:.1f}s at {path}")
        command = [runner, "runs", "--status", "step_limit", "--limit", "50", "--db", f"sqlite:///{path}"]
        timed(command)  # warm the page cache and the bytecode cache
        times = []
        for _ in range(args.repeats):
            elapsed, out = timed(command)
            times.append(elapsed)
        rows = sum(1 for line in out.splitlines() if "step_limit" in line)
        baseline = [timed([sys.executable, "-c", "import runner.store, click, rich"])[0] for _ in range(3)]
        median = statistics.median(times)
        print(f"$ runner runs --status step_limit --limit 50   ({rows} rows)")
        print(f"  median {median:.3f}s over {args.repeats} runs (min {min(times):.3f}s, max {max(times):.3f}s); "
              f"goal < {GOAL_S:.1f}s: {'met' if median < GOAL_S else 'MISSED'}")
        print(f"  of which interpreter start + imports: {statistics.median(baseline):.3f}s")


if __name__ == "__main__":
    main()
