"""SIGKILL a real ``runner run`` process while an MCP tool runs, then resume with the command ``runner show`` prints.

The tool's annotations decide: a destructive call is not run again (the model is told its outcome is
unknown), a read-only one and an idempotent one run again with the same arguments.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner import open_store
from runner._loop.observations import IN_DOUBT
from tests.cli.helpers import installed_runner
from tests.mcp.helpers import (
    ROOT,
    ReadingOpenAI,
    calls_then_answers,
    ran,
    runner_env,
    server_line,
    servers_alive,
    tool_results,
    wait_for,
)


@pytest.mark.process
@pytest.mark.parametrize(("tool", "args", "line", "runs", "observation"), [
    ("send", {"to": "ann", "text": "hi"}, "send ann hi", 1, IN_DOUBT),
    ("add", {"a": 2, "b": 3}, "add 2 3", 2, '{"result": 5}'),
    ("upsert", {"key": "k", "value": "v"}, "upsert k v", 2, '{"result": "k=v"}'),
], ids=["destructive", "read_only", "idempotent"])
def test_killed_while_an_mcp_tool_ran_a_resume_reruns_it_only_if_its_annotations_allow(
        tmp_path: Path, tool: str, args: dict[str, Any], line: str, runs: int, observation: str) -> None:
    url, marker = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "held"
    command = server_line(tmp_path, "--hold-once", str(marker), "--hold", tool)
    with ReadingOpenAI(calls_then_answers(("c1", tool, args))) as model:
        process = subprocess.Popen([installed_runner(), "run", f"Call {tool}", "--mcp", command, "--model",
                                    "openai:fake", "--db", url, "-q"], cwd=ROOT, env=runner_env(model),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(marker.exists, f"the server holds {tool}")
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
        wait_for(lambda: servers_alive(tmp_path) == [], "the orphaned server exits")
        assert ran(tmp_path) == [line]

        shown = subprocess.run([installed_runner(), "show", "--db", url, _only_run(url)], cwd=ROOT,
                               env=runner_env(model), capture_output=True, text=True, timeout=60, check=True)
        resume = [text.strip() for text in shown.stdout.splitlines() if text.strip().startswith("runner resume ")]
        assert resume == [f"runner resume {_only_run(url)[:8]} --mcp {shlex.quote(command)} --db {url}   "
                          "# continues it"]
        argv = shlex.split(resume[0].split("   #")[0])
        resumed = subprocess.run([installed_runner(), *argv[1:], "-q"], cwd=ROOT, env=runner_env(model),
                                 capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert ran(tmp_path) == [line] * runs
    assert tool_results(model.requests[-1]["messages"]) == [observation]
    with open_store(url) as store:
        run = store.get_run(_only_run(url))
    assert run.status == "done"
    assert [e.data.get("attempt", 1) for e in run.events if e.kind == "tool_started"] == list(range(1, runs + 1))
    assert servers_alive(tmp_path) == []


def _only_run(url: str) -> str:
    with open_store(url) as store:
        (run,) = store.list_runs()
    return run.run_id
