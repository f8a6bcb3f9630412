"""What a sub-agent's call costs beyond its child's own steps, logged on a SQLite file.

In one run, for a child of k steps (each but the last calls ``echo``), N runs each of:
  tree     a parent whose first step calls the sub-agent (the child: a run of its own, in the same store),
           then answers
  child    the child's work as a plain logged run of k steps
  parent   the parent's own work as a plain logged run: its first step calls ``echo`` instead
The overhead of one call is tree - (child + parent) per run, in ms (goal: at most 2 ms).
Read the ratios, not the absolute figures (machines are noisy); ``--profile`` prints where a tree run's time
goes. ``--count KIND`` makes ``--runs`` runs of one kind (``--k``, default 1) and nothing else, to count
instructions under callgrind (docs/benchmarks.md): run it for 0 and N runs, divide the totals' difference by N.

    .venv/bin/python bench/subagents.py [--runs N] [--profile | --count tree|child|parent [--k K]]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workload import registry, script

from runner import Limits, ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner.store import RunStore, open_store

STEPS = (1, 10)
REPEATS = 7
GOAL_MS = 2.0


def tree_registry(k: int) -> ToolRegistry:
    """The parent's tools: the sub-agent ``helper``, whose child runs ``k`` steps of the workload."""
    reg = registry()
    reg.add_agent("helper", model=script(k), registry=registry(), description="Does the work.",
                  limits=Limits(max_steps=k, token_budget=10**12, max_identical_calls=k))
    return reg


def parent_script(tool: str, args: dict[str, object]) -> ScriptedModel:
    return ScriptedModel([ModelReply("delegating", [ToolCall("p1", tool, args)]), "done"])


def tree_run(store: RunStore, k: int) -> str:
    result = run_agent("bench", parent_script("helper", {"task": "work"}), tree_registry(k), system="s",
                       store=store, max_steps=2, token_budget=10**12)
    if (result.status, result.steps, result.messages[-2]["content"]) != ("done", 2, "finished"):
        raise SystemExit(f"bench tree ended {result.status} after {result.steps} steps")
    return result.run_id


def check_tree(store: RunStore, k: int) -> None:
    """One tree run, read back: its child is a run of k steps, done, in the same store."""
    (child,) = store.children(tree_run(store, k))
    if (child.status, child.steps) != ("done", k):
        raise SystemExit(f"bench child ended {child.status} after {child.steps} steps")


def child_run(store: RunStore, k: int) -> None:
    result = run_agent("work", script(k), registry(), store=store, max_steps=k, token_budget=10**12,
                       max_identical_calls=k)
    if (result.status, result.steps) != ("done", k):
        raise SystemExit(f"bench child ended {result.status} after {result.steps} steps")


def parent_run(store: RunStore, k: int) -> None:
    result = run_agent("bench", parent_script("echo", {"n": 1}), registry(), system="s", store=store, max_steps=2,
                       token_budget=10**12)
    if (result.status, result.steps) != ("done", 2):
        raise SystemExit(f"bench parent ended {result.status} after {result.steps} steps")


KINDS: dict[str, Callable[[RunStore, int], object]] = {"tree": tree_run, "child": child_run, "parent": parent_run}


def batch(store: RunStore, one: Callable[[RunStore, int], object], k: int, runs: int) -> tuple[float, float]:
    """The mean wall-clock and CPU (all threads) time of ``runs`` runs of ``one``, in ms."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        one(store, k)
    return (time.perf_counter() - wall) / runs * 1e3, (time.process_time() - cpu) / runs * 1e3


def measure(store: RunStore, k: int, runs: int) -> dict[str, tuple[float, float]]:
    """Per kind, the best over ``REPEATS`` of its batch's mean wall and CPU time; the kinds take turns."""
    best = dict.fromkeys(KINDS, (float("inf"), float("inf")))
    for _ in range(REPEATS):
        for name, one in KINDS.items():
            wall, cpu = batch(store, one, k, runs)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of each kind per repeat (default 50)")
    parser.add_argument("--profile", action="store_true", help="profile tree runs (k=1) with cProfile")
    parser.add_argument("--count", choices=KINDS, help="only make --runs runs of this kind (of --k), for callgrind")
    parser.add_argument("--k", type=int, choices=STEPS, default=STEPS[0], help="the child's steps, with --count")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{Path(tmp) / 'bench.db'}") as store:
        for k in STEPS:
            check_tree(store, k)
            child_run(store, k)
            parent_run(store, k)
        if options.count:
            for _ in range(options.runs):
                KINDS[options.count](store, options.k)
            return
        if options.profile:
            profiler = cProfile.Profile()
            profiler.runcall(lambda: [tree_run(store, 1) for _ in range(options.runs)])
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            return
        print(f"{'k':>3} {'':>5} {'tree ms':>8} {'child ms':>9} {'parent ms':>10} {'overhead ms':>12} "
              f"{'tree/(child+parent)':>20}")
        worst = 0.0
        for k in STEPS:
            best = measure(store, k, options.runs)
            for i, clock in enumerate(("wall", "cpu")):
                tree, child, parent = (best[name][i] for name in ("tree", "child", "parent"))
                overhead = tree - (child + parent)
                if clock == "wall":
                    worst = max(worst, overhead)
                print(f"{k:>3} {clock:>5} {tree:>8.2f} {child:>9.2f} {parent:>10.2f} {overhead:>12.2f} "
                      f"{tree / (child + parent):>19.2f}x")
    print(f"a sub-agent's call costs at most {worst:.2f} ms (wall clock) beyond its child's own steps "
          f"(goal: at most {GOAL_MS:g} ms) -> {'ok' if worst <= GOAL_MS else 'MISSED'}")


if __name__ == "__main__":
    main()
