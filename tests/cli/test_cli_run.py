"""``runner demo`` and ``runner run`` (against a real local OpenAI-compatible server), and the installed script."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from runner.store import open_store
from tests.cli.helpers import FakeOpenAI, completion, installed_runner, invoke, one_error_line
from tests.helpers import default_sigint

ANSWER = "Each person pays $40.62: EUR 127.50 plus an 18% tip is EUR 150.45"


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def test_demo_on_a_fresh_store_prints_the_answer_the_run_id_and_what_next(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = invoke("demo", "--db", url)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[0].startswith(ANSWER)
    run_id = re.fullmatch(r"run id: ([0-9a-f]{32})", out[2])
    assert run_id is not None
    assert out[3] == "status done, 3 steps, 2 tool calls, 1007 tokens"
    assert f"  runner show {run_id[1][:8]} --db {url}" in out
    assert f"  runner export {run_id[1][:8]} -o tests/fixtures/run.json --db {url}" in out
    shown = invoke("show", run_id[1], "--db", url).stdout
    assert shown.splitlines()[0] == f"run {run_id[1]}  done"
    assert '→ calculate({"expression": "127.50 * 1.18 / 4"})' in shown
    assert '→ convert_currency({"amount": 37.6125, "from_currency": "EUR", "to_currency": "USD"})' in shown
    assert '"amount": 40.62' in shown
    assert shown.splitlines()[-2:] == ["done", f"  {ANSWER}, split 4 ways is EUR 37.61 each, at 1.08 USD per "
                                               "EUR (fixed demo rate)."]


def test_demo_json_and_its_label(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    found = json.loads(invoke("demo", "--db", url, "--json").stdout)
    assert (found["status"], found["steps"], found["tool_calls"]) == ("done", 3, 2)
    assert "$40.62" in found["answer"]
    with open_store(url) as store:
        assert [r.run_id for r in store.list_runs(label=("example", "demo"))] == [found["run_id"]]


def test_demo_against_an_openai_compatible_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    with FakeOpenAI(completion("", [("c1", "calculate", {"expression": "127.50 * 1.18 / 4"})]),
                    completion("Each person pays $40.62.")) as server:
        result = invoke("demo", "--db", url, "--model", "openai:fake-model", "--base-url", server.url,
                        "--api-key", "test-key")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Each person pays $40.62.\n")
    assert [r["model"] for r in server.requests] == ["fake-model", "fake-model"]
    assert server.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "37.6125"}
    with open_store(url) as store:
        (run,) = store.list_runs()
        assert (run.model, run.provider, run.tokens) == ("fake-model", "openai", 30)


def test_run_records_a_task_with_the_users_tools_and_labels(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("", [("c1", "get_weather", {"city": "Paris"})]), completion("21C in Paris.")) as server:
        result = invoke("run", "Weather in Paris?", "--tools", "tests.loop.helpers:weather_registry",
                        "--model", "openai:fake", "--base-url", server.url, "--api-key", "k", "--max-steps", "3",
                        "--label", "env=test", "--db", url, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert (found["status"], found["answer"], found["steps"]) == ("done", "21C in Paris.", 2)
    with open_store(url) as store:
        run = store.get_run(found["run_id"])
    assert run.labels == {"env": "test"}
    assert run.limits["max_steps"] == 3
    assert [t["name"] for t in run.tool_specs] == ["get_weather", "c_to_f"]


def test_run_exits_1_when_the_run_stops_early(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("", [("c1", "get_weather", {"city": "Paris"})])) as server:
        result = invoke("run", "Weather?", "--tools", "tests.loop.helpers:weather_registry", "--model",
                        "openai:fake", "--base-url", server.url, "--api-key", "k", "--max-steps", "1", "--db", url)
    assert result.exit_code == 1
    assert result.stdout.startswith("stopped: step_limit: ")


@pytest.mark.parametrize(("args", "message"), [
    ([], "Error: runner run needs --model (openai:NAME (any OpenAI-compatible server) or anthropic:NAME)"),
    (["--model", "scripted"], "Error: a scripted model cannot answer a new task"),
    (["--model", "gpt-4o"], "Error: --model expects openai:NAME (any OpenAI-compatible server) or anthropic:NAME"),
])
def test_run_needs_a_real_model(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke("run", "Hi", "--tools", "tests.loop.helpers:weather_registry", *args,
                    "--db", f"sqlite:///{tmp_path / 'r.db'}")
    assert result.exit_code == 2
    assert one_error_line(result).startswith(message)


@pytest.mark.process
def test_the_installed_entry_point_runs_the_demo_and_shows_it(tmp_path: Path) -> None:
    runner = installed_runner()
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    demo = subprocess.run([runner, "demo", "--db", url], capture_output=True, text=True, env=env, timeout=60,
                          cwd=tmp_path, check=False)
    assert demo.returncode == 0, demo.stderr
    assert "$40.62" in demo.stdout
    assert "\x1b" not in demo.stdout
    run_id = re.search(r"run id: ([0-9a-f]{32})", demo.stdout)
    assert run_id is not None
    show = subprocess.run([runner, "show", run_id[1][:8], "--db", url], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path, check=False)
    assert show.returncode == 0, show.stderr
    assert show.stdout.splitlines()[0] == f"run {run_id[1]}  done"
    assert "tool convert_currency [call_2]" in show.stdout
    missing = subprocess.run([runner, "show", "nope", "--db", url], capture_output=True, text=True, env=env,
                             timeout=60, cwd=tmp_path, check=False)
    assert missing.returncode == 3
    assert missing.stderr == f"Error: no run 'nope' in {url}\n"
    assert missing.stdout == ""


def test_demo_with_anthropic_and_no_key_stops_up_front_and_stores_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "demo.db"
    result = invoke("demo", "--model", "anthropic:claude-x", "--db", f"sqlite:///{db}")
    assert result.exit_code == 3
    assert one_error_line(result) == (
        "Error: cannot set up anthropic:claude-x: no Anthropic API key: pass api_key or set ANTHROPIC_API_KEY "
        "(or ANTHROPIC_AUTH_TOKEN); a local server needs only a base URL")
    assert result.stdout == ""
    assert not db.exists()


class Interrupting:
    """A model that is Ctrl-C'd while the first request is in flight."""

    def __call__(self, messages: object, specs: object) -> object:
        raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["run", "demo"])
