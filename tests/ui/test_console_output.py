"""The console shows a typed run's output as a collapsible JSON block, its text escaped (Playwright, Chromium)."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.store import open_store
from tests.output.helpers import Invoice, final
from tests.ui.helpers import Start

pytestmark = [pytest.mark.process]

MARKUP = "EUR<img src=x onerror=window.__pwned=1>"


def test_the_run_page_shows_the_output_as_a_collapsible_json_block(store_url: str, page: Page,
                                                                    console: Start) -> None:
    with open_store(store_url) as store:
        run_id = run_agent("bill", ScriptedModel(["plain", final("c1", total=2, currency=MARKUP)]), ToolRegistry(),
                           output_type=Invoice, store=store).run_id
    ui = console(store_url)
    page.goto(ui.at(f"/runs/{run_id}"))
    block = page.locator("details#output")
    assert block.get_attribute("open") is not None
    assert json.loads(block.locator("pre.output-json").inner_text()) == {"total": 2.0, "currency": MARKUP}
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    rejected = page.locator('li.entry[data-kind="rejected"]')
    assert rejected.locator(".what").inner_text() == "output rejected (plain text)"
    assert rejected.locator("p.error").inner_text().startswith("ERROR: the run must end with a call to final_result")
    block.locator("summary").click()
    assert block.get_attribute("open") is None
    assert not block.locator("pre.output-json").is_visible()
