"""SIGKILL anywhere in a three-level tree of agents: a resume of the root finishes it, and nothing pays twice.

The killed process is ``tests.subagents.tree_proc``; this one resumes, so nothing survives between
them but the log. Each agent's model logs every time it is asked, so a test can tell that a child
whose replies were logged was not asked for them again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from runner import Status, open_store, resume, run_agent
from runner._tools.agents import child_run_id
from runner.errors import RunNotFound
from runner.store import RunStore
from tests.resume.helpers import ROOT, assert_consistent
from tests.subagents.tree_proc import TreeModel, ran, registry

TREE = "7e" * 16


def start(store_url: str, workdir: Path, run_id: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.subagents.tree_proc", store_url, str(workdir), "run",
                             run_id, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill(proc: subprocess.Popen[str]) -> bool:
    """SIGKILL ``proc``; whether it was still running (else it finished on its own)."""
    if proc.poll() is not None:
        proc.communicate()
        return False
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    return True


def tree_ids(run_id: str) -> tuple[str, str]:
    research = child_run_id(run_id, "r1")
    return research, child_run_id(research, "d1")


def assert_tree_done(store: RunStore, run_id: str) -> None:
    research, deep = tree_ids(run_id)
    for each in (run_id, research, deep):
        run = store.get_run(each)
        assert run.status == Status.DONE, (each, run.status, run.error)
        assert_consistent(run)
    assert [child.run_id for child in store.children(run_id)] == [research]  # one child per call, never two
    assert [child.run_id for child in store.children(research)] == [deep]


@pytest.mark.process
def test_a_kill_inside_a_childs_slow_tool_after_its_child_paid_resumes_the_same_tree(
        store_url: str, tmp_path: Path) -> None:
    (tmp_path / "hang-vendor").touch()  # research's lookup hangs, while deep (called beside it) pays and finishes
    proc = start(store_url, tmp_path, TREE)
    research, deep = tree_ids(TREE)
    deadline = time.monotonic() + 30
    with open_store(store_url) as store:
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, ran(tmp_path)
            try:
                if "lookup vendor" in ran(tmp_path) and store.get_run(deep).status == Status.DONE:
                    break
            except RunNotFound:
                pass
            time.sleep(0.02)
        assert kill(proc)
        assert store.get_run(research).status == Status.RUNNING
        asked_before = Counter(line for line in ran(tmp_path) if line.startswith("ask "))
        result = resume(store, TREE, TreeModel("planner", tmp_path), registry(tmp_path))
        assert result.status == Status.DONE
        assert_tree_done(store, TREE)
    lines = ran(tmp_path)
    assert [line for line in lines if line.startswith("pay ")].count("pay deep") == 1
    assert sorted(line for line in lines if line.startswith("pay ")) == ["pay deep", "pay planner", "pay research"]
    assert lines.count("lookup vendor") == 2  # read-only: in doubt, so run again
    asked = Counter(line for line in lines if line.startswith("ask "))
    assert asked["ask deep 0"] == asked["ask deep 1"] == 1  # the finished child is served, never asked again
    assert asked["ask research 0"] == 1  # its logged reply was not asked again
    assert all(count == 1 for count in asked.values()), asked
    assert asked_before["ask planner 0"] == 1


@pytest.mark.process
def test_twenty_kills_at_random_points_of_a_three_level_tree_pay_nothing_twice(
        store_url: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("RUNNER_CHAOS_SEED", "0")) or random.randrange(1, 10**6)
    rng = random.Random(seed)
    kills = 0
    for trial in range(20):
        workdir = tmp_path / f"t{trial}"
        workdir.mkdir()
        run_id = f"{trial:02d}" + "c4" * 15
        proc = start(store_url, workdir, run_id, "--pause=0.03")
        deadline = time.monotonic() + 30
        while not ran(workdir):  # the root has asked its model: the tree has begun
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.5))
        killed = kill(proc)
        kills += killed
        with open_store(store_url) as store:
            try:
                store.get_run(run_id)
            except RunNotFound:  # killed before its start was committed: start it over
                run_agent("Pay the vendor.", TreeModel("planner", workdir), registry(workdir), store=store,
                          run_id=run_id, max_steps=20)
            else:
                if store.get_run(run_id).status != Status.DONE:
                    result = resume(store, run_id, TreeModel("planner", workdir), registry(workdir))
                    assert result.status == Status.DONE, (seed, trial, result.error)
            assert_tree_done(store, run_id)
        paid = Counter(line for line in ran(workdir) if line.startswith("pay "))
        assert all(count == 1 for count in paid.values()), (seed, trial, killed, paid)
    assert kills >= 15, (seed, kills)  # the kills landed inside the tree, not after it had finished
