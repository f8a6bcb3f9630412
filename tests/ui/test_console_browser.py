"""The console in a real browser: a real ``runner ui`` process on a SQLite file and PostgreSQL, driven by Chromium.

Runs are recorded by ``runner run`` through the OpenAI adapter against a local fake server; the
console continues approved runs against another one, which records what the model was sent, and
its tools write each call they run to a file, so "ran once" is counted in the console's process.
Escaping, the origin check, read-only and the token are ``test_console_safety.py``'s.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from runner._log.statuses import Status
from tests.cli.helpers import FakeOpenAI, completion
from tests.ui.helpers import (
    SETTLE_S,
    TOOLS,
    WAITING,
    Console,
    HeldOpenAI,
    Start,
    awaiting,
    decide,
    decisions,
    events_of,
    kinds,
    pending,
    ran,
    record,
    settled,
    shown_runs,
    status_of,
)

pytestmark = [pytest.mark.process]



def filter_runs(page: Page, console: Console, **fields: str) -> dict[str, list[str]]:
    """Fill the runs page's filter form from scratch and submit it; the query the browser sent."""
    page.goto(console.url)
    form = page.locator("form#filters")
    for name, value in fields.items():
        field = form.locator(f'[name="{name}"]')
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    submit = form.locator('button[type="submit"], input[type="submit"], button:not([type])')
    with page.expect_navigation():
        if submit.count():
            submit.first.click()
        else:
            form.evaluate("f => f.requestSubmit()")
    return parse_qs(urlsplit(page.url).query)


def test_the_runs_page_lists_runs_newest_first_and_filters_them(store_url: str, page: Page, console: Start) -> None:
    paris = record(store_url, "Weather in Paris?", completion("", [("c1", "lookup", {"ref": "paris"})]),
                   completion("It is 21C."), options=["--label", "env=prod", "--label", "team=a"])
    money = record(store_url, "Send the money", completion("", [("t1", "transfer", {"ref": "a"})]),
                   options=["--label", "env=dev"])
    count = record(store_url, "Count the cities", completion("", [("c1", "lookup", {"ref": "cities"})]),
                   options=["--label", "env=prod", "--max-steps", "1"])
    ui = console(store_url)
    page.goto(ui.url)
    assert shown_runs(page) == [(count, Status.STEP_LIMIT), (money, Status.AWAITING_APPROVAL), (paris, Status.DONE)]
    badge = page.locator("a#awaiting-badge")
    assert (badge.inner_text().strip(), badge.get_attribute("href")) == ("1 awaiting approval", "/approvals")

    assert filter_runs(page, ui, status=Status.DONE)["status"] == ["done"]
    assert shown_runs(page) == [(paris, Status.DONE)]
    assert filter_runs(page, ui, status=Status.AWAITING_APPROVAL)["status"] == ["awaiting_approval"]
    assert shown_runs(page) == [(money, Status.AWAITING_APPROVAL)]
    assert filter_runs(page, ui, search="PARIS")["search"] == ["PARIS"]  # any case
    assert shown_runs(page) == [(paris, Status.DONE)]
    assert filter_runs(page, ui, label="env=prod")["label"] == ["env=prod"]
    assert shown_runs(page) == [(count, Status.STEP_LIMIT), (paris, Status.DONE)]
    assert filter_runs(page, ui, tool="transfer")["tool"] == ["transfer"]
    assert shown_runs(page) == []  # the call awaits approval: it never ran
    assert filter_runs(page, ui, tool="lookup", status=Status.STEP_LIMIT)["tool"] == ["lookup"]
    assert shown_runs(page) == [(count, Status.STEP_LIMIT)]


def test_the_runs_page_pages_through_runs_newest_first(store_url: str, page: Page, console: Start) -> None:
    first, second, third = (record(store_url, f"Say {word}", completion(word)) for word in ("one", "two", "three"))
    ui = console(store_url)
    page.goto(ui.at("/?limit=1"))
    seen = [shown_runs(page)]
    for link in ("a#older", "a#older", "a#newer"):
        with page.expect_navigation():
            page.locator(link).click()
        seen.append(shown_runs(page))
    assert seen == [[(third, Status.DONE)], [(second, Status.DONE)], [(first, Status.DONE)], [(second, Status.DONE)]]
    page.goto(ui.at("/?limit=1"))
    assert page.locator("a#newer").count() == 0  # the newest page has nothing newer


