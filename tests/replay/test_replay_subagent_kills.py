"""A tree killed inside a child and resumed replays as recorded: the crash inside the child, then the resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner import Status, open_store, resume
from runner._replay.fixture import fixture_from_run
from runner._replay.replayer import replay
from runner._tools.agents import child_run_id
from runner.errors import RunNotFound
from tests.resume.helpers import ROOT
from tests.subagents.tree_proc import TreeModel, ran, registry

TREE = "5e" * 16


def start(store_url: str, workdir: Path, run_id: str) -> subprocess.Popen[str]:
    """Run the three-level tree of ``tests.subagents.tree_proc`` in a process of its own."""
    return subprocess.Popen([sys.executable, "-m", "tests.subagents.tree_proc", store_url, str(workdir), "run",
                             run_id], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.process
def test_a_tree_killed_inside_a_child_and_resumed_replays_clean_without_paying_or_asking_again(
        store_url: str, tmp_path: Path) -> None:
    (tmp_path / "hang-vendor").touch()  # research's lookup hangs, while deep (called beside it) pays and finishes
    proc = start(store_url, tmp_path, TREE)
    deep = child_run_id(child_run_id(TREE, "r1"), "d1")
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
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        assert resume(store, TREE, TreeModel("planner", tmp_path), registry(tmp_path)).status == Status.DONE
        fixture = fixture_from_run(store.get_run(TREE), store)
    child = fixture.child("r1")
    assert child is not None
    assert [r["status"] for r in child.resumes] == ["crashed"]  # research was killed, then went on
    before = ran(tmp_path)
    report = replay(fixture, registry(tmp_path))
    assert report.ok, report.explain()
    assert report.result.answer == "planner done"
    assert ran(tmp_path)[len(before):] == ["lookup vendor"]  # the read ran again; no payment, no model asked
