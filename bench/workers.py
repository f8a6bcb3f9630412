"""The worker pool on this machine: runs/s and steps/s through 1, 2 and 4 ``runner worker``
processes, the per-step overhead of the worker path against ``run_agent`` in one process,
and the acceptance run: 200 runs on 4 workers, two of them SIGKILLed mid-flight.

Needs PostgreSQL (RUNNER_TEST_PG_URL) and a broker (RUNNER_TEST_BROKER_URL); each phase
uses its own schema and queue, dropped afterwards.

    .venv/bin/python bench/workers.py [--runs 200] [--nap 0.2]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner import run_agent
from runner.events import RunResumed, ToolStarted, decode_all
from runner.pool.submission import submit_run
from tests.pool import agents
from tests.pool.helpers import Pool

PG = os.environ.get("RUNNER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BROKER = os.environ.get("RUNNER_TEST_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
CONCURRENCY = 4  # threads per worker


@contextmanager
def pool(nap_s: float) -> Iterator[Pool]:
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    schema = f"bench_workers_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(PG).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)
    opened = Pool(url, BROKER, Path(tempfile.mkdtemp(prefix="bench-workers-")), nap_s)
    try:
        yield opened
    finally:
        opened.close()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def ready(p: Pool, count: int) -> None:
    p.wait(lambda: sum("ready." in log.read_text(errors="replace") for log in p.logs.glob("worker-*.log")) >= count,
           60, "the workers to be ready")


def through(workers: int, runs: int, nap_s: float, chaos: Callable[[Pool], None] | None = None,
            concurrency: int = CONCURRENCY) -> tuple[float, int]:
    """Seconds from the first submission to the last run done, and the steps taken."""
    with pool(nap_s) as p:
        for _ in range(workers):
            p.start_worker(concurrency)
        ready(p, workers)
        started = time.perf_counter()
        for i in range(runs):
            submit_run(p.store, f"job {i}", agent="tipper", broker=BROKER, queue=p.queue)
        if chaos is not None:
            chaos(p)
        p.wait(lambda: all(s == "done" for s in p.statuses().values()), 600, "every run to end done")
        elapsed = time.perf_counter() - started
        steps = sum(run.steps for run in p.store.list_runs(limit=runs))
        if chaos is not None:
            check(p)
        return elapsed, steps


def kill_two(p: Pool) -> None:
    rng = random.Random()
    for victim in (0, 1):
        p.wait(p.drives_a_run(p.workers[victim]), 60, "a victim driving a run")
        time.sleep(rng.uniform(0.0, 2.0))
        p.workers[victim].send_signal(signal.SIGKILL)
        p.workers[victim].wait()
        print(f"  SIGKILLed worker {victim} (pid {p.workers[victim].pid}); starting a replacement")
        p.start_worker(CONCURRENCY)


def check(p: Pool) -> None:
    runs = p.store.list_runs(limit=100_000)
    resumed = 0
    for summary in runs:
        facts = decode_all(p.store.get_run(summary.run_id).events, summary.run_id)
        resumed += any(isinstance(f, RunResumed) for f in facts)
        attempts = Counter(f.call_id for f in facts if isinstance(f, ToolStarted))
        assert attempts["notify-3"] <= 1, summary.run_id
    charges = Counter(key for (key,) in p.rows("SELECT key FROM charges"))
    notices = Counter(tag for (tag,) in p.rows("SELECT tag FROM notices"))
    assert all(s.status == "done" for s in runs)
    assert max(charges.values()) <= 2
    assert max(notices.values()) <= 1
    print(f"  all {len(runs)} runs done; {resumed} resumed after a kill; charges recorded twice (in-doubt re-run "
          f"with the same key): {sum(n == 2 for n in charges.values())}; notices at most once: "
          f"{max(notices.values()) == 1}")


def in_process_per_step_ms(runs: int) -> float:
    with pool(0.0) as p:
        os.environ.update(POOL_NAP_S="0", POOL_LEDGER_URL=p.db)
        steps, started = 0, time.perf_counter()
        for i in range(runs):
            model, registry, _ = agents.make_tipper()
            steps += run_agent(f"job {i}", model, registry, store=p.store, max_steps=10, token_budget=100_000).steps
        return (time.perf_counter() - started) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--nap", type=float, default=0.2, help="seconds the nap tool sleeps")
    parser.add_argument("--overhead-only", action="store_true")
    args = parser.parse_args()
    print(f"{args.runs} runs of 4 steps (nap {args.nap} s a step), {CONCURRENCY} threads per worker")
    for workers in () if args.overhead_only else (1, 2, 4):
        elapsed, steps = through(workers, args.runs, args.nap)
        print(f"{workers} worker(s): {args.runs / elapsed:7.1f} runs/s {steps / elapsed:8.1f} steps/s "
              f"({elapsed:.1f} s)")
    overhead_runs = 50  # one run at a time, no sleeping: what the worker path adds to each step
    one = in_process_per_step_ms(overhead_runs)
    elapsed, steps = through(1, overhead_runs, 0.0, concurrency=1)
    worker = elapsed / steps * 1000
    print(f"per step, one run at a time, no sleeping: run_agent in one process {one:.2f} ms; through one worker "
          f"thread {worker:.2f} ms (+{worker - one:.2f} ms: publish, delivery, claim, cancel polling)")
    if args.overhead_only:
        return
    print(f"acceptance: {args.runs} runs on 4 workers, two SIGKILLed mid-flight")
    elapsed, steps = through(4, args.runs, args.nap, kill_two)
    print(f"  {args.runs / elapsed:.1f} runs/s with the kills ({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
