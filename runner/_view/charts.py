"""The stats page's four charts as geometry: runs per day by status, cost per day by model, tool latency and errors.

Built from what ``stats.gather`` returns (``runner stats --json``); ``_chart.html`` draws each as an inline SVG
(axes, legend, a tooltip per bar) with the same numbers in a table, escaping every name. A chart of nothing is
not drawn: its ``empty`` says what the window lacks. Days between the first and the last are drawn with none
when they span at most ``FILL_DAYS`` days; a longer span draws only the days that have some.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any, Final, NamedTuple

from .._log.statuses import Status
from .._text import plural, shown_name
from .axis import clock
from .plot import Box, Key, Mark, Note, Scale, Tick, fit, legend, linear, short, spread, steps, width_of
from .summary import money, seconds

WIDTH: Final = 600.0  # every chart's viewBox is this wide
PAD: Final = 10.0
PLOT_HEIGHT: Final = 190.0  # a day chart's plot, below its legend
LATENCY_ROW: Final = 26.0  # a tool's row: its p50 bar over its p95 bar
ERRORS_ROW: Final = 20.0
MOST_TOOLS: Final = 25  # the tools drawn (the most called); the table lists every one
MOST_MODELS: Final = 7  # the models drawn in colours of their own; the rest share one
FILL_DAYS: Final = 92
NAME_CHARS: Final = 24  # a tool's name on its axis, cut past this
STATUS_ORDER: Final = {status.value: n for n, status in enumerate(Status)}
OTHER_MODELS: Final = "other models"
NOWHERE: Final = Box(0.0, 0.0, 0.0, 0.0)  # the plot of a chart of nothing
BELOW: Final = 40.0  # under a plot: its ticks' texts and its axis's title


class Day(NamedTuple):
    """A day (ISO date) of a day chart: each series' value, and per model its calls and those of unknown cost."""

    day: str
    values: Mapping[str, float]
    calls: Mapping[str, int] = {}
    unknown: Mapping[str, int] = {}


class ToolRow(NamedTuple):
    """A tool's line of the stats: its calls, failed calls and latencies (seconds, None when it has none)."""

    name: str
    calls: int
    errors: int
    median_s: float | None
    p95_s: float | None
    mean_s: float | None


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart: its name (``data-chart``), what it shows in words, its size, plot, axes, bars, legend, table."""

    name: str
    label: str
    width: float = WIDTH
    height: float = 0.0
    plot: Box = NOWHERE
    x_ticks: tuple[Tick, ...] = ()
    y_ticks: tuple[Tick, ...] = ()
    x_title: str = ""
    y_title: str = ""
    grid: str = "y"  # the axis whose ticks draw lines across the plot
    marks: tuple[Mark, ...] = ()
    notes: tuple[Note, ...] = ()
    legend: tuple[Key, ...] = ()
    head: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    names: int = 1  # the table's first columns that hold names, not numbers
    empty: str = ""  # why nothing is drawn ("" when something is)


class Charts(NamedTuple):
    """The stats page's charts, in the page's order."""

    runs: Chart
    cost: Chart
    tool_latency: Chart
    tool_errors: Chart


def of_stats(found: Mapping[str, Any]) -> Charts:
    """The four charts of ``stats.gather``'s answer."""
    days = found["days"]
    runs = [Day(d["day"], d["by_status"]) for d in days if d["by_status"]]
    cost = [Day(d["day"], {m: v["cost_known_usd"] for m, v in d["models"].items()},
                {m: v["calls"] for m, v in d["models"].items()},
                {m: v["costs_unknown"] for m, v in d["models"].items()}) for d in days if d["models"]]
    tools = [ToolRow(name, t["calls"], t["errors"], t["median_s"], t["p95_s"], t["mean_s"])
             for name, t in found["tools"].items()]
    return Charts(runs_chart(runs), cost_chart(cost, list(found["models"])), latency_chart(tools),
                  errors_chart(tools))


def status_css(status: str) -> str:
    """The colour class of a status (``st-done``); one a newer runner wrote shares ``st-other``."""
    return f"st-{status}" if status in STATUS_ORDER else "st-other"


