"""Shared by the resume tests: a child process that runs a plan (``tests.resume.durable_child``),
killed with SIGKILL inside a tool, and what a finished run's log must look like."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from runner._log.records import StoredRun
from tests.resume.durable_child import ran

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "d0" * 16


def child(store_url: str, workdir: Path, plan: Any, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.resume.durable_child", store_url, str(workdir),
                             json.dumps(plan), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_inside(proc: subprocess.Popen[str], workdir: Path, line: str, timeout_s: float = 30.0) -> None:
    """Wait until the child's tool has written ``line`` (and hangs), then SIGKILL it."""
    deadline = time.monotonic() + timeout_s
    while line not in ran(workdir):
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, f"child never wrote {line!r}"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def assert_consistent(run: StoredRun) -> None:
    """The log of a finished run: contiguous seq, one result per call, ends with run_finished."""
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    assert run.events[-1].kind == "run_finished"
    calls = [c["id"] for m in run.messages if m["role"] == "assistant" for c in m["tool_calls"]]
    results = [m["tool_call_id"] for m in run.messages if m["role"] == "tool"]
    assert results == calls
    started = [e.data["call_id"] for e in run.events if e.kind == "tool_started"]
    ran_calls = [e.data["call_id"] for e in run.events if e.kind == "tool_finished" and e.data["ran"]]
    assert set(ran_calls) <= set(started)


def killed_in(store_url: str, workdir: Path, plan: Any, ref: str, line: str) -> None:
    (workdir / f"hang-{ref}").touch()
    kill_inside(child(store_url, workdir, plan, "run", RUN_ID), workdir, line)


def kill_when(proc: subprocess.Popen[str], workdir: Path, lines: list[str], timeout_s: float = 30.0) -> None:
    """Wait until the child's tools have written every one of ``lines`` (and hang), then SIGKILL it."""
    deadline = time.monotonic() + timeout_s
    while not set(lines) <= set(ran(workdir)):
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, f"child never wrote all of {lines!r}: {ran(workdir)}"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
