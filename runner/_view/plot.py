"""The parts the stats page's charts are drawn from: scales, ticks at round values, legends, short numbers.

Pure geometry in SVG user units (a chart's ``viewBox``): the template draws it, escaping every text.
Text widths are estimates (``CHAR_W`` per character of the charts' 11px text), so a name too long for
its place is cut with ``…`` and given whole in a tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from .axis import nice

CHAR_W: Final = 6.4  # about how wide a character of the charts' 11px text is
LEGEND_ROW: Final = 18.0  # the height of a row of the legend
SWATCH: Final = 10.0
LOG_FROM: Final = 100.0  # values spread wider than this factor are drawn on a log scale
SUFFIXES: Final = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))  # past 999T: 1e+15


class Box(NamedTuple):
    """The plot area: the axes' corner is (``left``, ``bottom``)."""

    left: float
    top: float
    right: float
    bottom: float

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.bottom - self.top


class Tick(NamedTuple):
    """A mark on an axis at ``at`` (x on the horizontal axis, y on the vertical one), its text, the whole text."""

    at: float
    label: str
    title: str = ""


class Mark(NamedTuple):
    """A bar: where, its colour's class, its tooltip; ``series``, ``at`` and ``value`` say what it stands for."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    series: str
    at: str
    value: float


class Note(NamedTuple):
    """A text in the plot (a value at a bar's end, a "≥" over a cost partly unknown), with its tooltip."""

    x: float
    y: float
    text: str
    css: str
    title: str = ""
    anchor: str = "start"


class Key(NamedTuple):
    """A legend entry: its swatch at (``x``, ``y``), its colour's class, its text and the whole text."""

    x: float
    y: float
    css: str
    label: str
    title: str = ""


class Scale:
    """Values from ``low`` to ``high`` onto ``start`` to ``end``: linearly, or on a log scale (``low`` above 0)."""

    def __init__(self, low: float, high: float, start: float, end: float, log: bool = False) -> None:
        self.low, self.high, self.start, self.end, self.log = low, high, start, end, log

    def at(self, value: float) -> float:
        """Where ``value`` falls; values outside the range are kept to its ends."""
        value = min(max(value, self.low), self.high)
        if self.log:
            span = math.log10(self.high) - math.log10(self.low)
            share = (math.log10(value) - math.log10(self.low)) / span if span else 0.0
        else:
            share = (value - self.low) / (self.high - self.low) if self.high > self.low else 0.0
        return self.start + share * (self.end - self.start)


def steps(high: float, count: int = 4, whole: bool = False) -> list[float]:
    """Round values from 0 up to ``high`` or just past it, about ``count`` steps (whole numbers when ``whole``)."""
    if not math.isfinite(high) or high <= 0:
        return [0.0]
    step = nice(high / count)
    if whole:
        step = max(step, 1.0)
    many = math.ceil(high / step * (1 - 1e-12))
    return [step * n for n in range(many + 1)]


def linear(high: float, start: float, end: float, label: Callable[[float], str], whole: bool = False,
           count: int = 4) -> tuple[Scale, list[Tick]]:
    """A scale from 0 to a round value at least ``high``, and its ticks labelled by ``label``."""
    values = steps(high, count, whole)
    top = values[-1] if values[-1] > 0 else 1.0
    scale = Scale(0.0, top, start, end)
    return scale, [Tick(round(scale.at(v), 2), label(v)) for v in values]


def spread(values: Sequence[float], start: float, end: float,
           label: Callable[[float], str]) -> tuple[Scale, list[Tick]]:
    """A scale for ``values`` (above 0): linear from 0, or log by powers of ten when they spread past ``LOG_FROM``."""
    shown = [v for v in values if v > 0 and math.isfinite(v)]
    if not shown or max(shown) / min(shown) <= LOG_FROM:
        return linear(max(shown, default=0.0), start, end, label)
    low = 10.0 ** (math.ceil(math.log10(min(shown))) - 1)  # a decade below: the least value's bar shows
    high = 10.0 ** math.ceil(math.log10(max(shown)))
    scale = Scale(low, high, start, end, log=True)
    powers = range(round(math.log10(low)), round(math.log10(high)) + 1)
    return scale, [Tick(round(scale.at(10.0**p), 2), label(10.0**p)) for p in powers]


def short(value: float) -> str:
    """A number in a few characters: ``7``, ``2.5``, ``1.2k``, ``40M``, ``3B``, ``3e+21``."""
    if not math.isfinite(value):
        return str(value)
    value = float(f"{value:.3g}")  # rounded first: 999,999 is 1M, not 1e+03k
    size = abs(value)
    for at, suffix in SUFFIXES:
        if size >= at:
            return f"{value / at:.3g}{suffix}" if size < at * 1000 else f"{value:.0e}"
    return f"{value:.3g}"


def fit(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, the last one ``…`` when it was cut."""
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "…"


def width_of(text: str) -> float:
    """About how wide ``text`` is drawn."""
    return len(text) * CHAR_W


def legend(entries: Sequence[tuple[str, str]], left: float, right: float, top: float,
           chars: int = 28) -> tuple[list[Key], float]:
    """``(css, text)`` entries laid out in rows from (``left``, ``top``) up to ``right``; and the rows' bottom."""
    keys: list[Key] = []
    x, y = left, top
    for css, text in entries:
        label = fit(text, chars)
        wide = SWATCH + 5 + width_of(label) + 14
        if x > left and x + wide > right:
            x, y = left, y + LEGEND_ROW
        keys.append(Key(round(x, 2), round(y, 2), css, label, text if label != text else ""))
        x += wide
    return keys, (y + LEGEND_ROW if keys else top)
