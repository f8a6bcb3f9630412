"""Progress lines: one per model call and per tool call, on stderr as they happen; --quiet silences them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runner import ModelReply, ScriptedModel, run_agent
from runner.events import Event, ToolFinished
from runner.progress import ProgressRecorder
from tests.cli.helpers import FakeOpenAI, completion, invoke
from tests.loop.helpers import call, reply, weather_registry

SECONDS = re.compile(r"\d+\.\d\ds")


def plain(text: str) -> list[str]:
    return SECONDS.sub("Xs", text).splitlines()


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def test_demo_prints_a_line_per_model_call_and_tool_call_on_stderr(tmp_path: Path) -> None:
    result = invoke("demo", "--db", f"sqlite:///{tmp_path / 'runs.db'}")
    assert result.exit_code == 0, result.output
    assert plain(result.stderr) == ["step 1  model  Xs  ok  215 in + 44 out tokens (estimated)",
                                    "step 1  tool calculate  Xs  ok",
                                    "step 2  model  Xs  ok  281 in + 44 out tokens (estimated)",
                                    "step 2  tool convert_currency  Xs  ok",
                                    "step 3  model  Xs  ok  375 in + 48 out tokens (estimated)"]
    assert "step 1" not in result.stdout


def test_quiet_silences_the_progress_lines(tmp_path: Path) -> None:
    result = invoke("demo", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_run_shows_tool_errors_and_refusals(tmp_path: Path) -> None:
    with FakeOpenAI(completion("", [("c1", "get_weather", {"city": "Atlantis"}), ("c2", "get_forecast", {})]),
                    completion("Unknown.")) as server:
        result = invoke("run", "Weather?", "--tools", "tests.loop.helpers:weather_registry", "--model",
                        "openai:fake", "--base-url", server.url, "--api-key", "k", "--db",
                        f"sqlite:///{tmp_path / 'runs.db'}", "--json")
    assert result.exit_code == 0, result.output
    # The reply's calls run together: the refusal is decided before get_weather has run, and printed first.
    assert plain(result.stderr) == ["step 1  model  Xs  ok  10 in + 5 out tokens",
                                    "step 1  tool get_forecast  refused (unknown_tool)",
                                    "step 1  tool get_weather  Xs  error",
                                    "step 2  model  Xs  ok  10 in + 5 out tokens"]


def test_the_progress_recorder_plugs_into_run_agent_plain_when_piped_styled_on_a_terminal() -> None:
    piped, tty = io.StringIO(), io.StringIO()

    def broken(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down\x1b[2J")

    for out, terminal in ((piped, False), (tty, True)):
        recorder = ProgressRecorder(Console(file=out, force_terminal=terminal, width=200))
        model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))])
        run_agent("Weather?", model, weather_registry(), max_steps=1, recorder=recorder)
        run_agent("Hi", broken, weather_registry(), recorder=recorder)
    assert plain(piped.getvalue()) == ["step 1  model  Xs  ok  126 in + 29 out tokens (estimated)",
                                       "step 1  tool get_weather  Xs  ok",
                                       "step 1  model  Xs  error: ConnectionError: api down"]
    assert "\x1b[32mok\x1b[0m" in tty.getvalue()
    assert "\x1b[2J" not in tty.getvalue()


def test_any_recorder_sees_every_fact_in_order() -> None:
    seen: list[Event] = []

    class Collect:
        def record(self, event: Event) -> None:
            seen.append(event)

        def sync(self) -> None:
            pass

    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21C."])
    run_agent("Weather?", model, weather_registry(), recorder=Collect())
    finished = [event for event in seen if isinstance(event, ToolFinished)]
    assert [(event.name, event.ok, event.observation) for event in finished] == [
        ("get_weather", True, '{"celsius": 21}')]


@pytest.mark.parametrize("quiet", [False, True])
def test_resume_and_fork_print_progress_lines_unless_quiet(tmp_path: Path, quiet: bool) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    tools = "tests.loop.helpers:weather_registry"
    with FakeOpenAI(completion("", [("c1", "get_weather", {"city": "Paris"})]), completion("Warm."),
                    completion("", [("c2", "get_weather", {"city": "Oslo"})]), completion("Cold."),
                    completion("Mild.")) as server:
        model = ("--model", "openai:fake", "--base-url", server.url, "--api-key", "k", "--db", db)
        first = invoke("run", "Weather?", "--tools", tools, "--max-steps", "1", *model, "--quiet")
        assert first.exit_code == 1, first.output  # stopped on the step limit, with its tool answered
        found = re.search(r"^run id: ([0-9a-f]{32})$", first.stdout, re.M)
        assert found is not None, first.output
        run_id = found[1]
        flags = ("--quiet",) if quiet else ()
        resumed = invoke("resume", run_id[:8], "--tools", tools, "--max-steps", "3", *model, *flags)
        forked = invoke("fork", run_id[:8], "--at", "1", "--tools", tools, *model, *flags)
    assert (resumed.exit_code, forked.exit_code) == (0, 0), resumed.output + forked.output
    if quiet:
        assert (resumed.stderr, forked.stderr) == ("", "")
    else:
        assert plain(resumed.stderr) == ["step 2  model  Xs  ok  10 in + 5 out tokens"]
        assert plain(forked.stderr) == ["step 1  model  Xs  ok  10 in + 5 out tokens",
                                        "step 1  tool get_weather  Xs  ok",
                                        "step 2  model  Xs  ok  10 in + 5 out tokens"]


@pytest.mark.process
def test_progress_lines_do_not_load_the_cli() -> None:
    import subprocess
    import sys

    code = ("import sys; from runner.events import ModelCalled; from runner.progress import progress_line; "
            "print(progress_line(ModelCalled(step=1, prompt_tokens=1, error='x\\x1b[31m')).plain); "
            "print(*[m for m in sys.modules if m.startswith('runner.cli')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["step 1  model  0.00s  error: x", ""]  # cleaned, and no runner.cli module


def model_tokens(progress: str, shown: str) -> tuple[list[str], list[str]]:
    """The token part of each model call's progress line, and of its line in ``runner show``."""
    said = [line.split("  ok  ", 1)[1] for line in plain(progress) if "  model  " in line]
    listed = [line.split(", ", 1)[1] for line in shown.splitlines() if line.startswith("  model  ")]
    return said, listed


