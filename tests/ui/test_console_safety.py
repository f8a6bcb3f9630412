"""The console's safety in a real browser: markup shown as text, POSTs from another origin refused, a
read-only console, and a console with a token.

Each test drives a real ``runner ui`` process (SQLite and PostgreSQL) with Chromium, and checks the
store and the tools' file afterwards: a refused request changed nothing.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page

from runner._log.statuses import Status
from runner.ui.guard import secrets_for
from tests.cli.helpers import FakeOpenAI, completion
from tests.ui.console_tools import XSS
from tests.ui.helpers import (
    TOOLS,
    PageServer,
    Start,
    awaiting,
    decide,
    decisions,
    events_of,
    pending,
    ran,
    record,
    shown_runs,
    status_of,
)

pytestmark = [pytest.mark.process]

TASK_XSS = "Read <script>window.__pwned = 'task'</script><img src=x onerror=window.__pwned=2>"
ANSWER_XSS = "Read. <img src=x onerror=window.__pwned=5>"
LABEL_XSS = "<img src=x onerror=window.__pwned=6>"
QUERY_XSS = '"><img src=x onerror=window.__pwned=7>'


def test_markup_from_models_tools_tasks_labels_and_the_query_is_shown_as_text_and_never_runs(
        store_url: str, page: Page, console: Start) -> None:
    read = record(store_url, TASK_XSS, completion("", [("c1", "fetch_page", {"ref": "home"})]),
                  completion(ANSWER_XSS), options=["--label", f"note={LABEL_XSS}"])
    waiting = awaiting(store_url, ref=XSS, task=TASK_XSS)
    ui = console(store_url, "--tools", TOOLS)
    blocked: list[str] = []
    page.on("console", lambda message: blocked.append(message.text) if "Content Security Policy" in message.text
            else None)
    search = "/?" + urlencode({"search": QUERY_XSS})
    labelled = "/?" + urlencode({"label": f"note={LABEL_XSS}"})
    stats = "/stats?" + urlencode({"label": f"note={LABEL_XSS}"})
    for path in ("/", search, labelled, f"/runs/{read}", f"/runs/{waiting}", "/approvals", "/stats", stats):
        response = page.goto(ui.at(path))
        assert response is not None
        assert response.status == 200
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert page.locator('img[src="x"]').count() == 0, path
        assert page.evaluate("[...document.scripts].some(s => s.text.includes('__pwned'))") is False, path
    assert blocked == []  # escaped markup is not even tried (the CSP would have blocked it and said so)

    page.goto(ui.url)
    assert page.locator(f'tr[data-run-id="{read}"] .label').inner_text() == f"note={LABEL_XSS}"
    assert page.locator(f'tr[data-run-id="{waiting}"] td.task a').inner_text() == TASK_XSS
    page.goto(ui.at(search))
    assert page.locator('#filters [name="search"]').input_value() == QUERY_XSS
    page.goto(ui.at(labelled))
    assert page.locator('#filters [name="label"]').input_value() == f"note={LABEL_XSS}"
    assert shown_runs(page) == [(read, Status.DONE)]
    page.goto(ui.at(f"/runs/{read}"))
    assert page.locator("section#run-header p#task").inner_text() == TASK_XSS
    assert page.locator('li.entry[data-kind="tool"] pre.observation').inner_text() == json.dumps(XSS)
    assert page.locator("pre.answer").inner_text() == ANSWER_XSS
    page.goto(ui.at("/approvals"))
    assert pending(page, waiting, "t1").locator("pre.args").inner_text() == json.dumps({"ref": XSS})
    assert pending(page, waiting, "t1").locator(".task").inner_text() == TASK_XSS


def form_page(action: str, fields: dict[str, str], enctype: str = "application/x-www-form-urlencoded") -> str:
    """An HTML page that submits a POST form to ``action`` as soon as it loads."""
    inputs = "".join(f'<input name="{escape(name)}" value="{escape(value)}">' for name, value in fields.items())
    return (f'<!doctype html><form method="post" action="{escape(action)}" enctype="{enctype}">{inputs}</form>'
            "<script>document.forms[0].submit()</script>")


def test_a_post_from_another_origin_is_refused_and_changes_nothing(store_url: str, page: Page, console: Start,
                                                                   ran_file: Path) -> None:
    run_id = awaiting(store_url)
    before = events_of(store_url, run_id)
    with FakeOpenAI(completion("Sent.")) as model:
        ui = console(store_url, "--tools", TOOLS, "--base-url", model.url)
        attacks = {
            "/decide": form_page(ui.at(f"/runs/{run_id}/decide"),
                                 {"call_id": "t1", "verdict": "approve", "reason": ""}),
            "/cancel": form_page(ui.at(f"/runs/{run_id}/cancel"), {}),
            # text/plain sends `{"decisions": {"t1": true}, "x": "="}`: JSON that a careless API would accept
            "/api": form_page(ui.at(f"/api/runs/{run_id}/decisions"), {'{"decisions": {"t1": true}, "x": "': '"}'},
                              "text/plain"),
        }
        with PageServer(attacks) as other:
            for path in attacks:
                with page.expect_response(lambda r: r.url.startswith(ui.origin) and r.request.method == "POST") as sent:
                    page.goto(other.origin + path)
                assert sent.value.status == 403, path
        assert model.requests == []
    assert events_of(store_url, run_id) == before
    assert status_of(store_url, run_id) == Status.AWAITING_APPROVAL
    assert ran(ran_file) == []


POSTS = """async (run) => {
  const post = async (path, type, body) =>
    (await fetch(path, {method: 'POST', headers: {'Content-Type': type}, body})).status;
  const form = 'application/x-www-form-urlencoded';
  return [await post(`/runs/${run}/decide`, form, 'call_id=t1&verdict=approve&reason='),
          await post(`/runs/${run}/cancel`, form, ''),
          await post(`/api/runs/${run}/decisions`, 'application/json', '{"decisions": {"t1": true}}'),
          await post(`/api/runs/${run}/cancel`, 'application/json', '{}')];
}"""
"""Same-origin POSTs made by the console's own page (so the origin check passes): each action once."""


