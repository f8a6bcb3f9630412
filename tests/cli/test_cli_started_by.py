"""Who started a run: ``runner run --by`` (default the OS user) is logged in ``run_started`` as ``by``.

``runner show`` names the person, ``--json`` carries the field, the console's liveness line names them
while the run is live, and a fork or follow-up logs whoever made it. An older log has none and still reads.
"""

from __future__ import annotations

import json

import pytest

from runner import ScriptedModel, follow_up, fork, open_store, run_agent
from runner._log.decisions import decider
from runner.events import EventDecodeError, RunStarted, decode, encode
from tests.cli.helpers import RESUME_TOOLS, FakeOpenAI, at, completion, invoke, lines, run_id_in
from tests.loop.helpers import weather_registry


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def started(store_url: str, run_id: str) -> RunStarted:
    with open_store(store_url) as store:
        (fact,) = [f for f in store.get_run(run_id).facts if isinstance(f, RunStarted)]
    return fact


def test_run_by_logs_the_person_and_show_and_json_name_them(store_url: str) -> None:
    with FakeOpenAI(completion("Done.")) as server:
        result = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                        "--by", "bob", "--db", store_url)
    assert result.exit_code == 0, result.output
    run_id = run_id_in(result)
    assert started(store_url, run_id).by == "bob"
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    assert any(line.startswith("model fake (openai), started by bob; trace ") for line in shown), shown
    printed = json.loads(invoke("show", run_id[:8], "--db", store_url, "--json").stdout)
    (data,) = [e["data"] for e in printed["events"] if e["kind"] == "run_started"]
    assert data["by"] == "bob"


def test_run_without_by_logs_the_os_user_and_a_blank_by_is_refused(store_url: str) -> None:
    with FakeOpenAI(completion("Done.")) as server:
        result = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                        "--db", store_url)
        assert result.exit_code == 0, result.output
        assert started(store_url, run_id_in(result)).by == decider()
        blank = invoke("run", "Say done", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                       "--by", " ", "--db", store_url)
    assert blank.exit_code == 2
    assert "--by" in blank.output


def test_python_runs_forks_and_follow_ups_log_who_made_them(store_url: str) -> None:
    with open_store(store_url) as store:
        first = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store, decided_by="carol")
        forked = fork(store, first.run_id, at_step=1, model=ScriptedModel(["again"]), registry=weather_registry(),
                      decided_by="dave")
        followed = follow_up(store, first.run_id, "And?", ScriptedModel(["more"]), weather_registry())
        by = {result.run_id: next(f.by for f in store.get_run(result.run_id).facts if isinstance(f, RunStarted))
              for result in (first, forked, followed)}
    assert by == {first.run_id: "carol", forked.run_id: "dave", followed.run_id: decider()}


def test_an_older_run_started_without_by_reads_and_a_by_that_is_not_text_does_not() -> None:
    fact = RunStarted(task="t", system="s", limits={}, tool_specs=[], model="m")
    kind, data = encode(fact)
    assert "by" not in data  # written only when set: a log from before it reads the same
    assert decode(kind, data) == fact
    with pytest.raises(EventDecodeError, match="by must be a string"):
        decode(kind, {**data, "by": 3})
