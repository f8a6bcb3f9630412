"""Per-step cost of the loop with a scripted model, at 10, 100 and 1,000 steps.

Compares the incremental token estimate with the naive one that re-serialises
the whole history at every step, in one run, as ratios (machines are noisy:
read the ratios, not the absolute figures).

    .venv/bin/python bench/loop.py
"""

from __future__ import annotations

import time

from naive_meter import NaiveTokenMeter
from workload import registry, script

from runner._log.limits import Limits
from runner._log.state import RunState
from runner._loop.core import AgentCore
from runner._loop.sync import run_core
from runner._loop.tokens import TokenMeter
from runner._run.opening import new_run_opening
from runner._run.wiring import RunWiring, build_recorder

SIZES = (10, 100, 1000)
REPEATS = 5


def per_step_us(steps: int, meter: type[TokenMeter]) -> float:
    reg = registry()
    best = float("inf")
    for _ in range(REPEATS):
        # The core ``run_agent`` builds, with the token meter swapped: a run's default recorder
        # traces through the global (no-op) provider.
        model, limits, state = script(steps), Limits(max_steps=steps, token_budget=10**12), RunState(run_id="bench")
        default, _ = build_recorder(RunWiring(), state)
        core = AgentCore(model, reg, run_id=state.run_id, limits=limits, recorder=default, state=state,
                         opening=new_run_opening(state.run_id, "bench", "s", limits, reg, model), meter=meter)
        started = time.perf_counter()
        result = run_core(core)
        elapsed = time.perf_counter() - started
        if (result.status, result.steps) != ("done", steps):
            raise SystemExit(f"bench run ended {result.status} after {result.steps} steps")
        best = min(best, elapsed)
    return best / steps * 1e6


def main() -> None:
    rows = {n: (per_step_us(n, TokenMeter), per_step_us(n, NaiveTokenMeter)) for n in SIZES}
    base = rows[SIZES[0]][0]
    print(f"{'steps':>6} {'incremental us/step':>20} {'naive us/step':>14} {'naive/incr':>11} {'incr vs 10':>11}")
    for n, (incr, naive) in rows.items():
        print(f"{n:>6} {incr:>20.1f} {naive:>14.1f} {naive / incr:>10.1f}x {incr / base:>10.2f}x")
    ratio = rows[SIZES[-1]][0] / base
    print(f"per-step cost at {SIZES[-1]} steps is {ratio:.2f}x that at {SIZES[0]} steps "
          f"(goal: within 1.2x) -> {'ok' if ratio <= 1.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
