"""The run page's waterfall in Chromium: a real ``runner ui`` process over runs recorded on SQLite and PostgreSQL.

Two 0.3 s calls a reply asked for together overlap on screen inside their step's bar, steps follow one another,
a resume draws its marker past the idle stretch drawn narrow, a bar leads to its entry in the timeline, a live
run's waterfall grows as it runs, and hostile tool and sub-agent names stay text in the bars and their tooltips.
No request leaves the console's origin, and the CSP blocks nothing.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Dialog, Locator, Page, expect

from runner import AgentResult, ModelReply, ScriptedModel, ToolRegistry, open_store, resume, run_agent
from runner._log.statuses import Status
from runner.store import RunStore
from tests.loop.helpers import call, reply
from tests.trees import run_tree
from tests.ui.console_tools import XSS
from tests.ui.helpers import Start, Watch
from tests.ui.money import PARAMS, money

pytestmark = [pytest.mark.process]

NAP_S = 0.3
IDLE_S = 2.5  # a wait longer than the 2 s the axis draws narrow when it would be wider kept to scale
LIVE_MS = 15_000  # bounds, not expectations: how long a live page may take to show what the run did


def nap(ref: str) -> str:
    time.sleep(NAP_S)
    return f"slept {ref}"


def tools() -> ToolRegistry:
    registry = money([])
    registry.register("nap", "Sleep 0.3 s.", PARAMS, nap)
    registry.register(XSS, "A tool with markup for a name.", PARAMS, lambda ref: "ran")
    return registry


def naps(*ids: str) -> ModelReply:
    return reply("", *[call(i, "nap", ref=i) for i in ids])


class Box(NamedTuple):
    """Where an element is drawn, in CSS pixels."""

    x: float
    width: float

    @property
    def right(self) -> float:
        return self.x + self.width


def box(bar: Locator) -> Box:
    found = bar.bounding_box()
    assert found is not None
    return Box(found["x"], found["width"])


def only_from(ui_origin: str, seen: Watch) -> None:
    assert seen.requests
    assert seen.elsewhere(ui_origin) == []
    assert seen.blocked == []


def test_calls_run_together_overlap_on_screen_inside_their_step_and_a_bar_leads_to_its_entry(
        store_url: str, page: Page, console: Start, watch: Watch) -> None:
    with open_store(store_url) as store:
        result = run_agent("Nap twice together, then once", ScriptedModel([naps("a", "b"), naps("c"), "Rested."]),
                           tools(), store=store)
    ui = console(store_url)
    page.goto(ui.at(f"/runs/{result.run_id}"))
    waterfall = page.locator("section#waterfall")
    first, second, third = (waterfall.locator(f'rect.bar[data-kind="tool"][data-call-id="{n}"]') for n in "abc")
    a, b, c = box(first), box(second), box(third)
    assert a.x < b.right  # run together: their extents overlap on screen
    assert b.x < a.right
    assert min(a.width, b.width) > 100  # each is a fair part of a run of about 0.9 s
    for bar in (first, second, third):
        assert float(bar.get_attribute("data-duration-ms") or 0) >= NAP_S * 1000
    steps = [box(bar) for bar in waterfall.locator('rect.bar[data-kind="step"]').all()]
    assert len(steps) == 3
    assert steps[0].x <= min(a.x, b.x) + 0.5
    assert steps[0].right >= max(a.right, b.right) - 0.5
    assert steps[1].x <= c.x + 0.5
    assert steps[1].right >= c.right - 0.5
    for one, then in itertools.pairwise(steps):
        assert one.right <= then.x + 0.5  # consecutive steps do not overlap
    assert c.x >= max(a.right, b.right) - 0.5
    assert waterfall.locator("rect.bar").evaluate_all("bs => bs.map(b => b.dataset.kind)") == [
        "step", "model", "tool", "tool", "step", "model", "tool", "step", "model"]
    title = first.locator("title").text_content() or ""
    assert re.fullmatch(r"nap \(a\) · [0-9.]+(ms|s) · ok", title), title  # name, duration and outcome
    assert "tokens" in (waterfall.locator('rect.bar[data-kind="model"] title').first.text_content() or "")

    third.click()  # the bar leads to its entry
    assert urlsplit(page.url).fragment == "entry-7"
    entry = page.locator("li#entry-7")
    assert entry.get_attribute("data-call-id") == "c"
    expect(entry).to_be_in_viewport()
    only_from(ui.origin, watch)


def test_a_resumed_run_shows_its_resume_marker_past_the_wait_drawn_narrow(
        store_url: str, page: Page, console: Start, watch: Watch) -> None:
    with open_store(store_url) as store:
        waiting = run_agent("Nap, then send 5 to bob", ScriptedModel([naps("a"), reply("", call("t1", "transfer",
                                                                                               ref="bob"))]),
                            tools(), store=store)
        assert waiting.status == Status.AWAITING_APPROVAL
        time.sleep(IDLE_S)
        resume(store, waiting.run_id, ScriptedModel([naps("b"), "Sent."]), tools(), decisions={"t1": True},
               decided_by="alice")
    ui = console(store_url)
    page.goto(ui.at(f"/runs/{waiting.run_id}"))
    waterfall = page.locator("section#waterfall")
    marker = waterfall.locator('line.marker[data-kind="resumed"]')
    expect(marker).to_have_count(1)
    assert waterfall.locator("text.resume").evaluate("t => t.firstChild.textContent") == "resumed"
    assert waterfall.locator("text.resume title").text_content() == "resumed by alice after awaiting_approval"
    gap = waterfall.locator("rect.gap")
    assert (waterfall.locator("text.idle").text_content() or "").startswith("idle 2.")
    before, after = (box(waterfall.locator(f'rect.bar[data-kind="tool"][data-call-id="{n}"]')) for n in "ab")
    line, idle = box(marker), box(gap)
    assert before.right <= idle.x + 0.5
    assert idle.right <= line.x + 1.5
    assert line.x <= after.x + 1.5
    assert idle.width < before.width  # 2.5 s idle drawn narrower than a 0.3 s call
    started = waterfall.locator('rect.bar[data-call-id="b"]').get_attribute("data-start-ms")
    assert float(started or 0) > IDLE_S * 1000  # its time from the run's start, the wait included
    only_from(ui.origin, watch)


def started(store: RunStore) -> str:
    """The id of the store's one run, once it has started a tool call."""
    deadline = time.monotonic() + LIVE_MS / 1000
    while time.monotonic() < deadline:
        runs = store.list_runs(limit=1)
        if runs and any(e.kind == "tool_started" for e in store.get_run(runs[0].run_id).events):
            return runs[0].run_id
        time.sleep(0.05)
    pytest.fail(f"no run started a tool call within {LIVE_MS} ms")


