"""``runner resume`` and approvals: decisions logged with who made them, refusals in one line, a pool
run's decision sent back to its pool, and a registry that disagrees with the log reported.

The CLI runs in this process (click's ``CliRunner``) against a SQLite file and PostgreSQL;
a pool run is taken by the worker's task body directly (``take``), and the broker is an
address nothing listens on. The real worker pool is ``tests/pool/test_workers.py``'s.
"""

from __future__ import annotations

import getpass
import json
import shlex
from collections.abc import Iterator

import pytest

from runner import open_store
from runner._loop.observations import IN_DOUBT
from runner.pool.queued import record_queued
from runner.pool.take import take
from tests.cli import resume_tools
from tests.cli.helpers import (
    RESUME_TOOLS,
    FakeOpenAI,
    at,
    awaiting,
    completion,
    invoke,
    lines,
    one_error_line,
    record_dead_inside_pay,
)
from tests.pool import agents

TOOLS = RESUME_TOOLS
NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB", "RUNNER_BROKER_URL", "POOL_LEDGER_URL", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("POOL_NAP_S", "0.01")
    resume_tools.RAN.clear()
    yield
    resume_tools.RAN.clear()


def decided(url: str, run_id: str) -> list[dict[str, object]]:
    with open_store(url) as store:
        return [e.data for e in store.get_run(run_id).events if e.kind == "approval_decided"]


def test_resume_without_a_decision_of_a_run_awaiting_approval_is_refused_and_writes_nothing(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}), ("t2", "transfer", {"ref": "b"}))
    with open_store(store_url) as store:
        before = store.get_run(run_id).events
    result = invoke("resume", run_id[:8], "--tools", TOOLS, "--api-key", "k", "--db", store_url)
    assert result.exit_code == 3
    assert one_error_line(result) == (f"Error: run {run_id[:8]} is awaiting approval of t1, t2 and no decision "
                                      "was given or logged: nothing to resume (--approve or --deny decides)")
    with open_store(store_url) as store:
        assert store.get_run(run_id).events == before


def test_decisions_are_logged_with_who_made_them_and_shown(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}), ("t2", "transfer", {"ref": "b"}))
    with FakeOpenAI(completion("Sent one.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--approve", "t1", "--deny", "t2", "--reason",
                        "over the limit", "--by", "alice", *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert decided(store_url, run_id) == [
        {"call_id": "t1", "approved": True, "reason": None, "decided_by": "alice"},
        {"call_id": "t2", "approved": False, "reason": "over the limit", "decided_by": "alice"}]
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    assert [line for line in shown if line.startswith("  decision: ")] == [
        "  decision: t1 approved by alice", "  decision: t2 denied (over the limit) by alice"]


def test_show_prints_a_decision_and_how_the_decided_run_goes_on(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    with open_store(store_url) as store:
        store.decide(run_id, "t1", False, reason="not today", decided_by="alice")
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    assert shown[-4:] == [
        "stopped: awaiting_approval", "  call t1 (transfer) needs approval",
        "  decision: t1 denied (not today) by alice",
        f"  runner resume {run_id[:8]} --tools {TOOLS} --db {shlex.quote(store_url)}   # goes on with the logged "
        "decisions"]


def test_a_decision_says_by_default_that_the_os_user_made_it(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    with FakeOpenAI(completion("Sent.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--approve", "t1", *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert decided(store_url, run_id) == [
        {"call_id": "t1", "approved": True, "reason": None, "decided_by": getpass.getuser()}]


def test_a_decision_against_a_logged_one_is_refused_and_the_same_one_goes_on(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    with open_store(store_url) as store:
        store.decide(run_id, "t1", False, decided_by="alice")
        before = store.get_run(run_id).events
    refused = invoke("resume", run_id[:8], "--tools", TOOLS, "--approve", "t1", "--api-key", "k", "--db", store_url)
    assert refused.exit_code == 3
    assert one_error_line(refused) == (f"Error: run {run_id[:8]}: call 't1' was denied by alice; it cannot be "
                                       "approved now")
    with open_store(store_url) as store:
        assert store.get_run(run_id).events == before
    with FakeOpenAI(completion("Not sent.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--deny", "t1", *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert (len(decided(store_url, run_id)), resume_tools.RAN) == (1, [])


def pool_run_awaiting(url: str) -> str:
    with open_store(url) as store:
        run_id = record_queued(store, "rent", "approver")
        assert take(store, run_id, agents.with_approver) == "awaiting_approval"
    return run_id


def test_a_pool_runs_decision_is_logged_and_sent_back_to_its_queue_without_tools_or_a_model(store_url: str) -> None:
    run_id = pool_run_awaiting(store_url)
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    assert shown[-3:-1] == ["awaiting approval: transfer-1 (transfer)",  # no --tools: its workers have them
                            f"  runner resume {run_id[:8]} --approve transfer-1 --db {shlex.quote(store_url)}"]
    result = invoke("resume", run_id[:8], "--approve", "transfer-1", "--by", "alice", "--broker", NOWHERE,
                    "--db", store_url)
    assert result.exit_code == 3
    assert one_error_line(result).startswith(
        f"Error: run {run_id[:8]}: the decision is logged, but the broker did not take the run (")
    assert one_error_line(result).endswith(f"); runner resume {run_id[:8]} publishes it again")
    assert decided(store_url, run_id) == [
        {"call_id": "transfer-1", "approved": True, "reason": None, "decided_by": "alice"}]
    again = invoke("resume", run_id[:8], "--approve", "transfer-1", "--broker", NOWHERE, "--db", store_url,
                   "--json")  # the same decision: nothing new is logged
    assert again.exit_code == 3
    assert len(decided(store_url, run_id)) == 1
    with open_store(store_url) as store:
        assert store.get_run(run_id).status == "awaiting_approval"


def test_here_resumes_a_pool_run_in_this_process(store_url: str) -> None:
    run_id = pool_run_awaiting(store_url)
    with FakeOpenAI(completion("Sent here.")) as server:
        result = invoke("resume", run_id[:8], "--approve", "transfer-1", "--here", "--tools",
                        "tests.pool.agents:approver_registry", "--model", "openai:fake", *at(server),
                        "--db", store_url, "--json")
    assert result.exit_code == 0, result.output
    assert (json.loads(result.stdout)["status"], json.loads(result.stdout)["answer"]) == ("done", "Sent here.")


def test_resume_of_a_run_not_from_a_pool_still_needs_its_tools(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    result = invoke("resume", run_id[:8], "--approve", "t1", "--db", store_url)
    assert result.exit_code == 2
    assert one_error_line(result) == ("Error: Missing option '--tools', '--mcp' or '--mcp-url' (a run not submitted "
                                      "to a pool, or --here).")


@pytest.mark.process
def test_a_registry_that_disagrees_with_the_log_is_reported_and_the_log_holds(store_url: str) -> None:
    run_id = "d" * 32
    record_dead_inside_pay(store_url, run_id, traits=True)
    with FakeOpenAI(completion("I cannot tell whether x was paid.")) as server:
        result = invoke("resume", "dddd", "--tools", "tests.cli.resume_tools:forgetful", *at(server),
                        "--db", store_url)
    assert result.exit_code == 0, result.output
    assert resume_tools.RAN == []
    assert server.requests[0]["messages"][-1] == {"role": "tool", "tool_call_id": "p1", "content": IN_DOUBT}
    assert [line for line in result.stderr.splitlines() if line.startswith("warning: ")] == [
        f"warning: run {run_id}: tool 'pay' differs from the log's record: side_effects True in the log, False "
        "now (calls already started are judged by the more careful of the two)"]
