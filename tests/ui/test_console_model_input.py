"""What the model was given, on the run page in Chromium: the system prompt, the tool specs and each call's input.

Each is collapsed until opened; markup in the system prompt, a tool's description and schema, and a call's
arguments is shown as text, and no script runs (nor is any blocked by the CSP: none is even tried).
A real ``runner ui`` process over a run ``runner run`` recorded on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import Page, expect

from tests.cli.helpers import FakeOpenAI, at, completion, invoke, run_id_in
from tests.ui.console_tools import MARKED
from tests.ui.helpers import Start

pytestmark = [pytest.mark.process]

SYSTEM = "Be brief.\n<script>window.__pwned = 'system'</script><img src=x onerror=window.__pwned=9>"
REF = "<img src=x onerror=window.__pwned=10>paris"
SHOT = os.environ.get("RUNNER_UI_SHOT", "/tmp/runner-ui-run-page.png")


def recorded(db: str) -> str:
    """A run of ``marked_tools`` with a marked-up system prompt: one ``lookup`` call, then an answer."""
    with FakeOpenAI(completion("Looking.", [("c1", "lookup", {"ref": REF})]), completion("It is 21C.")) as server:
        result = invoke("run", "Weather in Paris?", "--tools", "tests.ui.console_tools:marked_tools", "--system",
                        SYSTEM, "--model", "openai:fake", *at(server), "--db", db, "-q")
    assert result.exit_code == 0, result.output
    return run_id_in(result)


def roles(page: Page, details: str) -> list[str | None]:
    return [m.get_attribute("data-role") for m in page.locator(f"{details} .message").all()]


def test_what_the_model_was_given_is_collapsed_until_opened_and_its_markup_is_text(store_url: str, page: Page,
                                                                                   console: Start) -> None:
    run_id = recorded(store_url)
    ui = console(store_url)
    blocked: list[str] = []
    page.on("console", lambda message: blocked.append(message.text) if "Content Security Policy" in message.text
            else None)
    page.goto(ui.at(f"/runs/{run_id}"))

    system = page.locator("details#system-prompt")
    specs = page.locator("details#tool-specs")
    inputs = page.locator("li.entry.model details.input")
    assert inputs.count() == 2
    for closed in (system, specs, inputs.nth(0), inputs.nth(1)):
        assert closed.evaluate("d => d.open") is False
    expect(system.locator("pre")).to_be_hidden()
    expect(inputs.nth(0).locator(".message").first).to_be_hidden()

    system.locator("summary").click()
    expect(system.locator("pre")).to_be_visible()
    assert system.locator("pre").inner_text() == SYSTEM
    specs.locator("summary").click()
    assert specs.locator("summary").inner_text() == "tools the model was given (1)"
    lookup = specs.locator('.spec[data-tool="lookup"]')
    assert lookup.locator(".description").inner_text() == MARKED
    assert json.loads(lookup.locator("pre.schema").inner_text())["properties"]["ref"]["description"] == MARKED

    for n in (0, 1):
        inputs.nth(n).locator("summary").click()
    assert inputs.nth(0).locator("summary").inner_text() == "input: 2 messages"
    assert roles(page, "li.entry.model:nth-child(2) details.input") == ["system", "user"]
    assert inputs.nth(0).locator('.message[data-role="system"] pre').inner_text() == SYSTEM
    assert inputs.nth(1).locator("summary").inner_text() == "input: 4 messages (the 2 the call before was sent, " \
                                                            "then 2 new)"
    fresh = inputs.nth(1).locator(".message")
    assert [m.get_attribute("data-role") for m in fresh.all()] == ["assistant", "tool"]
    assert fresh.nth(0).locator(".calls code").inner_text() == json.dumps({"ref": REF})
    assert fresh.nth(1).locator("pre").inner_text() == json.dumps({"ref": REF, "value": 42})

    tool = page.locator('li.entry[data-kind="tool"][data-call-id="c1"]')
    assert [p.inner_text() for p in tool.locator(".part").all()] == ["ARGUMENTS", "RESULT"]  # CSS upper-cases
    assert tool.locator("pre.args").inner_text() == json.dumps({"ref": REF})

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert blocked == []
    page.set_viewport_size({"width": 1200, "height": 900})
    page.screenshot(path=SHOT, full_page=True)
