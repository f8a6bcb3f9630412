"""The stats page's charts without a store or a browser: ``_view.charts`` and ``_view.plot``, drawn by ``_chart.html``.

Axes start at 0 and reach past the highest value, bars stack in their day and stay in the plot, each legend names
what is drawn, each table holds the chart's numbers, names are cut on the axis and given whole in a tooltip, markup
in a name stays text, and nothing is drawn for no data; a huge number, a single day and a long span still draw.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from xml.etree import ElementTree

import pytest

from runner._log.statuses import Status
from runner._view import charts, plot
from runner._view.charts import Chart, Day, ToolRow
from runner.ui.app import templates

XSS = "<img src=x onerror=window.__x=1>"
SVG = "{http://www.w3.org/2000/svg}"
WEEK = [f"2026-03-0{n}" for n in range(2, 9)]


def drawn(chart: Chart, heading: str = "A chart") -> str:
    """The chart as the page draws it (the console's own templates, autoescaped)."""
    page = templates().from_string('{% from "_chart.html" import chart %}{{ chart(c, heading) }}')
    return page.render(c=chart, heading=heading)


def svg_of(html: str) -> ElementTree.Element:
    """The chart's ``<svg>`` parsed as XML: well-formed whatever the names held."""
    start, end = html.index("<svg"), html.index("</svg>") + len("</svg>")
    return ElementTree.fromstring(html[start:end].replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


def in_plot(chart: Chart) -> None:
    """Every bar lies inside the plot (a hundredth of a unit of rounding aside)."""
    box = chart.plot
    for mark in chart.marks:
        assert all(math.isfinite(v) for v in (mark.x, mark.y, mark.width, mark.height)), mark
        assert box.left - 0.01 <= mark.x, mark
        assert mark.x + mark.width <= box.right + 0.01, mark
        assert box.top - 0.01 <= mark.y, mark
        assert mark.y + mark.height <= box.bottom + 0.01, mark
        assert mark.width >= 0
        assert mark.height >= 0


def values(ticks: Sequence[plot.Tick]) -> list[str]:
    return [tick.label for tick in ticks]


def test_runs_per_day_stack_by_status_on_axes_from_zero() -> None:
    days = [Day("2026-03-02", {Status.DONE: 3, Status.MODEL_ERROR: 1}), Day("2026-03-04", {Status.STEP_LIMIT: 2})]
    chart = charts.runs_chart(days)
    assert chart.name == "runs"
    assert not chart.empty
    assert values(chart.y_ticks) == ["0", "1", "2", "3", "4"]
    assert [t.at for t in chart.y_ticks] == sorted((t.at for t in chart.y_ticks), reverse=True)  # up the page
    assert chart.y_ticks[0].at == chart.plot.bottom
    assert chart.y_ticks[-1].at == chart.plot.top
    assert values(chart.x_ticks) == ["03-02", "03-03", "03-04"]  # the day with none is drawn, empty
    assert [(m.at, m.series, m.css) for m in chart.marks] == [
        ("2026-03-02", Status.DONE, "st-done"), ("2026-03-02", Status.MODEL_ERROR, "st-model_error"),
        ("2026-03-04", Status.STEP_LIMIT, "st-step_limit")]
    done, error, limit = chart.marks
    assert done.y + done.height == pytest.approx(chart.plot.bottom)  # from the axis up
    assert error.y + error.height == pytest.approx(done.y)  # stacked on the one below
    assert done.height == pytest.approx(3 * error.height) == pytest.approx(1.5 * limit.height)
    assert done.title == "2026-03-02 · done: 3 runs"
    in_plot(chart)
    assert [k.label for k in chart.legend] == [Status.DONE, Status.STEP_LIMIT, Status.MODEL_ERROR]
    assert chart.head == ("day (UTC)", Status.DONE, Status.STEP_LIMIT, Status.MODEL_ERROR, "runs")
    assert chart.rows == (("2026-03-02", "3", "0", "1", "4"), ("2026-03-04", "0", "2", "0", "2"))
    assert chart.label == "Runs per day by status: 6 runs from 2026-03-02 to 2026-03-04"


def test_the_drawn_chart_has_its_axes_legend_tooltips_and_table() -> None:
    html = drawn(charts.runs_chart([Day(d, {Status.DONE: n + 1}) for n, d in enumerate(WEEK)]), "Runs per day")
    svg = svg_of(html)
    assert svg.get("data-chart") == "runs"
    assert svg.get("role") == "img"
    assert (svg.get("aria-label") or "").startswith("Runs per day by status: 28 runs")
    axes = {g.get("class"): g for g in svg.iter(f"{SVG}g")}
    assert len(list(axes["axis x"].iter(f"{SVG}line"))) == 1 + 7  # the axis and a tick a day
    assert [t.text for t in axes["axis y"].iter(f"{SVG}text")][:-1] == ["0", "2", "4", "6", "8"]
    assert [t.text for t in axes["legend"].iter(f"{SVG}text")] == [Status.DONE]
    bars = list(axes["marks"].iter(f"{SVG}rect"))
    assert len(bars) == 7
    assert [b.findtext(f"{SVG}title") for b in bars][-1] == "2026-03-08 · done: 7 runs"
    table = html[html.index("<details"):]
    assert "<summary>Table</summary>" in table
    assert table.count("<tr>") == 1 + 7
    assert "<td>2026-03-05</td><td class=\"n\">4</td><td class=\"n\">4</td>" in table


def test_markup_in_a_name_stays_text_in_the_svg_its_tooltips_and_its_table() -> None:
    tools = [ToolRow(XSS, 4, 1, 0.01, 0.2, 0.05), ToolRow("ok", 2, 0, 0.001, 0.002, 0.001)]
    models = [Day("2026-03-02", {XSS: 0.5}, {XSS: 3}, {XSS: 1})]
    for chart in (charts.latency_chart(tools), charts.errors_chart(tools), charts.cost_chart(models, [XSS]),
                  charts.runs_chart([Day("2026-03-02", {XSS: 1})])):
        html = drawn(chart, XSS)
        assert "<img" not in html, chart.name
        assert "&lt;img src=x onerror=window.__x=1&gt;" in html
        svg = svg_of(html)  # still one well-formed svg
        texts = [e.text or "" for e in svg.iter() if e.tag in (f"{SVG}text", f"{SVG}title")]
        assert any(XSS[:10] in text for text in texts), chart.name
        assert not [e for e in svg.iter() if e.tag in (f"{SVG}img", "img", f"{SVG}script", "script")]
    assert charts.status_css(XSS) == "st-other"  # a status no runner wrote shares a colour, its name stays out


def test_no_data_draws_no_chart_but_says_so() -> None:
    empty = charts.of_stats({"days": [], "tools": {}, "models": {}})
    assert [c.empty for c in empty] == ["no runs in this window", "no model calls in this window",
                                        "no tool calls in this window", "no tool calls in this window"]
    for chart in empty:
        html = drawn(chart)
        assert "<svg" not in html
        assert f'data-chart-empty="{chart.name}"' in html
        assert not chart.marks
        assert not chart.rows


def test_a_huge_number_gets_short_ticks_and_stays_in_the_plot() -> None:
    chart = charts.runs_chart([Day("2026-03-02", {Status.DONE: 10**15}), Day("2026-03-03", {Status.DONE: 1})])
    assert values(chart.y_ticks)[-1] == "1e+15"
    assert values(chart.y_ticks) == ["0", "500T", "1e+15"]
    in_plot(chart)
    assert chart.marks[0].height == pytest.approx(chart.plot.height)
    assert chart.rows[0][-1] == str(10**15)
    cost = charts.cost_chart([Day("2026-03-02", {"m": 2.5e9}, {"m": 1}, {})], ["m"])
    assert values(cost.y_ticks) == ["$0", "$1B", "$2B", "$3B"]
    in_plot(cost)
    assert plot.short(999_999) == "1M"
    assert plot.short(1234) == "1.23k"
    assert plot.short(0.25) == "0.25"


def test_a_single_day_is_one_bar_no_wider_than_the_cap() -> None:
    chart = charts.runs_chart([Day("2026-03-02", {Status.DONE: 1})])
    assert values(chart.x_ticks) == ["03-02"]
    (bar,) = chart.marks
    assert bar.width == 36.0
    assert bar.x + bar.width / 2 == pytest.approx(chart.plot.left + chart.plot.width / 2)
    assert values(chart.y_ticks) == ["0", "1"]  # whole runs, never half of one
    assert chart.label.endswith("1 run on 2026-03-02")


def test_days_spanning_years_are_dated_in_full_and_a_long_span_leaves_empty_days_out() -> None:
    days = [Day("2025-12-30", {Status.DONE: 1}), Day("2026-01-02", {Status.DONE: 2})]
    chart = charts.runs_chart(days)
    assert values(chart.x_ticks)[0] == "2025-12-30"
    assert len(chart.x_ticks) <= 4
    apart = charts.runs_chart([Day("2025-01-01", {Status.DONE: 1}), Day("2026-01-01", {Status.DONE: 1})])
    assert [t.title for t in apart.x_ticks] == ["2025-01-01", "2026-01-01"]
    assert apart.x_title == "day (UTC; days with none left out)"
    many = charts.runs_chart([Day(f"2026-{m:02d}-{d:02d}", {Status.DONE: 1}) for m in (1, 2, 3) for d in (1, 15)])
    ticks = [t.at for t in many.x_ticks]
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert min(gaps) >= plot.width_of("03-01")  # 60 days filled: every few days labelled, never overlapping
    assert len({m.x for m in many.marks}) == 6


def test_cost_stacks_by_model_and_marks_the_days_with_calls_of_unknown_cost() -> None:
    days = [Day("2026-03-02", {"a:big": 0.03, "b:small": 0.01}, {"a:big": 2, "b:small": 5}, {}),
            Day("2026-03-03", {"b:small": 0.02, "c:local": 0.0}, {"b:small": 1, "c:local": 4}, {"c:local": 4})]
    chart = charts.cost_chart(days, ["a:big", "b:small", "c:local"])
    assert [k.label for k in chart.legend] == ["a:big", "b:small", "c:local (cost unknown)",
                                             "≥ some calls of unknown cost"]
    assert [(m.at, m.series) for m in chart.marks] == [("2026-03-02", "a:big"), ("2026-03-02", "b:small"),
                                                       ("2026-03-03", "b:small")]  # a cost of 0 draws nothing
    assert values(chart.y_ticks) == ["$0", "$0.01", "$0.02", "$0.03", "$0.04"]
    (unknown,) = chart.notes
    assert unknown.text == "≥"
    assert unknown.title == "2026-03-03: 4 model calls of unknown cost; at least $0.0200"
    assert unknown.y < chart.marks[2].y  # over its day's bar
    assert chart.marks[1].title == "2026-03-02 · b:small: $0.0100 (5 calls)"
    assert ("2026-03-03", "c:local", "4", "-") in chart.rows
    assert chart.label == "Cost per day by model: ≥$0.0600 from 2026-03-02 to 2026-03-03"
    nothing_known = charts.cost_chart([Day("2026-03-02", {"c:local": 0.0}, {"c:local": 2}, {"c:local": 2})],
                                      ["c:local"])
    assert not nothing_known.marks
    assert [n.css for n in nothing_known.notes] == ["unknown", "empty-note"]


def test_models_past_the_seventh_share_one_colour() -> None:
    models = [f"p:m{n}" for n in range(10)]
    chart = charts.cost_chart([Day("2026-03-02", {m: 1.0 + n for n, m in enumerate(models)},
                                   dict.fromkeys(models, 1), {})], models)
    assert [k.label for k in chart.legend] == [*models[:7], "other models"]
    assert chart.marks[-1].series == "other models"
    assert chart.marks[-1].value == pytest.approx(8 + 9 + 10)
    assert len(chart.rows) == 10  # the table names every model


def test_latency_uses_a_log_scale_when_tools_differ_widely() -> None:
    tools = [ToolRow("slow", 3, 0, 2.0, 30.0, 5.0), ToolRow("fast", 9, 0, 0.001, 0.004, 0.002)]
    chart = charts.latency_chart(tools)
    assert chart.x_title == "seconds (log scale)"
    assert values(chart.x_ticks) == ["0.1 ms", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"]
    assert [(m.at, m.series) for m in chart.marks] == [("slow", "p50"), ("slow", "p95"), ("fast", "p50"),
                                                       ("fast", "p95")]
    slow50, slow95, fast50, _ = chart.marks
    assert fast50.width > 2
    assert slow50.width < slow95.width
    assert slow95.y > slow50.y  # p95 under p50 in its row
    in_plot(chart)
    assert chart.rows == (("slow", "3", "2.00s", "30.00s", "5.00s"), ("fast", "9", "1.0ms", "4.0ms", "2.0ms"))
    close = charts.latency_chart([ToolRow("a", 1, 0, 0.1, 0.2, 0.15), ToolRow("b", 1, 0, 0.3, 0.4, 0.35)])
    assert close.x_title == "seconds"
    assert values(close.x_ticks)[0] == "0"


def test_error_rate_runs_from_0_to_100_percent_with_its_counts() -> None:
    long = "a_tool_with_a_very_long_name_indeed"
    tools = [ToolRow(long, 8, 4, 0.1, 0.1, 0.1), ToolRow("never", 3, 0, 0.1, 0.1, 0.1),
             ToolRow("unused", 0, 0, None, None, None)]
    chart = charts.errors_chart(tools)
    assert values(chart.x_ticks) == ["0%", "20%", "40%", "60%", "80%", "100%"]
    half, none = chart.marks
    assert half.width == pytest.approx(chart.plot.width / 2)
    assert none.width == 0
    assert [n.text for n in chart.notes] == ["50% (4/8)", "0% (0/3)"]
    assert chart.y_ticks[0].label == long[:23] + "…"
    assert chart.y_ticks[0].title == long
    assert chart.rows == ((long, "8", "4", "50%"), ("never", "3", "0", "0%"))
    in_plot(chart)
    assert max(n.x + plot.width_of(n.text) for n in chart.notes) <= chart.width  # the counts fit


def test_a_tool_list_past_the_most_drawn_is_cut_and_the_table_keeps_every_tool() -> None:
    tools = [ToolRow(f"t{n}", 100 - n, n % 3, 0.01, 0.02, 0.01) for n in range(40)]
    for chart in (charts.latency_chart(tools), charts.errors_chart(tools)):
        assert len(chart.y_ticks) == charts.MOST_TOOLS
        assert len(chart.rows) == 40
        assert chart.label.endswith("(the 25 most called drawn; the table lists all)")


def test_the_legend_wraps_into_rows_and_cuts_long_names() -> None:
    keys, bottom = plot.legend([("a", "x" * 40), ("b", "short"), ("c", "y" * 60)], 10, 300, 10)
    assert keys[0].label == "x" * 27 + "…"
    assert keys[0].title == "x" * 40
    assert keys[1].y == keys[0].y  # fits beside the first
    assert keys[2].y > keys[1].y
    assert keys[2].x == 10
    assert bottom == keys[2].y + plot.LEGEND_ROW
