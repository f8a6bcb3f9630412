"""The console in-process (Starlette's TestClient) over a real store: its API is the CLI's JSON, and its
actions log decisions and go on with runs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from runner import ScriptedModel, ToolRegistry, run_agent
from runner._tools.doubt import doubt_rule
from runner.events import ApprovalDecided, ToolFinished
from runner.store import RunStore, open_store
from runner.ui import create_app
from tests.cli.helpers import fill, invoke
from tests.loop.helpers import call, reply
from tests.ui.money import money


def awaiting(store: RunStore, run_id: str = "a" * 32, ran: list[str] | None = None) -> str:
    """A run whose model asks for ``transfer``: it stops awaiting approval."""
    result = run_agent("Send 5 to bob", ScriptedModel([reply("", call("t1", "transfer", ref="bob"))]),
                       money(ran if ran is not None else []), store=store, run_id=run_id)
    assert result.status == "awaiting_approval"
    return run_id


def until_done(store: RunStore, run_id: str, timeout_s: float = 20.0) -> str:
    """The run's status once the console's background thread has finished it (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    status = store.get_run(run_id).status
    while status in ("running", "awaiting_approval", "step_limit") and time.monotonic() < deadline:
        time.sleep(0.05)
        status = store.get_run(run_id).status
    return status


@pytest.fixture
def client(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_app(store), base_url="http://127.0.0.1:8000") as test_client:
        yield test_client


def test_api_runs_is_what_runs_json_prints_with_the_same_filters(store_url: str) -> None:
    fill(store_url)
    with open_store(store_url) as store, TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        for query, options in [("", []), ("?status=done&label=env=prod", ["--status", "done", "--label", "env=prod"]),
                               ("?tool=get_weather", ["--tool", "get_weather"]),
                               ("?search=hello", ["--search", "hello"]), ("?limit=2", ["--limit", "2"])]:
            printed = json.loads(invoke("runs", "--json", "--db", store_url, *options).stdout)
            served = client.get(f"/api/runs{query}")
            assert served.status_code == 200
            assert served.json() == printed, query
        assert len(client.get("/api/runs").json()) == 5


def test_api_run_is_what_show_json_prints(store_url: str) -> None:
    fill(store_url)
    with open_store(store_url) as store, TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        run_id = store.list_runs(limit=1)[0].run_id
        printed = json.loads(invoke("show", run_id, "--json", "--db", store_url).stdout)
        assert client.get(f"/api/runs/{run_id}").json() == printed
        assert client.get(f"/api/runs/{run_id[:10]}").json() == printed  # a unique prefix, as the CLI takes


def test_unknown_and_bad_filters_are_one_line_errors(client: TestClient) -> None:
    assert client.get("/api/runs/nope").status_code == 404
    assert "no run 'nope'" in client.get("/api/runs/nope").json()["error"]
    bad = client.get("/api/runs?status=finished")
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("status must be one of")
    assert client.get("/?since=yesterday-ish").status_code == 400
    assert client.get("/?limit=0").status_code == 400


def test_approve_through_the_api_logs_the_decision_then_the_console_finishes_the_run(store: RunStore) -> None:
    ran: list[str] = []
    run_id = awaiting(store, ran=ran)
    model = ScriptedModel(["Sent."])
    app = create_app(store, registry=money(ran), model=model, decided_by="alice")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["outcome"] == "continued"
        assert answer.json()["decided_by"] == "alice"
        assert until_done(store, run_id) == "done"
    run = store.get_run(run_id)
    decided = [f for f in run.facts if isinstance(f, ApprovalDecided)]
    assert [(d.call_id, d.approved, d.decided_by) for d in decided] == [("t1", True, "alice")]
    assert ran == ["bob"]
    assert run.answer == "Sent."


def test_deny_with_a_reason_from_the_inbox_form_is_what_the_model_reads(store: RunStore) -> None:
    ran: list[str] = []
    run_id = awaiting(store, ran=ran)
    model = ScriptedModel(["I did not send it."])
    app = create_app(store, registry=money(ran), model=model, decided_by="bob")
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        page = client.get("/approvals")
        assert f'data-run-id="{run_id}" data-call-id="t1"' in page.text
        answer = client.post(f"/runs/{run_id}/decide", data={"call_id": "t1", "verdict": "deny", "reason": "too much"},
                             headers={"Origin": "http://127.0.0.1:8000"}, follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/approvals?note=")
        assert until_done(store, run_id) == "done"
        assert "the console continues the run" in client.get(answer.headers["location"]).text
    assert ran == []
    shown = model.seen[0][-1]
    assert shown["role"] == "tool"
    assert "too much" in shown["content"]


def test_without_tools_the_decision_is_recorded_and_the_command_shown(store: RunStore, client: TestClient) -> None:
    run_id = awaiting(store)
    answer = client.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": "no"}}).json()
    assert answer["outcome"] == "recorded"
    assert answer["command"] == f"runner resume {run_id[:8]} --tools MODULE:ATTR"
    assert store.get_run(run_id).status == "awaiting_approval"  # logged, not continued
    assert [f.reason for f in store.get_run(run_id).facts if isinstance(f, ApprovalDecided)] == ["no"]


def test_decisions_survive_a_restart_of_the_console(store: RunStore) -> None:
    run_id = awaiting(store)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as first:
        assert first.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}}).status_code == 200
    with TestClient(create_app(store), base_url="http://127.0.0.1") as second:
        events = second.get(f"/api/runs/{run_id}").json()["events"]
        assert [e["data"]["approved"] for e in events if e["kind"] == "approval_decided"] == [True]
        assert "No call awaits a decision" in second.get("/approvals").text
        # the same decision again logs nothing; the opposite one is refused
        again = second.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}})
        assert again.status_code == 200
        assert second.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": False}}).status_code == 409
    assert sum(isinstance(f, ApprovalDecided) for f in store.get_run(run_id).facts) == 1


