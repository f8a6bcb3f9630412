"""``--max-parallel-tools`` on ``runner run``, ``demo``, ``resume`` and ``fork``: how many calls run at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import open_store
from tests.cli.helpers import FakeOpenAI, completion, invoke


def two_calls(first: int) -> dict[str, object]:
    """A completion asking for the weather in Paris and Oslo, as calls c<first> and c<first + 1>."""
    return completion("", [(f"c{first}", "get_weather", {"city": "Paris"}),
                           (f"c{first + 1}", "get_weather", {"city": "Oslo"})])


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.mark.parametrize(("command", "default"), [("run", "8"), ("demo", "8"), ("resume", "the run's"),
                                                   ("fork", "the run's")])
def test_each_command_that_runs_tools_takes_max_parallel_tools(command: str, default: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    shown = " ".join(result.output.split())
    assert "--max-parallel-tools N Run at most N of a reply's tool calls at once (1: one by one, in the reply's " \
           f"order). [default: {default}] [x>=1]" in shown


def test_zero_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("demo", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--max-parallel-tools", "0")
    assert result.exit_code == 2
    assert "Invalid value for '--max-parallel-tools': 0 is not in the range x>=1." in result.output


def kinds(db: str, run_id: str) -> list[str]:
    with open_store(db) as store:
        return [e.kind for e in store.get_run(run_id).events if e.kind.startswith("tool_")]


TOGETHER = ["tool_started", "tool_started", "tool_finished", "tool_finished"]
ONE_BY_ONE = ["tool_started", "tool_finished", "tool_started", "tool_finished"]


@pytest.mark.parametrize(("at_run", "at_resume", "orders"), [
    ((), (), (TOGETHER, TOGETHER)),
    (("--max-parallel-tools", "1"), (), (ONE_BY_ONE, ONE_BY_ONE)),  # the resume keeps the run's
    (("--max-parallel-tools", "1"), ("--max-parallel-tools", "2"), (ONE_BY_ONE, TOGETHER)),
], ids=["together", "one-by-one", "changed-on-resume"])
def test_run_and_resume_start_a_replys_calls_together_unless_told_one_by_one(
        tmp_path: Path, at_run: tuple[str, ...], at_resume: tuple[str, ...],
        orders: tuple[list[str], list[str]]) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    common = ("--tools", "tests.loop.helpers:weather_registry", "--model", "openai:fake", "--api-key", "k",
              "--db", db, "--json", "--quiet")
    with FakeOpenAI(two_calls(1), two_calls(3), completion("Cold.")) as server:
        first = invoke("run", "Weather?", "--max-steps", "1", "--base-url", server.url, *common, *at_run)
        run_id = json.loads(first.stdout)["run_id"]
        again = invoke("resume", run_id, "--max-steps", "3", "--base-url", server.url, *common, *at_resume)
    assert (json.loads(first.stdout)["status"], json.loads(again.stdout)["status"]) == ("step_limit", "done")
    assert kinds(db, run_id) == orders[0] + orders[1]