def runs_chart(days: Sequence[Day]) -> Chart:
    """Runs per day, a bar per day stacked by status (in ``Status``'s order), coloured as the console colours them."""
    name = "runs"
    if not days:
        return Chart(name, "Runs per day by status: none", empty="no runs in this window")
    statuses = sorted({s for d in days for s in d.values}, key=lambda s: (STATUS_ORDER.get(s, len(STATUS_ORDER)), s))
    series = [(s, status_css(s), shown_name(s)) for s in statuses]
    total = sum(sum(d.values.values()) for d in days)

    def title(day: str, key: str, value: float) -> str:
        return f"{day} · {shown_name(key)}: {plural(int(value), 'run')}"

    drawn = day_chart(name, days, series, title, y_title="runs", label=short, whole=True)
    head = ("day (UTC)", *(shown_name(s) for s in statuses), "runs")
    rows = tuple((d.day, *(str(int(d.values.get(s, 0))) for s in statuses), str(int(sum(d.values.values()))))
                 for d in days)
    return replace(drawn.chart, head=head, rows=rows,
                   label=f"Runs per day by status: {plural(int(total), 'run')} {span(days)}")


def cost_chart(days: Sequence[Day], models: Sequence[str]) -> Chart:
    """Known cost per day, a bar per day stacked by model; "≥" over a day with calls of unknown cost."""
    name = "cost"
    if not days:
        return Chart(name, "Cost per day by model: no model calls", empty="no model calls in this window")
    ranked = [m for m in models if any(m in d.values for d in days)]
    ranked += sorted({m for d in days for m in d.values} - set(ranked))
    own = ranked if len(ranked) <= MOST_MODELS + 1 else ranked[:MOST_MODELS]
    lumped = {d.day: Day(d.day, _lump(d.values, own), _lump(d.calls, own), _lump(d.unknown, own)) for d in days}
    priced = {m for d in lumped.values() for m, v in d.values.items() if v > 0}
    series = [(m, f"m{n}", shown_name(m) + ("" if m in priced else " (cost unknown)")) for n, m in enumerate(own)]
    if len(own) < len(ranked):
        series.append((OTHER_MODELS, "m-other", OTHER_MODELS))
    known = sum(sum(d.values.values()) for d in days)
    unknown = sum(sum(d.unknown.values()) for d in days)

    def title(day: str, key: str, value: float) -> str:
        calls, unpriced = lumped[day].calls.get(key, 0), lumped[day].unknown.get(key, 0)
        return f"{day} · {shown_name(key)}: {money(value, unpriced)} ({plural(calls, 'call')}" + (
            f", {unpriced} of unknown cost)" if unpriced else ")")

    drawn = day_chart(name, list(lumped.values()), series, title, y_title="USD", label=dollars,
                      extra=[("unknown", "≥ some calls of unknown cost")] if unknown else [])
    notes = []
    for day in lumped.values():
        unpriced = sum(day.unknown.values())
        if unpriced:
            floor = sum(day.values.values())
            notes.append(Note(drawn.centers[day.day], round(drawn.scale.at(floor) - 3, 2), "≥", "unknown",
                              f"{day.day}: {plural(unpriced, 'model call')} of unknown cost; at least {money(floor)}",
                              "middle"))
    plot = drawn.chart.plot
    if not known:
        notes.append(Note(round(plot.left + plot.width / 2, 2), round(plot.top + 30, 2),
                          "no cost known: no model call had a price and its usage", "empty-note", anchor="middle"))
    head = ("day (UTC)", "model", "calls", "cost")
    rows = tuple((d.day, shown_name(m), str(d.calls.get(m, 0)), money(d.values.get(m, 0.0), d.unknown.get(m, 0)))
                 for d in days for m in sorted(d.values, key=lambda m: (-d.values[m], m)))
    return replace(drawn.chart, notes=tuple(notes), head=head, rows=rows, names=2,
                   label=f"Cost per day by model: {money(known, unknown)} {span(days)}")