def test_resume_with_more_steps_and_fork_with_an_edited_observation(store: RunStore) -> None:
    tools = money([])
    first = run_agent("Look up bob", ScriptedModel([reply("", call("l1", "lookup", ref="bob"))]), tools,
                      store=store, max_steps=1)
    assert first.status == "step_limit"
    app = create_app(store, registry=tools, model=ScriptedModel(["bob is found"]))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{first.run_id}")
        assert 'id="resume"' in page.text
        assert 'id="fork"' in page.text
        resumed = client.post(f"/runs/{first.run_id}/resume", data={"max_steps": "3"}, follow_redirects=False)
        assert resumed.status_code == 303
        assert until_done(store, first.run_id) == "done"
    app = create_app(store, registry=tools, model=ScriptedModel(["edited answer"]))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        forked = client.post(f"/runs/{first.run_id}/fork",
                             data={"at_step": "2", "call_id": "l1", "observation": "bob moved"},
                             follow_redirects=False)
        assert forked.status_code == 303, forked.text
        child = forked.headers["location"].removeprefix("/runs/")
        assert until_done(store, child) == "done"
        assert client.get(f"/runs/{first.run_id}").text.count('class="lineage child"') == 1
    forked_run = store.get_run(child)
    assert forked_run.parent_run_id == first.run_id
    assert forked_run.answer == "edited answer"
    assert any(m.get("content") == "bob moved" for m in forked_run.messages)
    assert store.get_run(first.run_id).answer == "bob is found"  # the parent is untouched


def test_cancel_a_queued_run(store: RunStore, client: TestClient) -> None:
    from runner.pool.queued import record_queued

    run_id = record_queued(store, "later", "tipper")
    answer = client.post(f"/api/runs/{run_id}/cancel")
    assert answer.json() == {"run_id": run_id, "status": "cancelled", "cancel_requested": True}
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 409  # finished: nothing to cancel


