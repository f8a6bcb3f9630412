"""``runner demo --subagents``: a planner, its researcher and its mailer, stopped while the mail waits;
the printed ``--approve`` (or ``--deny``) command logs the decision and takes the whole tree to its end."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from runner.events import ApprovalDecided, RunStarted, ToolFinished
from runner.store import StoredRun, open_store
from tests.cli.helpers import invoke, one_error_line
from tests.tracing.helpers import Receiver

ANSWER = "Each person pays $40.62 (EUR 37.61); the team has it by mail (team@example.com)."


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def tree_of(url: str, run_id: str) -> dict[str, StoredRun]:
    """The planner's run and its sub-agents' runs, by agent name."""
    with open_store(url) as store:
        runs = {"planner": store.get_run(run_id)}
        runs.update({child.agent_name or "": store.get_run(child.run_id) for child in store.children(run_id)})
    return runs


def started(run: StoredRun) -> RunStarted:
    return next(f for f in run.facts if isinstance(f, RunStarted))


def mail_calls(run: StoredRun) -> list[ToolFinished]:
    return [f for f in run.facts if isinstance(f, ToolFinished) and f.name == "send_mail"]


def start(url: str) -> tuple[str, list[str]]:
    """Run the demo; its planner's run id and its stdout's lines."""
    result = invoke("demo", "--subagents", "--db", url, "--quiet")
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[2].startswith("run id: ")
    return out[2].removeprefix("run id: "), out


def test_the_demo_stops_with_the_mail_waiting_and_shows_the_tree_and_the_commands_that_decide(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_id, out = start(url)
    runs = tree_of(url, run_id)
    assert {name: run.status for name, run in runs.items()} == {
        "planner": "awaiting_approval", "researcher": "done", "mailer": "awaiting_approval"}
    short = {name: run.run_id[:8] for name, run in runs.items()}
    assert out[0] == (f"stopped: awaiting_approval: call call_2 (mailer) waits on sub-agent run "
                      f"{runs['mailer'].run_id}: call mail_1 (send_mail) needs approval")
    assert out[3] == "status awaiting_approval, 2 steps, 2 tool calls, 690 tokens"
    tree_at = out.index("runs:")
    assert out[tree_at:tree_at + 5] == [
        "runs:",
        f"  planner  awaiting_approval  run {short['planner']}",
        f"  ├── researcher  done  run {short['researcher']}  (call call_1)",
        f"  └── mailer  awaiting_approval  run {short['mailer']}  (call call_2)",
        "        awaiting approval: mail_1 (send_mail)"]
    next_at = out.index("next, try:")
    assert out[next_at + 1:next_at + 3] == [
        f"  runner demo --subagents --resume {short['planner']} --approve mail_1 --db {url}",
        f"  runner demo --subagents --resume {short['planner']} --deny mail_1 --db {url}"]
    assert f"  runner show {short['mailer']} --db {url}" in out
    assert runs["researcher"].answer is not None
    assert runs["researcher"].answer.startswith("Each person pays $40.62")
    assert [(started(run).origin, started(run).parent_call_id) for run in (runs["researcher"], runs["mailer"])] == [
        ("subagent", "call_1"), ("subagent", "call_2")]
    assert mail_calls(runs["mailer"]) == []  # nothing sent before a person says so


def test_the_printed_approve_command_sends_the_mail_and_ends_the_whole_tree_done(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_id, out = start(url)
    approve = next(line.strip() for line in out if "--approve" in line)
    result = invoke(*shlex.split(approve)[1:], "--quiet")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ANSWER
    assert lines[lines.index("runs:") + 1:lines.index("runs:") + 4] == [
        f"  planner  done  run {run_id[:8]}",
        f"  ├── researcher  done  run {tree_of(url, run_id)['researcher'].run_id[:8]}  (call call_1)",
        f"  └── mailer  done  run {tree_of(url, run_id)['mailer'].run_id[:8]}  (call call_2)"]
    assert not any("--approve" in line for line in lines)
    runs = tree_of(url, run_id)
    assert {name: run.status for name, run in runs.items()} == dict.fromkeys(("planner", "researcher", "mailer"),
                                                                              "done")
    (sent,) = mail_calls(runs["mailer"])
    assert (sent.ok, sent.ran) == (True, True)
    assert json.loads(sent.observation)["queued_for"] == "team@example.com"
    (decided,) = [f for f in runs["mailer"].facts if isinstance(f, ApprovalDecided)]
    assert (decided.call_id, decided.approved) == ("mail_1", True)
    assert runs["mailer"].answer == "Sent to team@example.com."

    again = invoke(*shlex.split(approve)[1:])
    assert again.exit_code == 3
    assert one_error_line(again) == f"Error: no call mail_1 awaits approval under run {run_id} (awaiting: none)"


def test_the_deny_command_sends_nothing_and_the_planner_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_id, out = start(url)
    deny = next(line.strip() for line in out if "--deny" in line)
    result = invoke(*shlex.split(deny)[1:], "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("Each person pays $40.62 (EUR 37.61), but the team was not "
                                                    "mailed. Not sent: the call to send_mail was denied")
    runs = tree_of(url, run_id)
    (refused,) = mail_calls(runs["mailer"])
    assert (refused.ok, refused.ran) == (False, False)
    assert runs["planner"].status == "done"


def test_the_demo_as_json_lists_the_tree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    found = json.loads(invoke("demo", "--subagents", "--db", url, "--json", "--quiet").stdout)
    assert found["status"] == "awaiting_approval"
    assert [(r["agent_name"], r["depth"], r["parent_call_id"], r["status"], r["awaiting_approval"])
            for r in found["runs"]] == [("planner", 0, None, "awaiting_approval", []),
                                        ("researcher", 1, "call_1", "done", []),
                                        ("mailer", 1, "call_2", "awaiting_approval", ["mail_1"])]
    assert found["runs"][0]["run_id"] == found["run_id"]


def test_the_demo_traces_the_tree_live_as_one_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = Receiver()
    receiver.thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        url = f"sqlite:///{tmp_path / 'demo.db'}"
        run_id, _ = start(url)
        spans = receiver.spans()
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    runs = tree_of(url, run_id)
    assert {s["trace_id"] for s in spans} == {runs["planner"].trace_id}
    by_id = {s["span_id"]: s for s in spans}
    for name in ("researcher", "mailer"):
        (root,) = [s for s in spans if s["name"] == f"invoke_agent {name}"]
        call = by_id[root["parent"]]
        assert (call["name"], call["attrs"]["gen_ai.transfer.target.name"]) == (f"execute_tool {name}", name)
        assert call["attrs"]["runner.child_run_id"] == root["attrs"]["runner.run_id"] == runs[name].run_id
        assert by_id[call["parent"]]["attrs"]["runner.run_id"] == run_id


@pytest.mark.parametrize(("args", "message"), [
    (["--approve", "mail_1"], "--resume, --approve and --deny go with --subagents"),
    (["--subagents", "--typed"], "--subagents runs on the demo's scripted models: leave out --model and --typed"),
    (["--subagents", "--deny", "mail_1"], "--approve and --deny decide on a run: give it with --resume RUN"),
    (["--subagents", "--resume", "x", "--approve", "m", "--deny", "m"], "call 'm' is both approved and denied"),
])
def test_options_that_do_not_go_together_are_one_usage_line(tmp_path: Path, args: list[str], message: str) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = invoke("demo", *args, "--db", url)
    assert result.exit_code == 2
    assert one_error_line(result) == f"Error: {message}"
    assert not (tmp_path / "demo.db").exists()


def test_resume_names_only_a_planner_of_the_demo(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_id, _ = start(url)
    mailer = tree_of(url, run_id)["mailer"].run_id
    plain = json.loads(invoke("demo", "--db", url, "--json", "--quiet").stdout)["run_id"]
    for other in (mailer, plain):
        result = invoke("demo", "--subagents", "--resume", other, "--approve", "mail_1", "--db", url)
        assert result.exit_code == 2
        assert one_error_line(result) == f"Error: run {other} is not the planner of a `runner demo --subagents` run"
