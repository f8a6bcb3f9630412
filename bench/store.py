"""What the event log costs per step, and how queries hold up on 100,000 runs.

In one run, at 10, 100 and 1,000 steps (each step: one model call, one tool call):
  plain    the loop with no store
  logged   the loop with the log on a SQLite file (WAL, synchronous=NORMAL)
  floor    raw ``sqlite3``: the same event rows, one INSERT + COMMIT each, same pragmas
then the logged loop and list_runs / get_run latency on a file holding 100,000 runs.
Read the ratios, not the absolute figures (machines are noisy).

    .venv/bin/python bench/store.py
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from workload import registry, script

from runner import run_agent
from runner.store import RunStore, open_store

SIZES = (10, 100, 1000)
REPEATS = 5
BIG = 100_000


def one_run(steps: int, store: RunStore | None) -> tuple[float, str]:
    model = script(steps)
    started = time.perf_counter()
    result = run_agent("bench", model, registry(), system="s", max_steps=steps, token_budget=10**12,
                       max_identical_calls=steps, store=store)
    elapsed = time.perf_counter() - started
    if (result.status, result.steps) != ("done", steps):
        raise SystemExit(f"bench run ended {result.status} after {result.steps} steps")
    return elapsed, result.run_id


def per_step_us(steps: int, store: RunStore | None) -> tuple[float, str]:
    runs = [one_run(steps, store) for _ in range(REPEATS)]
    best, run_id = min(runs)
    return best / steps * 1e6, run_id


def raw_connection(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = NORMAL"):
        db.execute(f"PRAGMA {pragma}")
    db.execute("CREATE TABLE IF NOT EXISTS events (run_id TEXT, seq INTEGER, at TEXT, step INTEGER, kind TEXT,"
               " data TEXT, span_id TEXT, PRIMARY KEY (run_id, seq))")
    return db


def floor_us(rows: list[tuple[Any, ...]], steps: int, path: Path) -> float:
    """One INSERT + COMMIT per event of a logged run, replayed with fresh run ids."""
    db = raw_connection(path)
    best = float("inf")
    try:
        for _ in range(REPEATS):
            run_id = uuid.uuid4().hex
            started = time.perf_counter()
            for row in rows:
                db.execute("BEGIN")
                db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", (run_id, *row))
                db.execute("COMMIT")
            best = min(best, time.perf_counter() - started)
    finally:
        db.close()
    return best / steps * 1e6


def event_rows(store: RunStore, run_id: str) -> list[tuple[Any, ...]]:
    run = store.get_run(run_id)
    return [(e.seq, e.at.isoformat(), e.step, e.kind, json.dumps(e.data, separators=(",", ":")), e.span_id)
            for e in run.events]


def fill(path: Path, count: int) -> None:
    """``count`` finished two-step runs (11 events each), bulk-inserted with plain ``sqlite3``."""
    open_store(path).close()
    call = {"id": "c1", "name": "echo", "args": {"n": 1}}
    payloads = [
        ("run_started", 0, {"task": "bench", "system": "s", "limits": {}, "tool_specs": [], "model": "scripted"}),
        ("message", 0, {"index": 0, "message": {"role": "system", "content": "s"}}),
        ("message", 0, {"index": 1, "message": {"role": "user", "content": "bench"}}),
        ("step_started", 1, {"step": 1}),
        ("message", 1, {"index": 2, "message": {"role": "assistant", "content": "", "tool_calls": [call]}}),
        ("model_call", 1, {"step": 1, "prompt_tokens": 50, "reply_tokens": 10, "latency_s": 0.5}),
        ("tool_started", 1, {"call_id": "c1", "name": "echo", "args": {"n": 1}}),
        ("tool_finished", 1, {"call_id": "c1", "name": "echo", "observation": '{"n": 1}', "ok": True}),
        ("message", 1, {"index": 3, "message": {"role": "tool", "tool_call_id": "c1", "name": "echo",
                                                "content": '{"n": 1}'}}),
        ("step_finished", 1, {"step": 1}),
        ("run_finished", 1, {"status": "done", "answer": "finished", "steps": 1}),
    ]
    encoded = [(kind, step, json.dumps(data)) for kind, step, data in payloads]
    db = sqlite3.connect(path, isolation_level=None)
    t0 = datetime(2024, 1, 1)
    db.execute("BEGIN")
    for start in range(0, count, 10_000):
        runs, events, tools = [], [], []
        for n in range(start, min(start + 10_000, count)):
            run_id = f"{n:032x}"
            at = (t0 + timedelta(seconds=n)).strftime("%Y-%m-%d %H:%M:%S.%f")
            runs.append((run_id, f"task {n}", "s", "scripted", "done", f"answer {n}", 1, 100, 1, "{}", "[]",
                         run_id, "bench:1", at, at, at, at))
            events += [(run_id, seq, at, step, kind, data, None)
                       for seq, (kind, step, data) in enumerate(encoded, 1)]
            tools.append((run_id, "echo", at))
        db.executemany("INSERT INTO runs (run_id, task, system, model, status, answer, steps, tokens, tool_calls,"
                       " limits, tool_specs, trace_id, owner, started_at, updated_at, heartbeat_at, finished_at)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
        db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", events)
        db.executemany("INSERT INTO run_tools (run_id, name, started_at) VALUES (?, ?, ?)", tools)
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a store in steady state, not one fresh from a bulk load
    db.close()


def goal(met: bool) -> str:
    return "ok" if met else "MISSED"


def latency_ms(fn: Any, repeats: int = 30) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = {}
        with open_store(work / "runs.db") as store:
            for n in SIZES:
                plain, _ = per_step_us(n, None)
                logged, run_id = per_step_us(n, store)
                floor = floor_us(event_rows(store, run_id), n, work / f"raw{n}.db")
                rows[n] = (plain, logged, floor)
        print(f"{'steps':>6} {'plain us/step':>14} {'logged us/step':>15} {'floor us/step':>14} "
              f"{'logged/floor':>13} {'(logged-plain)/floor':>21} {'logged vs 10':>13}")
        base = rows[SIZES[0]][1]
        for n, (plain, logged, floor) in rows.items():
            print(f"{n:>6} {plain:>14.1f} {logged:>15.1f} {floor:>14.1f} {logged / floor:>12.2f}x "
                  f"{(logged - plain) / floor:>20.2f}x {logged / base:>12.2f}x")
        worst = max(logged / floor for _, logged, floor in rows.values())
        flat = rows[SIZES[-1]][1] / base
        print(f"logged within 2x of the floor at every size: worst {worst:.2f}x -> {goal(worst <= 2.0)}; "
              f"{SIZES[-1]} steps within 1.2x of {SIZES[0]}: {flat:.2f}x -> {goal(flat <= 1.2)}")

        big = work / "big.db"
        started = time.perf_counter()
        fill(big, BIG)
        print(f"\nfilled {BIG:,} runs in {time.perf_counter() - started:.1f} s "
              f"({big.stat().st_size / 1e6:.0f} MB)")
        with open_store(big) as store:
            logged_big, run_id = per_step_us(100, store)
            list_ms = latency_ms(lambda: store.list_runs(limit=50))
            get_ms = latency_ms(lambda: store.get_run(run_id))
            get_small_ms = latency_ms(lambda: store.get_run(f"{BIG // 2:032x}"))
            tool_ms = latency_ms(lambda: store.list_runs(tool="echo", limit=50), repeats=5)
            rare_ms = latency_ms(lambda: store.list_runs(tool="absent", limit=50), repeats=5)
            status_ms = latency_ms(lambda: store.list_runs(status="done", limit=50))
        empty_100 = rows[100][1]
        print(f"logged loop, 100 steps: {logged_big:8.1f} us/step on {BIG:,} runs vs {empty_100:.1f} on a "
              f"near-empty file ({logged_big / empty_100:.2f}x, goal within 1.2x -> "
              f"{goal(logged_big / empty_100 <= 1.2)})")
        print(f"list_runs(limit=50), newest:       {list_ms:8.2f} ms")
        print(f"list_runs(status='done'):          {status_ms:8.2f} ms")
        print(f"list_runs(tool='echo'), all match: {tool_ms:8.2f} ms")
        print(f"list_runs(tool='absent'), none:    {rare_ms:8.2f} ms")
        print(f"get_run, 100-step run (704 events):{get_ms:8.2f} ms")
        print(f"get_run, 2-step run (11 events):   {get_small_ms:8.2f} ms")


if __name__ == "__main__":
    main()