def latency_chart(tools: Sequence[ToolRow]) -> Chart:
    """Each tool's p50 and p95 latency as two bars, on a log scale when they spread widely."""
    name = "tool-latency"
    timed = [t for t in tools if t.p95_s is not None]
    if not timed:
        return Chart(name, "Tool latency p50 and p95: no tool calls", empty="no tool calls in this window")
    drawn = timed[:MOST_TOOLS]
    keys, top = legend([("p50", "p50 (median)"), ("p95", "p95")], PAD, WIDTH - PAD, PAD)
    plot = _rows_box(drawn, top, LATENCY_ROW, room=0.0)
    scale, ticks = spread([v for t in drawn for v in (t.median_s, t.p95_s) if v is not None], plot.left,
                          plot.right, on_axis)
    marks: list[Mark] = []
    for n, tool in enumerate(drawn):
        y = plot.top + n * LATENCY_ROW
        for css, value, dy in (("p50", tool.median_s, 4.0), ("p95", tool.p95_s, 13.0)):
            if value is not None:
                width = max(scale.at(value) - plot.left, 2.0)
                marks.append(Mark(plot.left, round(y + dy, 2), round(width, 2), 8.0, css,
                                  f"{shown_name(tool.name)} · {css} {seconds(value)} · {plural(tool.calls, 'call')}",
                                  css, tool.name, value))
    rows = tuple((shown_name(t.name), str(t.calls), seconds(t.median_s), seconds(t.p95_s), seconds(t.mean_s))
                 for t in tools)
    return Chart(name, f"Tool latency p50 and p95 of {plural(len(timed), 'tool')}{_cut(timed, drawn)}",
                 height=plot.bottom + BELOW, plot=plot, x_ticks=tuple(ticks), y_ticks=_names(drawn, plot, LATENCY_ROW),
                 x_title="seconds" + (" (log scale)" if scale.log else ""), grid="x", marks=tuple(marks),
                 legend=tuple(keys), head=("tool", "calls", "p50", "p95", "mean"), rows=rows)


def errors_chart(tools: Sequence[ToolRow]) -> Chart:
    """Each tool's share of calls that failed, 0 to 100%, its errors and calls written at the bar's end."""
    name = "tool-errors"
    called = [t for t in tools if t.calls > 0]
    if not called:
        return Chart(name, "Tool error rate: no tool calls", empty="no tool calls in this window")
    drawn = called[:MOST_TOOLS]
    texts = [f"{t.errors / t.calls:.0%} ({t.errors}/{t.calls})" for t in drawn]
    keys, top = legend([("err", "failed calls / calls")], PAD, WIDTH - PAD, PAD)
    plot = _rows_box(drawn, top, ERRORS_ROW, room=max(width_of(t) for t in texts) + 8)
    scale, ticks = linear(1.0, plot.left, plot.right, lambda r: f"{r:.0%}", count=5)
    marks, notes = [], []
    for n, (tool, text) in enumerate(zip(drawn, texts, strict=True)):
        y, rate = plot.top + n * ERRORS_ROW, tool.errors / tool.calls
        end = scale.at(rate)
        marks.append(Mark(plot.left, round(y + 4, 2), round(end - plot.left, 2), 12.0, "err",
                          f"{shown_name(tool.name)}: {tool.errors} of {plural(tool.calls, 'call')} failed ({rate:.0%})",
                          "error rate", tool.name, rate))
        notes.append(Note(round(end + 4, 2), round(y + 14, 2), text, "value"))
    rows = tuple((shown_name(t.name), str(t.calls), str(t.errors), f"{t.errors / t.calls:.0%}") for t in called)
    return Chart(name, f"Tool error rate of {plural(len(called), 'tool')}{_cut(called, drawn)}",
                 height=plot.bottom + BELOW, plot=plot, x_ticks=tuple(ticks), y_ticks=_names(drawn, plot, ERRORS_ROW),
                 x_title="calls that failed", grid="x", marks=tuple(marks), notes=tuple(notes), legend=tuple(keys),
                 head=("tool", "calls", "errors", "error rate"), rows=rows)


class Drawn(NamedTuple):
    """A day chart, its vertical scale and the middle of each day's bar (to write over a bar)."""

    chart: Chart
    scale: Scale
    centers: dict[str, float]