def test_a_pool_run_without_agents_or_broker_is_recorded_with_the_command(store: RunStore, client: TestClient,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.pool.queued import record_queued
    from runner.pool.take import take

    monkeypatch.delenv("RUNNER_BROKER", raising=False)
    ran: list[str] = []
    run_id = record_queued(store, "Send 5 to bob", "payer")
    # one script across the factory's calls: the start asks, the resume answers
    model = ScriptedModel([reply("", call("t1", "transfer", ref="bob")), "Sent."])
    agents = {"payer": lambda: (model, money(ran))}
    assert take(store, run_id, agents) == "awaiting_approval"
    answer = client.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}}).json()
    assert (answer["outcome"], answer["command"]) == ("recorded", f"runner resume {run_id[:8]}")
    with TestClient(create_app(store, agents=agents), base_url="http://127.0.0.1") as with_agents:
        page = with_agents.get(f"/runs/{run_id}")
        assert 'data-kind="decided"' in page.text
        assert with_agents.post(f"/runs/{run_id}/resume", data={}, follow_redirects=False).status_code == 303
        assert until_done(store, run_id) == "done"
    assert ran == ["bob"]


def test_runs_page_filters_pages_and_counts_awaiting(store: RunStore, client: TestClient) -> None:
    awaiting(store, "b" * 32)
    for n in range(3):
        run_agent(f"task {n}", ScriptedModel([f"answer {n}"]), ToolRegistry(), store=store, labels={"n": str(n)})
    page = client.get("/?limit=2")
    assert page.text.count("data-run-id=") == 2
    assert 'id="older"' in page.text
    assert "1 awaiting approval" in page.text
    second = client.get("/?limit=2&page=2")
    assert second.text.count("data-run-id=") == 2
    assert 'id="newer"' in second.text
    assert 'id="older"' not in second.text
    assert client.get("/?label=n=1").text.count("data-run-id=") == 1
    assert client.get("/?status=awaiting_approval").text.count('data-run-id="' + "b" * 32) == 1
    assert "no runs match" in client.get("/?search=nothing-like-this").text


def test_downloads_are_the_exported_fixture_and_the_runs_spans(store: RunStore, client: TestClient,
                                                             tmp_path: Path) -> None:
    from runner.store import derived_trace_id

    run_id = run_agent("hi", ScriptedModel(["hello"]), ToolRegistry(), store=store).run_id
    store.export_fixture(run_id, tmp_path / "run.json")
    fixture = client.get(f"/runs/{run_id}/fixture.json")
    assert fixture.text == (tmp_path / "run.json").read_text(encoding="utf-8")
    spans: Any = client.get(f"/runs/{run_id}/spans.json").json()
    found = spans["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert {s["traceId"] for s in found} == {derived_trace_id(run_id)}
    assert [s["name"] for s in found if "parentSpanId" not in s] == ["invoke_agent"]


@pytest.mark.process  # make_dead starts a process for a pid that is gone
def test_a_run_page_lists_calls_in_doubt_with_their_rule(store_url: str) -> None:
    from tests.cli.helpers import make_dead, record_dead_inside_pay

    record_dead_inside_pay(store_url, "d" * 32, traits=True)
    with open_store(store_url) as store:
        make_dead(store, "d" * 32)
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            page = client.get("/runs/" + "d" * 32).text
    assert 'id="in-doubt"' in page
    assert "not run again: the model is told it may have run (the tool has side effects)" in page
    assert 'data-outcome="in doubt"' in page


@pytest.mark.parametrize(("traits", "rule"), [
    (None, "runs again on resume: its tool has no side effects"),
    ({"side_effects": False, "needs_approval": True, "idempotency_key": None},
     "runs again on resume: its tool has no side effects"),
    ({"side_effects": True, "needs_approval": False, "idempotency_key": None},
     "not run again: the model is told it may have run (the tool has side effects)"),
    ({"side_effects": True, "needs_approval": False, "idempotency_key": "key"},
     "runs again on resume with its idempotency key, so the side effect happens once"),
    ({"side_effects": True, "needs_approval": False, "idempotency_key": None, "idempotent": True},
     "runs again on resume with the same arguments: its tool is idempotent, so the side effect happens once"),
])
def test_each_in_doubt_rule_reads_as_the_resume_applies_it(traits: Any, rule: str) -> None:
    assert doubt_rule(traits) == rule


def test_a_read_only_store_serves_no_action(store_url: str, store: RunStore) -> None:
    run_id = awaiting(store)
    with open_store(store_url, read_only=True) as read_only, \
            TestClient(create_app(read_only), base_url="http://127.0.0.1") as client:
        assert 'method="post"' not in client.get("/approvals").text
        assert 'method="post"' not in client.get(f"/runs/{run_id}").text
        assert client.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}}).status_code == 403
    assert not any(isinstance(f, (ApprovalDecided, ToolFinished)) for f in store.get_run(run_id).facts)


