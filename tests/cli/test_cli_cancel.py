"""``runner cancel`` from another process stops a ``runner run`` (issue 31 item 1), across real processes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from runner import open_store
from runner.events import CancelRequested, RunFinished
from tests.cli.helpers import FakeOpenAI, at, completion, installed_runner

MAX_STEPS = 12
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_runner_cancel_from_another_process_stops_a_runner_run_and_logs_who_asked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    bodies = [completion(calls=[(f"c{n}", "tick", {"n": n})]) for n in range(1, MAX_STEPS + 1)]
    with FakeOpenAI(*bodies) as server:
        proc = subprocess.Popen([installed_runner(), "run", "Tick", "--tools", "tests.cli.cancel_tools:tools",
                                 "--model", "openai:fake", *at(server), "--db", url, "--max-steps", str(MAX_STEPS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        deadline = time.monotonic() + 60
        while len(server.requests) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert len(server.requests) >= 2, proc.communicate(timeout=30)
        with open_store(url) as store:
            (run,) = store.list_runs()
        cancel = subprocess.run([installed_runner(), "cancel", run.run_id[:8], "--by", "alice", "--db", url],
                                capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
        asked_at = len(server.requests)  # model calls made by the time the request was in
        _out, err = proc.communicate(timeout=60)
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.strip() == (f"run {run.run_id}: cancel requested: it stops before its next model or "
                                     "tool call")
    assert proc.returncode == 1, err
    # The step under way when asked may make its one model call (abandoned) at most; none after that.
    assert len(server.requests) <= asked_at + 1 < MAX_STEPS
    with open_store(url) as store:
        stopped = store.get_run(run.run_id)
    assert stopped.status == "cancelled"
    assert stopped.steps <= asked_at + 1
    asked = [fact for fact in stopped.facts if isinstance(fact, CancelRequested)]
    assert [fact.requested_by for fact in asked] == ["alice"]
    assert isinstance(stopped.facts[-1], RunFinished)
    assert stopped.facts[-1].error is not None
    assert stopped.facts[-1].error.startswith("cancel requested by alice")
    shown = subprocess.run([installed_runner(), "show", run.run_id, "--db", url, "--json"], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=60)
    events = json.loads(shown.stdout)["events"]
    assert [e["data"]["requested_by"] for e in events if e["kind"] == "cancel_requested"] == ["alice"]
    text = subprocess.run([installed_runner(), "show", run.run_id, "--db", url], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60).stdout
    assert "cancel requested by alice" in text