def day_chart(name: str, days: Sequence[Day], series: Sequence[tuple[str, str, str]],
              title: Callable[[str, str, float], str], y_title: str, label: Callable[[float], str],
              whole: bool = False, extra: Sequence[tuple[str, str]] = ()) -> Drawn:
    """Bars per day stacked by ``series`` (key, colour class, legend text), on axes of days and values."""
    keys, legend_bottom = legend([(css, text) for _, css, text in series] + list(extra), PAD, WIDTH - PAD, PAD)
    highest = max(sum(d.values.values()) for d in days)
    labels = [label(v) for v in steps(highest, whole=whole)]
    left = PAD + 18 + max(width_of(t) for t in labels) + 6
    plot = Box(round(left, 2), legend_bottom + 10, WIDTH - PAD, legend_bottom + 10 + PLOT_HEIGHT)
    scale, y_ticks = linear(highest, plot.bottom, plot.top, label, whole)
    shown = filled([d.day for d in days])
    band = plot.width / len(shown)
    bar = min(band * 0.72, 36.0)
    by_day = {d.day: d for d in days}
    marks: list[Mark] = []
    centers: dict[str, float] = {}
    for n, day in enumerate(shown):
        x, low = plot.left + n * band + (band - bar) / 2, 0.0
        centers[day] = round(x + bar / 2, 2)
        values = by_day[day].values if day in by_day else {}
        for key, css, _ in series:
            value = values.get(key, 0)
            if value > 0:
                top, bottom = scale.at(low + value), scale.at(low)
                marks.append(Mark(round(x, 2), round(top, 2), round(bar, 2), round(bottom - top, 2), css,
                                  title(day, key, value), key, day, value))
                low += value
    gaps = "" if len(shown) > len(days) or filled_span(shown) == len(shown) else "; days with none left out"
    chart = Chart(name, name, height=plot.bottom + BELOW, plot=plot, x_ticks=day_ticks(shown, plot, band),
                  y_ticks=tuple(y_ticks), x_title=f"day (UTC{gaps})", y_title=y_title, grid="y", marks=tuple(marks),
                  legend=tuple(keys))
    return Drawn(chart, scale, centers)


def filled_span(days: Sequence[str]) -> int:
    """How many days there are from the first of ``days`` to the last."""
    return (date.fromisoformat(days[-1]) - date.fromisoformat(days[0])).days + 1


def filled(days: Sequence[str]) -> list[str]:
    """``days`` (ISO dates, oldest first) with the days between them, when they span at most ``FILL_DAYS``."""
    first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    if (last - first).days + 1 > FILL_DAYS:
        return list(days)
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def day_ticks(days: Sequence[str], plot: Box, band: float) -> tuple[Tick, ...]:
    """A tick under every day, or every few days so their texts do not meet: ``MM-DD``, or the date in full."""
    cut = 5 if len({d[:4] for d in days}) == 1 else 0  # one year: its days as MM-DD
    every = max(math.ceil((width_of(days[0][cut:]) + 10) / band), 1)
    return tuple(Tick(round(plot.left + (n + 0.5) * band, 2), d[cut:], d) for n, d in enumerate(days) if n % every == 0)


def span(days: Sequence[Day]) -> str:
    """The days a chart covers, in words."""
    first, last = days[0].day, days[-1].day
    return f"on {first}" if first == last else f"from {first} to {last}"


def on_axis(value_s: float) -> str:
    """A latency on an axis: ``0``, ``0.5 ms``, ``1 s``, ``100 s`` (seconds past a minute, for a log scale's ticks)."""
    return clock(value_s * 1000) if value_s < 60 else f"{short(value_s)} s"


def dollars(value: float) -> str:
    """A cost on an axis: ``$0``, ``$0.02``, ``$1.5``, ``$25k``."""
    if value == 0:
        return "$0"
    return f"${short(value)}" if value >= 1 else f"${value:.4g}"


def _lump(values: Mapping[str, Any], own: Sequence[str]) -> dict[str, Any]:
    """``values`` by model, those past ``own`` added up as ``OTHER_MODELS``."""
    found = {m: v for m, v in values.items() if m in own}
    rest = [v for m, v in values.items() if m not in own]
    if rest:
        found[OTHER_MODELS] = sum(rest)
    return found


def _rows_box(tools: Sequence[ToolRow], top: float, row: float, room: float) -> Box:
    """The plot of a chart with a row per tool: its names on the left, ``room`` kept on the right."""
    left = PAD + max(width_of(fit(shown_name(t.name), NAME_CHARS)) for t in tools) + 8
    return Box(round(left, 2), top + 6, round(WIDTH - PAD - max(room, 12.0), 2), top + 6 + row * len(tools))


def _names(tools: Sequence[ToolRow], plot: Box, row: float) -> tuple[Tick, ...]:
    """The tools' names on the vertical axis, each in the middle of its row (cut, with the whole name as title)."""
    ticks = []
    for n, tool in enumerate(tools):
        name = shown_name(tool.name)
        label = fit(name, NAME_CHARS)
        ticks.append(Tick(round(plot.top + (n + 0.5) * row, 2), label, name if label != name else ""))
    return tuple(ticks)


def _cut(every: Sequence[ToolRow], drawn: Sequence[ToolRow]) -> str:
    return f" (the {len(drawn)} most called drawn; the table lists all)" if len(drawn) < len(every) else ""
