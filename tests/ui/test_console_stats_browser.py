"""The stats page in Chromium: a real ``runner ui`` process over a week of runs on SQLite and PostgreSQL.

The header leads to it; its four charts are drawn with bars, axes and a legend, their tooltips and tables hold
the names as text (a tool and a label made of markup never run), the filters redraw them, and a narrow window
still shows each chart whole. No request leaves the console's origin, and the CSP blocks nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from runner._log.statuses import Status
from tests.ui.helpers import Start, Watch
from tests.ui.stats_runs import XSS, fill_stats

pytestmark = [pytest.mark.process]

CHARTS = ("runs", "cost", "tool-latency", "tool-errors")
def safe(page: Page, origin: str, seen: Watch) -> None:
    """Nothing ran that the page did not serve, nothing left its origin, nothing was blocked."""
    assert page.evaluate("typeof window.__x") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("window.__violations") == []
    assert seen.blocked == []
    assert seen.requests
    assert seen.elsewhere(origin) == []


def test_the_four_charts_are_drawn_with_bars_axes_legends_and_tables(
        store_url: str, page: Page, console: Start, watch: Watch) -> None:
    fill_stats(store_url, xss=True)
    ui = console(store_url)
    page.goto(ui.at("/"))
    page.locator("header.top nav a", has_text="Stats").click()
    expect(page).to_have_url(ui.at("/stats"))
    for name in CHARTS:
        chart = page.locator(f'svg[data-chart="{name}"]')
        expect(chart).to_be_visible()
        box = chart.bounding_box()
        assert box is not None
        assert box["width"] > 400, name
        assert box["height"] > 100, name
        bars = chart.locator("rect.bar")
        assert bars.count() > 0, name
        widest = max((b or {"width": 0.0})["width"] for b in (bar.bounding_box() for bar in bars.all()))
        assert widest > 5, name  # drawn, not collapsed
        assert chart.locator("g.axis.x text").count() >= 2, name
        assert chart.locator("g.axis.y text").count() >= 2, name
        assert chart.locator("g.legend text").count() >= 1, name
    runs = page.locator('svg[data-chart="runs"]')
    assert runs.locator("g.legend text").all_text_contents()[0] == Status.DONE
    first_day = runs.locator("g.axis.x text").first
    assert first_day.evaluate("t => t.firstChild.textContent") == "03-02"
    assert first_day.locator("title").text_content() == "2026-03-02"
    table = page.locator('table[data-chart-table="runs"]')
    expect(table).to_be_hidden()
    page.locator("#chart-runs summary").click()
    expect(table).to_be_visible()
    assert table.locator("tbody tr").count() == 7
    shown = sum(int(row.locator("td").last.inner_text()) for row in table.locator("tbody tr").all())
    assert f"{shown} runs" in page.locator("#summary").inner_text()

    errors = page.locator('svg[data-chart="tool-errors"]')
    marked = errors.locator("g.axis.y text", has_text="<img")
    assert marked.evaluate("t => t.firstChild.textContent") == "<img src=x onerror=wind…"  # the markup is text
    assert marked.locator("title").text_content() == XSS
    titles = errors.locator("rect.bar title").all_text_contents()
    assert f"{XSS}: 0 of 1 call failed (0%)" in titles
    assert "fetch: 4 of 8 calls failed (50%)" in titles
    page.locator("#chart-tool-latency summary").click()
    assert XSS in page.locator('table[data-chart-table="tool-latency"]').inner_text()
    safe(page, ui.origin, watch)


def test_the_filters_redraw_the_charts_and_markup_in_a_label_stays_text(
        store_url: str, page: Page, console: Start, watch: Watch) -> None:
    fill_stats(store_url, xss=True)
    ui = console(store_url)
    page.goto(ui.at("/stats"))
    form = page.locator("form#filters")
    form.locator('input[name="label"]').fill(f"team={XSS}")
    with page.expect_navigation():
        form.locator('button[type="submit"]').click()
    assert parse_qs(urlsplit(page.url).query)["label"] == [f"team={XSS}"]
    assert page.locator("#summary strong").inner_text() == "1 run"
    assert page.locator('svg[data-chart="runs"] rect.bar').count() == 1
    assert page.locator('svg[data-chart="tool-latency"] g.axis.y text').all_text_contents()[0].startswith("<img")
    expect(form.locator('input[name="label"]')).to_have_value(f"team={XSS}")

    form.locator('input[name="label"]').fill("")
    form.locator('input[name="since"]').fill("2030-01-01")
    with page.expect_navigation():
        form.locator('button[type="submit"]').click()
    assert page.locator("svg[data-chart]").count() == 0
    expect(page.locator('[data-chart-empty="runs"]')).to_have_text("no runs in this window")
    safe(page, ui.origin, watch)


def test_a_narrow_window_shows_each_chart_whole(store_url: str, page: Page, console: Start, watch: Watch) -> None:
    fill_stats(store_url)
    ui = console(store_url)
    page.set_viewport_size({"width": 640, "height": 900})
    page.goto(ui.at("/stats"))
    for name in CHARTS:
        chart = page.locator(f'svg[data-chart="{name}"]')
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        assert box is not None
        assert box["x"] >= 0, name
        assert box["x"] + box["width"] <= 640, name
        labels = [b for b in (t.bounding_box() for t in chart.locator("g.axis.y text").all()) if b]
        assert min(b["x"] for b in labels) >= box["x"] - 1, name  # the axis's texts inside the chart
    safe(page, ui.origin, watch)