def test_a_live_runs_waterfall_grows_as_it_runs(store_url: str, page: Page, console: Start, watch: Watch) -> None:
    release = threading.Event()

    def held(ref: str) -> str:
        release.wait(LIVE_MS / 1000)
        return f"held {ref}"

    registry = tools()
    registry.register("held", "Wait for the test.", PARAMS, held)
    done: list[AgentResult] = []
    with open_store(store_url) as store:
        model = ScriptedModel([reply("", call("h1", "held", ref="x")), naps("a", "b"), "Rested."])
        runner = threading.Thread(target=lambda: done.append(run_agent("Wait, then nap", model, registry,
                                                                       store=store)))
        runner.start()
        try:
            run_id = started(store)
            ui = console(store_url)
            page.goto(ui.at(f"/runs/{run_id}"))
            bars = page.locator("section#waterfall rect.bar")
            expect(bars).to_have_count(3)  # step 1, its model call, and the call under way
            running = page.locator('section#waterfall rect.bar[data-outcome="running"]')
            expect(running).to_have_count(2)  # the step and its call
        finally:
            release.set()
            runner.join(LIVE_MS / 1000)
        assert done
        assert done[0].status == Status.DONE
        expect(bars).to_have_count(9, timeout=LIVE_MS)  # three steps, each with its calls, drawn as the page refreshed
        expect(running).to_have_count(0)
        assert page.locator("#live").get_attribute("data-live") == "0"
    only_from(ui.origin, watch)


def test_hostile_tool_and_sub_agent_names_stay_text_in_the_bars_and_their_tooltips(
        store_url: str, page: Page, console: Start, watch: Watch) -> None:
    with open_store(store_url) as store:
        marked = run_agent("Call the marked tool", ScriptedModel([reply("", call("m1", XSS, ref="x")), "Done."]),
                           tools(), store=store)
        tree = run_tree(store, name=XSS)
    dialogs: list[str] = []

    def opened(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", opened)
    ui = console(store_url)
    for run_id, kind in ((marked.run_id, "tool"), (tree.parent, "subagent")):
        page.goto(ui.at(f"/runs/{run_id}"))
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("img").count() == 0
        bar = page.locator(f'section#waterfall rect.bar[data-kind="{kind}"]')
        call_id = "m1" if kind == "tool" else "p1"
        assert (bar.locator("title").text_content() or "").startswith(f"{XSS} ({call_id}) · ")
        label = page.locator(f"section#waterfall a.wf-label.k-{kind}")
        assert label.inner_text() == ("↳ " if kind == "subagent" else "") + f"{XSS} {call_id}"
    bar = page.locator('section#waterfall rect.bar[data-kind="subagent"]')
    assert bar.get_attribute("data-run-id") == tree.child
    with page.expect_navigation():
        bar.click()  # a sub-agent's bar leads to its child run's page
    assert urlsplit(page.url).path == f"/runs/{tree.child}"
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    only_from(ui.origin, watch)
