"""``runner run --agent-name NAME``: logged in ``run_started``, the root span ``invoke_agent NAME``.

A resume, a fork, a follow-up and a rerun keep the stored name (a follow-up may name another); a blank name,
one with a control or invisible character, or one longer than the store's name column is one usage error line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import open_store
from runner.events import RunStarted
from runner.tracing.attrs import AGENT_NAME, OI_AGENT_NAME
from tests.cli.helpers import RESUME_TOOLS, FakeOpenAI, at, completion, invoke, one_error_line, run_id_in

LOOKUP = completion("", [("c1", "lookup", {"ref": "a"})])


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def spans(live: tuple[TracerProvider, InMemorySpanExporter],
          monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The spans of every run the CLI records or reruns in the test, on an injected provider."""
    provider, exporter = live
    monkeypatch.setattr("runner.cli.runs.tracer_provider", lambda *_: (provider, lambda: None))
    monkeypatch.setattr("runner.cli.rerun.tracer_provider", lambda *_: (provider, lambda: None))
    return exporter


def started(url: str, run_id: str) -> RunStarted:
    with open_store(url) as store:
        (fact,) = [f for f in store.get_run(run_id).facts if isinstance(f, RunStarted)]
    return fact


def roots(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The root spans (a resumed part's too), in the order they ended."""
    return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("openinference.span.kind") == "AGENT"]


def test_the_name_is_logged_shown_and_names_the_root_span(store_url: str, spans: InMemorySpanExporter) -> None:
    with FakeOpenAI(completion("Done."), completion("Done.")) as server:
        named = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                       "--agent-name", "billing bot", "--db", store_url, "--json")
        plain = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                       "--db", store_url, "--json")
    assert (named.exit_code, plain.exit_code) == (0, 0), named.output + plain.output
    named_id, plain_id = json.loads(named.stdout)["run_id"], json.loads(plain.stdout)["run_id"]
    assert (started(store_url, named_id).agent_name, started(store_url, plain_id).agent_name) == ("billing bot", None)
    shown = json.loads(invoke("show", named_id[:8], "--json", "--db", store_url).stdout)
    assert shown["run"]["agent_name"] == "billing bot"
    first, second = roots(spans)
    assert (first.name, second.name) == ("invoke_agent billing bot", "invoke_agent")
    assert first.attributes is not None
    assert (first.attributes[AGENT_NAME], first.attributes[OI_AGENT_NAME]) == ("billing bot", "billing bot")


def test_resume_fork_follow_up_and_rerun_keep_the_name(store_url: str, spans: InMemorySpanExporter) -> None:
    with FakeOpenAI(LOOKUP, completion("Found it."), completion("Again."), completion("More."),
                    completion("Other."), completion("Rerun.")) as server:
        first = invoke("run", "Look a up", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                       "--max-steps", "1", "--agent-name", "clerk", "--db", store_url)
        assert first.exit_code == 1, first.output  # step_limit
        run_id = run_id_in(first)
        resumed = invoke("resume", run_id[:8], "--tools", RESUME_TOOLS, "--max-steps", "3", *at(server),
                         "--db", store_url)
        forked = invoke("fork", run_id[:8], "--at", "1", "--tools", RESUME_TOOLS, *at(server), "--db", store_url)
        followed = invoke("run", "And b?", "--follow-up", run_id[:8], "--tools", RESUME_TOOLS, *at(server),
                          "--db", store_url)
        renamed = invoke("run", "And c?", "--follow-up", run_id[:8], "--tools", RESUME_TOOLS, *at(server),
                         "--agent-name", "auditor", "--db", store_url)
        rerun = invoke("rerun", run_id, "--model", "openai:fake", *at(server), "--json", "--quiet",
                       "--db", store_url)
    for result in (resumed, forked, followed, renamed):
        assert result.exit_code == 0, result.output
    assert rerun.exit_code in (0, 1), rerun.output  # a changed answer may read as a regression
    ((candidate,),) = [case["candidate_run_ids"] for case in json.loads(rerun.stdout)["cases"]]
    named = {started(store_url, i).agent_name
             for i in (run_id, run_id_in(forked), run_id_in(followed), candidate)}
    assert named == {"clerk"}
    assert started(store_url, run_id_in(renamed)).agent_name == "auditor"
    names = [span.name for span in roots(spans)]
    # the run, its resumed part, the fork, the follow-up; the renamed follow-up; the rerun's candidate
    assert names == ["invoke_agent clerk", "invoke_agent clerk (resumed: step_limit)",
                     "invoke_agent clerk (fork at step 1)", "invoke_agent clerk", "invoke_agent auditor",
                     "invoke_agent clerk"]


@pytest.mark.parametrize(("name", "problem"), [
    ("", "the name is blank"),
    ("   ", "the name is blank"),
    ("a\tb", "'a\\tb' holds a control or invisible character"),
    ("red\x1b[31m", "'red\\x1b[31m' holds a control or invisible character"),
    ("ech\u200bo", "'ech\\u200bo' holds a control or invisible character"),
    ("x" * 201, "the name is 201 characters long"),
])
def test_a_bad_name_is_one_usage_error_line_and_records_nothing(tmp_path: Path, name: str, problem: str) -> None:
    db = tmp_path / "runs.db"
    result = invoke("run", "Hi", "--tools", RESUME_TOOLS, "--model", "openai:fake", "--base-url",
                    "http://127.0.0.1:9/v1", "--api-key", "k", "--agent-name", name, "--db", f"sqlite:///{db}")
    assert result.exit_code == 2
    assert one_error_line(result) == (f"Error: Invalid value for '--agent-name': {problem}: a name is 1 to 200 "
                                      "printable characters (see 'runner run --help')")
    assert not db.exists()


def test_a_name_of_200_characters_is_taken_whole(store_url: str) -> None:
    name = "é" * 200
    with FakeOpenAI(completion("Done.")) as server:
        result = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                        "--agent-name", name, "--db", store_url, "--json")
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    with open_store(store_url) as store:
        assert store.get_run(run_id).agent_name == name