def test_a_run_page_shows_its_timeline(store_url: str, page: Page, console: Start) -> None:
    run_id = record(store_url, "Weather in Paris?", completion("Looking it up.", [("c1", "lookup", {"ref": "paris"})]),
                    completion("It is 21C."))
    ui = console(store_url)
    page.goto(ui.url)
    with page.expect_navigation():
        page.locator(f'tr[data-run-id="{run_id}"] a').first.click()
    assert urlsplit(page.url).path == f"/runs/{run_id}"
    header = page.locator("section#run-header")
    assert header.get_attribute("data-status") == Status.DONE
    assert "Weather in Paris?" in header.inner_text()
    assert kinds(page) == ["step", "model", "tool", "step", "model", "end"]
    asking, answering = page.locator('li.entry[data-kind="model"]').all()
    assert asking.locator("pre.text").inner_text() == "Looking it up."
    assert asking.locator(".asks").inner_text() == 'asks lookup c1 {"ref": "paris"}'
    assert answering.locator("pre.text").inner_text() == "It is 21C."
    tool = page.locator('li.entry[data-kind="tool"]')
    assert (tool.get_attribute("data-call-id"), tool.get_attribute("data-outcome")) == ("c1", "ok")
    assert tool.locator(".tool").inner_text() == "lookup"
    assert tool.locator("pre.args").inner_text() == '{"ref": "paris"}'
    assert tool.locator("pre.observation").inner_text() == '{"ref": "paris", "value": 42}'
    end = page.locator('li.entry[data-kind="end"]')
    assert (end.locator(".status").inner_text(), end.locator("pre.answer").inner_text()) == ("done", "It is 21C.")

    page.goto(ui.at(f"/runs/{run_id[:8]}"))  # a unique prefix opens the same run
    assert page.locator("section#run-header").get_attribute("data-status") == Status.DONE
    assert page.locator("ol#timeline > li.entry").count() == 6


def test_approve_in_the_inbox_ends_the_run_done_with_the_tool_run_once(store_url: str, page: Page, console: Start,
                                                                       ran_file: Path) -> None:
    run_id = awaiting(store_url)
    with FakeOpenAI(completion("Sent.")) as model:
        ui = console(store_url, "--tools", TOOLS, "--base-url", model.url, "--by", "alice")
        stale = page.context.new_page()
        stale.goto(ui.at("/approvals"))  # a second tab, left open on the same call
        page.goto(ui.at("/approvals"))
        assert page.locator(f'[data-run-id="{run_id}"][data-call-id]').count() == 1
        assert decide(page, run_id, "t1", "approve") == 200
        assert urlsplit(page.url).path == "/approvals"
        assert page.locator("p#outcome").inner_text() == (
            f"Call t1 of run {run_id[:8]} approved: the console continues the run")
        assert settled(store_url, run_id, WAITING) == Status.DONE
        assert ran(ran_file) == ["transfer a"]
        assert decisions(store_url, run_id) == [
            {"call_id": "t1", "approved": True, "reason": None, "decided_by": "alice"}]
        assert len(model.requests) == 1
        assert model.requests[0]["messages"][-1] == {"role": "tool", "tool_call_id": "t1", "content": '"transferred a"'}

        events = events_of(store_url, run_id)
        assert decide(stale, run_id, "t1", "approve") == 409  # approved again from a tab left open: refused
        assert stale.locator("p#error").inner_text() == f"run {run_id} is done; it awaits no decision"
        assert events_of(store_url, run_id) == events
        assert ran(ran_file) == ["transfer a"]
        assert len(model.requests) == 1

    page.goto(ui.at("/approvals"))
    assert page.locator(f'[data-run-id="{run_id}"]').count() == 0
    page.goto(ui.at(f"/runs/{run_id}"))
    assert page.locator("section#run-header").get_attribute("data-status") == Status.DONE
    assert kinds(page) == ["step", "model", "asked", "end", "decided", "resumed", "step", "tool", "step", "model",
                           "end"]
    first, last = page.locator('li.entry[data-kind="end"]').all()
    assert (first.locator(".status").inner_text(), last.locator(".status").inner_text()) == (
        Status.AWAITING_APPROVAL, Status.DONE)
    assert last.locator("pre.answer").inner_text() == "Sent."
    tool = page.locator('li.entry[data-kind="tool"]')
    assert (tool.get_attribute("data-call-id"), tool.get_attribute("data-outcome")) == ("t1", "ok")
    assert tool.locator("pre.observation").inner_text() == '"transferred a"'


