"""A live run's page in a real browser follows the run's events: the reply's text grows as the model writes it,
and a tool call shows as it starts and as it ends, the page never reloaded; without the events, it polls.

The run streams in a thread of the test (a model that writes a word at a time) into the store a real
``runner ui`` process serves; Chromium opens its page while the model writes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, Route, expect

from runner import ToolRegistry
from runner._log.statuses import Status
from runner.store import RunStore
from tests.streaming.helpers import StreamingModel, call
from tests.ui.helpers import SETTLE_S, SPY, Start, streaming

pytestmark = [pytest.mark.process]

RUN = "b" * 32
LOOKING = "Let me look up <b>the weather</b> for <img src=x onerror=window.__pwned=1> Paris first."
ANSWER = ("It is 21C in Paris today. " * 6).strip()


def slow_weather(release: threading.Event) -> ToolRegistry:
    """A ``get_weather`` tool that runs until ``release`` is set (at most ``SETTLE_S``)."""
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> dict[str, int]:
        """Current temperature in a city."""
        release.wait(SETTLE_S)
        return {"celsius": 21}

    return registry


def test_the_text_grows_as_the_model_writes_and_the_tool_call_shows_as_it_starts_and_ends(
        store: RunStore, store_url: str, page: Page, console: Start, tmp_path: Path) -> None:
    ui = console(store_url)
    asked: list[Request] = []
    page.on("request", lambda request: asked.append(request))
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(SPY)
    release = threading.Event()
    model = StreamingModel([call("c1", "get_weather", LOOKING, city="Paris"), ANSWER], pause_s=0.15)
    with streaming(store, model, slow_weather(release), RUN) as done:
        page.goto(ui.at(f"/runs/{RUN}"))
        assert page.locator("#live").get_attribute("data-live") == "1"
        text = page.locator("#streaming pre.text")
        expect(text).not_to_be_empty(timeout=SETTLE_S * 1000)
        first = text.inner_text()
        page.wait_for_function("n => (document.querySelector('#streaming pre.text') || {}).textContent.length > n",
                               arg=len(first), timeout=SETTLE_S * 1000)
        grown = text.inner_text()
        assert not done.done()
        assert grown.startswith(first)
        assert LOOKING.startswith(grown)
        page.screenshot(path=str(tmp_path / "mid-reply.png"), full_page=True)

        tool = page.locator('li.entry[data-kind="tool"][data-call-id="c1"]')
        expect(tool).to_have_attribute("data-outcome", "running", timeout=SETTLE_S * 1000)
        assert page.locator("#streaming").count() == 0  # the reply is logged whole: the page shows it so
        assert page.locator('li.entry[data-kind="model"] pre.text').first.inner_text() == LOOKING
        release.set()
        expect(tool).to_have_attribute("data-outcome", "ok", timeout=SETTLE_S * 1000)
        assert tool.locator("pre.observation").inner_text() == '{"celsius": 21}'
        answer = page.locator("#streaming pre.text")
        expect(answer).not_to_be_empty(timeout=SETTLE_S * 1000)
        assert ANSWER.startswith(answer.inner_text())
        partway = len(answer.inner_text())
        assert not done.done()
        page.screenshot(path=str(tmp_path / "mid-answer.png"), full_page=True)

        expect(page.locator("section#run-header")).to_have_attribute("data-status", Status.DONE,
                                                                     timeout=SETTLE_S * 1000)
        assert partway < len(ANSWER)
    assert page.locator("#live").get_attribute("data-live") == "0"
    assert page.locator("#streaming").count() == 0
    assert page.locator("pre.answer").inner_text() == ANSWER
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("window.__violations") == []
    assert blocked == []
    assert [r.url for r in asked if not r.url.startswith(ui.origin + "/")] == []
    followed = [r for r in asked if r.resource_type == "eventsource"]
    assert len(followed) == 1  # one stream, never reconnected: the run ended while it was open
    assert followed[0].url.startswith(ui.at(f"/api/runs/{RUN}/events?after="))
    fetched = [r for r in asked if r.resource_type == "fetch"]
    assert fetched  # the live part again, after a fact; never the whole page
    assert [r.url for r in asked if r.resource_type == "document"] == [ui.at(f"/runs/{RUN}")]


def test_a_page_whose_event_stream_is_refused_fetches_its_live_part_every_two_seconds(
        store: RunStore, store_url: str, page: Page, console: Start) -> None:
    ui = console(store_url)
    refused: list[str] = []

    def refuse(route: Route) -> None:
        refused.append(route.request.url)
        route.fulfill(status=503, content_type="application/json", body='{"error": "not now"}')

    page.route("**/api/runs/*/events*", refuse)
    release = threading.Event()
    model = StreamingModel([call("c1", "get_weather", "Looking.", city="Paris"), "Done."], pause_s=0.05)
    with streaming(store, model, slow_weather(release), RUN):
        page.goto(ui.at(f"/runs/{RUN}"))
        tool = page.locator('li.entry[data-kind="tool"][data-call-id="c1"]')
        expect(tool).to_have_attribute("data-outcome", "running", timeout=SETTLE_S * 1000)
        release.set()
        started = time.monotonic()
        expect(page.locator("section#run-header")).to_have_attribute("data-status", Status.DONE,
                                                                     timeout=SETTLE_S * 1000)
    assert len(refused) == 1  # a refused stream is not asked again
    assert time.monotonic() - started < SETTLE_S
    assert page.locator("pre.answer").inner_text() == "Done."


def test_a_parents_page_follows_its_sub_agents_child_while_its_own_log_is_quiet(
        store: RunStore, store_url: str, page: Page, console: Start) -> None:
    ui = console(store_url)
    release = threading.Event()
    child = StreamingModel([call("k1", "get_weather", "Checking.", city="Paris"), " ".join(["sunny"] * 60)],
                           pause_s=0.1)
    tools = ToolRegistry()
    tools.add_agent("research", model=child, registry=slow_weather(release), description="Finds things out.")
    parent = StreamingModel([call("p1", "research", "Asking.", task="weather in Paris"), "Done."], pause_s=0.01)
    with streaming(store, parent, tools, RUN):
        page.goto(ui.at(f"/runs/{RUN}"))
        nested = page.locator('li.entry[data-kind="child"] li.entry[data-kind="tool"][data-call-id="k1"]')
        expect(nested).to_have_attribute("data-outcome", "running", timeout=SETTLE_S * 1000)
        quiet = store.get_run(RUN).events[-1].seq
        release.set()
        expect(nested).to_have_attribute("data-outcome", "ok", timeout=SETTLE_S * 1000)
        assert store.get_run(RUN).events[-1].seq == quiet  # no event of its own told the page
        expect(page.locator("section#run-header")).to_have_attribute("data-status", Status.DONE,
                                                                     timeout=SETTLE_S * 1000)
    assert page.locator("pre.answer").last.inner_text() == "Done."
