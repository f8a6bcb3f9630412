"""The log survives SIGKILL mid-tool and many processes writing one SQLite file at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runner.store import RunStore, open_store
from tests.store.helpers import KINDS_BEFORE_KILL, KINDS_PER_RUN

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
    from runner.store import open_store

    url, mode, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    registry = ToolRegistry()
    registry.register("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}},
                      lambda city: {"celsius": 21})

    def slow(seconds):
        Path(arg).write_text("running")
        time.sleep(seconds)
        return "slept"

    registry.register("slow", "Sleeps.", {"type": "object", "properties": {"seconds": {"type": "number"}}}, slow)
    if mode == "kill":
        model = ScriptedModel([
            ModelReply(tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})]),
            ModelReply("waiting", tool_calls=[ToolCall("c2", "slow", {"seconds": 60})]),
            "never",
        ])
        with open_store(url) as store:
            run_agent("Weather, then wait", model, registry, store=store, run_id="a" * 32)
    else:
        while not Path(arg).exists():
            time.sleep(0.001)
        ids = []
        with open_store(url) as store:
            for i in range(15):
                model = ScriptedModel([
                    ModelReply(tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})]),
                    ModelReply(tool_calls=[ToolCall("c2", "get_weather", {"city": "Oslo"})]),
                    f"answer {i}",
                ])
                result = run_agent(f"task {i}", model, registry, store=store, labels={"writer": mode})
                ids.append(result.run_id)
        print(json.dumps(ids))
""")


def spawn(url: str, mode: str, arg: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WORKER, url, mode, str(arg)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError("worker never reached the tool")
        time.sleep(0.01)


def test_sigkill_while_a_tool_runs_leaves_an_intact_log_ending_at_tool_started(
        store: RunStore, store_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "tool-is-running"
    proc = spawn(store_url, "kill", marker)
    try:
        wait_for(marker, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    if store.engine.dialect.name == "sqlite":
        db = sqlite3.connect(store.engine.url.database or "")
        try:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            db.close()
    run = store.get_run("a" * 32)
    assert [e.kind for e in run.events] == KINDS_BEFORE_KILL
    assert [e.seq for e in run.events] == list(range(1, len(KINDS_BEFORE_KILL) + 1))
    assert run.events[-1].data == {"call_id": "c2", "name": "slow", "args": {"seconds": 60}}
    assert [m["role"] for m in run.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (run.status, run.finished_at, run.steps, run.tool_calls) == ("running", None, 2, 2)
    assert run.liveness == "dead"


def test_six_processes_write_fifteen_runs_each_to_one_store(store_url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [spawn(store_url, f"w{n}", go) for n in range(6)]
    go.touch()  # all six open the fresh store (and race to migrate it) at once
    outputs = [proc.communicate(timeout=110) for proc in procs]
    assert [(proc.returncode, err) for proc, (_, err) in zip(procs, outputs, strict=True)] == [(0, "")] * 6
    written = [json.loads(out) for out, _ in outputs]
    assert [len(ids) for ids in written] == [15] * 6
    with open_store(store_url) as store:
        assert len(store.list_runs(limit=1000)) == 90
        for n, ids in enumerate(written):
            assert sorted(r.run_id for r in store.list_runs(label=("writer", f"w{n}"), limit=100)) == sorted(ids)
            for run_id in ids:
                run = store.get_run(run_id)
                assert [e.kind for e in run.events] == KINDS_PER_RUN
                assert [e.seq for e in run.events] == list(range(1, len(KINDS_PER_RUN) + 1))
                assert (run.status, run.tool_calls) == ("done", 2)
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM events").scalar() == 90 * len(KINDS_PER_RUN)
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA integrity_check").all() == [("ok",)]
