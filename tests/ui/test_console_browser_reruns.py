"""A rerun in a real browser: made with ``runner.rerun`` into the store a real ``runner ui`` process serves, it
shows on the runs page, and its report opens, styled, with every stored text inert and the CSP unbroken."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from runner import ModelReply, ScriptedModel, ToolCall, rerun, run_agent
from runner.store import RunStore
from tests.rerun import rerun_tools
from tests.ui.helpers import Start, watching

pytestmark = [pytest.mark.process]

XSS_TASK = "Read <script>window.__pwned = 'task'</script><img src=x onerror=window.__pwned=1>"
XSS_ANSWER = "Done. <img src=x onerror=window.__pwned=2>"
XSS_TOOL = "<img src=x onerror=window.__pwned=3>"


def test_a_rerun_is_listed_on_the_runs_page_and_its_report_opens_inert(store: RunStore, store_url: str, page: Page,
                                                                       console: Start) -> None:
    baseline = run_agent(XSS_TASK, ScriptedModel(["All read."]), rerun_tools.tools(), store=store)
    candidate = ScriptedModel([ModelReply("", [ToolCall("c1", XSS_TOOL, {})]), XSS_ANSWER])
    report = rerun(store, [baseline.run_id], candidate)
    ui = console(store_url)
    seen = watching(page)
    asked, blocked = seen.requests, seen.blocked

    page.goto(ui.url)
    row = page.locator(f'#reruns tr[data-rerun-id="{report.rerun_id}"]')
    expect(row).to_have_attribute("data-changed", "1")
    assert "1 changed" in row.locator("td.verdicts").inner_text()
    inert(page)
    with page.expect_navigation():
        row.locator(f'a[href="/reruns/{report.rerun_id}"]').click()
    assert page.url == ui.at(f"/reruns/{report.rerun_id}")
    body = page.locator("div.rerun-report")
    assert body.locator("h1").inner_text() == f"rerun {report.rerun_id} on scripted (scripted)"
    case = body.locator(f'section.changed[id="case-{baseline.run_id}"]')
    assert case.locator("p").first.inner_text() == XSS_TASK
    assert XSS_ANSWER in case.inner_text()
    assert f"+ {XSS_TOOL} {{}}" in case.locator("td.differs pre").last.inner_text()
    assert case.evaluate("e => getComputedStyle(e).borderTopColor") == "rgb(239, 143, 0)"  # /reruns.css applies
    inert(page)
    with page.expect_navigation():
        case.locator(f'a[href="/runs/{report.cases[0].candidates[0].run_id}"]').click()
    expect(page.locator("section#run-header")).to_have_attribute("data-status", "done")
    inert(page)
    assert blocked == []
    assert seen.elsewhere(ui.origin) == []
    assert [r.url for r in asked if r.resource_type == "stylesheet"] == [
        ui.at("/static/console.css"), ui.at("/static/console.css"), ui.at("/reruns.css"), ui.at("/static/console.css")]


def inert(page: Page) -> None:
    """No stored text ran as HTML or script on ``page``, and nothing broke its CSP."""
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("window.__violations") == []