def test_progress_and_show_give_the_providers_token_count_when_it_reported_one(store_url: str) -> None:
    with FakeOpenAI(completion("", [("c1", "get_weather", {"city": "Paris"})]), completion("Warm.")) as server:
        ran = invoke("run", "Weather?", "--tools", "tests.loop.helpers:weather_registry", "--model", "openai:fake",
                     "--base-url", server.url, "--api-key", "k", "--db", store_url, "--json")
    assert ran.exit_code == 0, ran.output
    shown = invoke("show", json.loads(ran.stdout)["run_id"], "--db", store_url)
    said, listed = model_tokens(ran.stderr, shown.stdout)
    assert said == listed == ["10 in + 5 out tokens"] * 2  # the fake server's usage, not the estimate


def test_progress_and_show_mark_an_estimate_alike(store_url: str) -> None:
    ran = invoke("demo", "--db", store_url, "--json")
    assert ran.exit_code == 0, ran.output
    shown = invoke("show", json.loads(ran.stdout)["run_id"], "--db", store_url)
    said, listed = model_tokens(ran.stderr, shown.stdout)
    assert said == listed == ["215 in + 44 out tokens (estimated)", "281 in + 44 out tokens (estimated)",
                              "375 in + 48 out tokens (estimated)"]
    steps = [line for line in shown.stdout.splitlines() if line.startswith("step ")]
    assert [line.split(", ", 1)[1] for line in steps] == ["259 tokens (estimated)", "325 tokens (estimated)",
                                                          "423 tokens (estimated)"]