def test_the_runs_page_and_a_run_page_follow_a_running_run_until_it_ends(store_url: str, page: Page,
                                                                         console: Start) -> None:
    run_id = awaiting(store_url)
    with HeldOpenAI(completion("Sent.")) as model:
        ui = console(store_url, "--tools", TOOLS, "--base-url", model.url)
        page.goto(ui.at("/approvals"))
        assert decide(page, run_id, "t1", "approve") == 200
        assert model.asked.wait(SETTLE_S)  # the run is running, its model call held
        runs = page.context.new_page()
        runs.goto(ui.url)
        assert shown_runs(runs) == [(run_id, Status.RUNNING)]
        assert runs.locator("table#runs").get_attribute("data-live") == "1"
        page.goto(ui.at(f"/runs/{run_id}"))
        assert page.locator("section#run-header").get_attribute("data-status") == Status.RUNNING
        assert kinds(page)[-2:] == ["tool", "step"]  # transfer ran; step 2 waits on its model call
        model.release.set()
        # neither page is reloaded: each fetches its live part until the run has ended
        expect(page.locator("section#run-header")).to_have_attribute("data-status", Status.DONE,
                                                                     timeout=SETTLE_S * 1000)
        expect(runs.locator(f'tr[data-run-id="{run_id}"]')).to_have_attribute("data-status", Status.DONE,
                                                                               timeout=SETTLE_S * 1000)
    assert page.locator("pre.answer").last.inner_text() == "Sent."
    assert (page.locator("#live").get_attribute("data-live"), runs.locator("table#runs").get_attribute("data-live")) \
        == ("0", "0")


def test_deny_with_a_reason_makes_the_model_read_the_reason(store_url: str, page: Page, console: Start,
                                                            ran_file: Path) -> None:
    run_id = awaiting(store_url)
    with FakeOpenAI(completion("I did not send it.")) as model:
        ui = console(store_url, "--tools", TOOLS, "--base-url", model.url, "--by", "bob")
        page.goto(ui.at("/approvals"))
        assert decide(page, run_id, "t1", "deny", reason="over the limit") == 200
        assert page.locator("p#outcome").inner_text() == (
            f"Call t1 of run {run_id[:8]} denied: the console continues the run")
        assert settled(store_url, run_id, WAITING) == Status.DONE
    assert ran(ran_file) == []
    assert decisions(store_url, run_id) == [
        {"call_id": "t1", "approved": False, "reason": "over the limit", "decided_by": "bob"}]
    assert [request["messages"][-1] for request in model.requests] == [
        {"role": "tool", "tool_call_id": "t1",
         "content": "ERROR: the call to transfer was denied by the approver: over the limit; do not retry it"}]


def test_a_decision_survives_a_restart_of_the_console(store_url: str, page: Page, console: Start) -> None:
    run_id = awaiting(store_url)
    ui = console(store_url, "--by", "alice")  # no --tools: the decision is only recorded
    page.goto(ui.at("/approvals"))
    assert decide(page, run_id, "t1", "deny", reason="not today") == 200
    assert page.locator("p#outcome").inner_text() == (
        f"Call t1 of run {run_id[:8]} denied: recorded; this console was started without --tools, so it cannot run "
        "them")
    assert page.locator("code#command").inner_text() == (
        f"runner resume {run_id[:8]} --tools {TOOLS} --db {shlex.quote(store_url)}")
    ui.stop()
    assert decisions(store_url, run_id) == [
        {"call_id": "t1", "approved": False, "reason": "not today", "decided_by": "alice"}]
    assert status_of(store_url, run_id) == Status.AWAITING_APPROVAL

    again = console(store_url)
    page.goto(again.at(f"/runs/{run_id}"))
    shown = page.locator('li.entry[data-kind="decided"]')
    assert shown.count() == 1
    assert (shown.get_attribute("data-call-id"), shown.locator(".by").inner_text(),
            shown.locator("q.reason").inner_text()) == ("t1", "alice", "not today")
    assert shown.inner_text().startswith("denied t1 by alice at ")
    page.goto(again.at("/approvals"))
    assert pending(page, run_id, "t1").count() == 0
