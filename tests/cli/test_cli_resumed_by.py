"""Who resumed a run: ``runner resume --by`` (default the OS user) is logged in ``run_resumed`` as ``by``.

``runner show`` prints the person; ``--json`` keeps the process (``owner``) and adds the person. An older log,
written before ``by``, shows the process it names.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import ScriptedModel, open_store, resume, run_agent
from runner.events import EventDecodeError, RunResumed, decode
from tests.cli import resume_tools
from tests.cli.helpers import RESUME_TOOLS, FakeOpenAI, at, awaiting, completion, invoke, lines
from tests.loop.helpers import call, reply
from tests.ui.money import money


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    resume_tools.RAN.clear()
    yield
    resume_tools.RAN.clear()


def resumed_by(store_url: str, *by: str) -> tuple[str, RunResumed]:
    """A run awaiting approval, approved and resumed by ``runner resume`` (with ``by``): its id and ``run_resumed``."""
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    with FakeOpenAI(completion("Sent.")) as server:
        result = invoke("resume", run_id[:8], "--tools", RESUME_TOOLS, "--approve", "t1", *by, *at(server),
                        "--db", store_url)
    assert result.exit_code == 0, result.output
    with open_store(store_url) as store:
        facts = store.get_run(run_id).facts
    (fact,) = [f for f in facts if isinstance(f, RunResumed)]
    return run_id, fact


def test_resume_by_logs_the_person_show_prints_them_and_json_keeps_the_process(store_url: str) -> None:
    run_id, fact = resumed_by(store_url, "--by", "alice")
    assert fact.by == "alice"
    assert fact.owner.startswith(f"{socket.gethostname()}:")
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    resumed = shown.index("resumed after awaiting_approval")
    assert shown[resumed + 1] == "  by alice with model fake (openai)"
    assert not any(fact.owner in line for line in shown)  # the process is --json's
    printed = json.loads(invoke("show", run_id[:8], "--db", store_url, "--json").stdout)
    (data,) = [e["data"] for e in printed["events"] if e["kind"] == "run_resumed"]
    assert (data["by"], data["owner"]) == ("alice", fact.owner)


def test_resume_without_by_logs_the_os_user(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "carol")  # getpass.getuser() reads it first
    run_id, fact = resumed_by(store_url)
    assert fact.by == "carol"
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    assert shown[shown.index("resumed after awaiting_approval") + 1] == "  by carol with model fake (openai)"


def test_an_older_log_without_by_reads_and_shows_the_process(store_url: str) -> None:
    ran: list[str] = []
    with tempfile.TemporaryDirectory() as folder, open_store(f"sqlite:///{Path(folder) / 'old.db'}") as scratch:
        asked = run_agent("Send 5 to bob", ScriptedModel([reply("", call("t1", "transfer", ref="bob"))]),
                          money(ran), store=scratch)
        resume(scratch, asked.run_id, ScriptedModel(["Sent."]), money(ran), decisions={"t1": True})
        facts = scratch.get_run(asked.run_id).facts
    with open_store(store_url) as store:
        recorder = store.recorder()
        for fact in facts:  # as a runner from before ``by`` logged them
            recorder.record(dataclasses.replace(fact, by=None) if isinstance(fact, RunResumed) else fact)
        recorder.sync()
        (old,) = [f for f in store.get_run(asked.run_id).facts if isinstance(f, RunResumed)]
    assert old.by is None
    printed = json.loads(invoke("show", asked.run_id[:8], "--db", store_url, "--json").stdout)
    assert [e["data"].get("by", "absent") for e in printed["events"] if e["kind"] == "run_resumed"] == ["absent"]
    shown = lines(invoke("show", asked.run_id[:8], "--db", store_url))
    by_line = shown[shown.index("resumed after awaiting_approval") + 1]
    assert by_line == f"  by process {old.owner} with model scripted (scripted)"


@pytest.mark.parametrize("by", [5, ["alice"], {"name": "alice"}])
def test_a_logged_by_that_is_not_text_is_a_one_line_decode_error(by: object) -> None:
    data = {"owner": "h:1", "reason": "awaiting_approval", "limits": {}, "by": by}
    with pytest.raises(EventDecodeError, match=r"^run_resumed event is malformed: by must be a string$"):
        decode("run_resumed", data)