def test_a_read_only_console_offers_no_action_and_refuses_every_post(store_url: str, page: Page, console: Start,
                                                                     ran_file: Path) -> None:
    run_id = awaiting(store_url)
    before = events_of(store_url, run_id)
    with FakeOpenAI(completion("Sent.")) as model:
        ui = console(store_url, "--read-only", "--tools", TOOLS, "--base-url", model.url)
        for path in ("/", f"/runs/{run_id}", "/stats", "/approvals"):  # the inbox last: checked below
            page.goto(ui.at(path))
            assert page.locator('form[method="post" i]').count() == 0, path
            assert page.locator('button[name="verdict"], form#cancel, form#resume, form#fork').count() == 0, path
        assert page.locator(f'[data-run-id="{run_id}"][data-call-id="t1"]').count() == 1  # still listed
        assert page.evaluate(POSTS, run_id) == [403, 403, 403, 403]
        assert model.requests == []
    assert events_of(store_url, run_id) == before
    assert ran(ran_file) == []


def test_a_console_with_a_token_lets_in_the_browser_that_opened_its_printed_url(store_url: str, page: Page,
                                                                                 browser: Browser,
                                                                                 console: Start) -> None:
    run_id = awaiting(store_url)
    ui = console(store_url, "--token", "s3cret", "--by", "alice")
    assert ui.url == f"{ui.origin}/?token=s3cret"
    response = page.goto(ui.at("/approvals"))
    assert response is not None
    assert response.status == 401
    assert page.locator(f'[data-run-id="{run_id}"]').count() == 0
    response = page.goto(ui.url)  # the printed URL: a cookie, then the same page without the token in it
    assert response is not None
    assert (response.status, page.url) == (200, f"{ui.origin}/")
    secrets = secrets_for("s3cret")  # a cookie of this console's own, and not the token
    assert [(c["name"], c["value"], c["httpOnly"], c["sameSite"]) for c in page.context.cookies()] == [
        (secrets.cookie, secrets.read, True, "Strict")]
    page.goto(ui.at("/approvals"))
    assert decide(page, run_id, "t1", "approve") == 200
    assert decisions(store_url, run_id) == [
        {"call_id": "t1", "approved": True, "reason": None, "decided_by": "alice"}]

    stranger = browser.new_context()  # no cookie: neither its GET nor its POST gets in
    try:
        other = stranger.new_page()
        response = other.goto(ui.at("/static/console.css"))
        assert response is not None
        assert response.status == 401
        assert other.evaluate("async (url) => (await fetch(url, {method: 'POST', body: 'x'})).status",
                              ui.at(f"/api/runs/{run_id}/cancel")) == 401
    finally:
        stranger.close()
    assert status_of(store_url, run_id) == Status.AWAITING_APPROVAL