def test_ctrl_c_prints_the_run_id_and_its_cancelled_status_and_exits_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    import runner.cli.run as running

    monkeypatch.setattr(running, "build_model", lambda *args: Interrupting())
    monkeypatch.setattr(running, "demo_model", Interrupting)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    args = ["run", "Weather?", "--tools", "tests.loop.helpers:weather_registry", "--model", "openai:fake"] \
        if command == "run" else ["demo"]
    result = invoke(*args, "--db", url)
    assert result.exit_code == 130
    with open_store(url) as store:
        (run,) = store.list_runs()
    assert (run.status, run.error) == ("cancelled", "aborted by KeyboardInterrupt")
    assert result.stdout.splitlines() == [
        f"interrupted: run {run.run_id} is cancelled (aborted by KeyboardInterrupt)",
        f"  runner show {run.run_id[:8]} --db {url}"]


@pytest.mark.process
def test_ctrl_c_in_a_real_runner_run_process_prints_the_run_id(tmp_path: Path) -> None:
    import signal
    import time

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    with FakeOpenAI(hang=True) as server:
        proc = subprocess.Popen([installed_runner(), "run", "Weather?", "--tools",
                                 "tests.loop.helpers:weather_registry", "--model", "openai:fake",
                                 "--base-url", server.url, "--api-key", "k", "--db", url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=Path(__file__).resolve().parents[2], preexec_fn=default_sigint)
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.requests, "the model was never called"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    with open_store(url) as store:
        (run,) = store.list_runs()
    assert run.status == "cancelled"
    assert out.splitlines()[0] == f"interrupted: run {run.run_id} is cancelled (aborted by KeyboardInterrupt)"
    assert "Traceback" not in err


def test_ctrl_c_with_json_prints_the_run_id_and_status_as_json(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.cli.run as running

    monkeypatch.setattr(running, "demo_model", Interrupting)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = invoke("demo", "--json", "--db", url)
    assert result.exit_code == 130
    with open_store(url) as store:
        (run,) = store.list_runs()
    assert json.loads(result.stdout) == {"run_id": run.run_id, "status": "cancelled",
                                         "error": "aborted by KeyboardInterrupt", "interrupted": True}