def test_ui_beyond_this_machine_needs_a_token(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNNER_UI_TOKEN", raising=False)
    result = invoke("ui", "--host", "0.0.0.0", "--db", store_url)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "Error: --host 0.0.0.0 serves beyond this machine: give --token TOKEN (or set RUNNER_UI_TOKEN)"]


def test_ui_on_no_store_creates_none(tmp_path: Path) -> None:
    result = invoke("ui", "--db", f"sqlite:///{tmp_path / 'missing.db'}")
    assert result.exit_code == 3
    assert "no store at" in result.stderr
    assert not (tmp_path / "missing.db").exists()


def test_a_run_awaiting_approval_is_decided_on_its_own_page(store: RunStore) -> None:
    ran: list[str] = []
    run_id = awaiting(store, ran=ran)
    app = create_app(store, registry=money(ran), model=ScriptedModel(["Sent."]))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_id}").text
        assert 'class="decide-here card"' in page
        assert 'id="resume"' not in page  # a run waiting on a decision goes on by the decision
        answer = client.post(f"/runs/{run_id}/decide", data={"call_id": "t1", "verdict": "approve", "back": "run"},
                             follow_redirects=False)
        assert answer.headers["location"].startswith(f"/runs/{run_id}?note=")
        assert until_done(store, run_id) == "done"
        assert "Call t1 approved: the console continues the run" in client.get(answer.headers["location"]).text
    assert ran == ["bob"]


def test_the_commands_the_console_shows_hide_the_databases_password(store: RunStore) -> None:
    from sqlalchemy.engine import make_url

    from runner.cli.console import shown_hint
    from runner.cli.options import Env

    url = "postgresql+psycopg://alice:hunter2@db.example/runs"
    original = store.url
    store.url = make_url(url)
    try:
        shown = shown_hint(Env(url, False), store)
    finally:
        store.url = original
    assert shown == " --db 'postgresql+psycopg://alice:***@db.example/runs'"
    assert shown_hint(Env("sqlite:///x.db", False), store) == " --db sqlite:///x.db"


def test_the_runs_and_a_run_show_what_it_cost(store: RunStore, client: TestClient) -> None:
    from runner import ModelReply, Usage

    priced = ScriptedModel([ModelReply("done", [], Usage(1000, 100))])
    priced.model_name = "my-model"
    run_id = run_agent("t", priced, ToolRegistry(), store=store,
                       prices={"my-model": {"input_mtok": 100.0, "output_mtok": 1000.0}}).run_id
    unpriced = run_agent("u", ScriptedModel(["done"]), ToolRegistry(), store=store).run_id
    rows = client.get("/").text
    assert f'data-run-id="{run_id}"' in rows
    assert '<td class="n">$0.2000</td>' in rows
    assert '<td class="n">-</td>' in rows  # the unpriced run
    page = client.get(f"/runs/{run_id}").text
    assert '<dd id="cost">$0.2000' in page
    assert "1000 in, 100 out · $0.2000" in page
    assert '<dd id="cost">-' in client.get(f"/runs/{unpriced}").text


def test_an_unexpected_error_is_a_fixed_line_with_the_safety_headers(store: RunStore,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.ui import pages

    def broken(console: object, query: object) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(pages, "runs_view", broken)
    with TestClient(create_app(store), base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        answer = client.get("/")
    assert (answer.status_code, answer.text) == (500, "Internal Server Error\n")
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    assert answer.headers["x-frame-options"] == "DENY"


def test_the_inbox_and_a_decision_count_in_words_that_agree(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    assert "1 call of 1 run awaits a decision." in client.get("/approvals").text
    awaiting(store, run_id="b" * 32)
    assert "2 calls of 2 runs await a decision." in client.get("/approvals").text
