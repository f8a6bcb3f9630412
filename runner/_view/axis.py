"""A waterfall's time axis: where a moment of a run falls across the page, its idle stretches drawn compressed.

On a linear axis a run that waited hours for an approval would leave its seconds of work two slivers at
the ends. So a stretch with nothing under way, longer than ``IDLE_MIN_MS`` and wider than ``GAP_PCT`` of the
axis were it kept to scale, is drawn ``GAP_PCT`` wide (less when there are many) and labelled with its
length; the rest of the axis keeps to one scale. Positions are percentages of the axis's width.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from .summary import seconds

IDLE_MIN_MS: Final = 2000.0  # a shorter stretch with nothing under way is never compressed
GAP_PCT: Final = 5.0  # how wide a compressed stretch is drawn
GAPS_AT_MOST_PCT: Final = 40.0  # however many there are, the compressed stretches take at most this much
TICK_EVERY_PCT: Final = 12.0  # about how far apart the axis's ticks are
TICK_APART_PCT: Final = 7.0  # a tick closer than this to the one before is left out


@dataclass(frozen=True, slots=True)
class Gap:
    """A compressed idle stretch: from ``start_ms`` to ``end_ms`` of the run, drawn at ``left`` ``width`` wide."""

    start_ms: float
    end_ms: float
    left: float
    width: float

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    @property
    def label(self) -> str:
        return f"idle {seconds(self.duration_ms / 1000)}"


class Tick(NamedTuple):
    """A mark on the axis and its text: the time from the run's start (``+`` from the last idle stretch's end)."""

    left: float
    label: str


class Part(NamedTuple):
    """A stretch of the axis drawn to one scale: ``start_ms`` to ``end_ms``, from ``left``, ``width`` wide."""

    start_ms: float
    end_ms: float
    left: float
    width: float
    idle: bool


class Axis:
    """The axis of a run ``total_ms`` long, busy during ``busy`` (intervals in ms; a moment is an empty one).

    It spans ``room`` percent of the width (the rest is left for a bar drawn wider than it lasted at its end).
    """

    def __init__(self, total_ms: float, busy: Iterable[tuple[float, float]], room: float = 100.0) -> None:
        self.total_ms = max(total_ms, 0.0)
        idle = compressed(self.total_ms, stretches(self.total_ms, busy), room)
        width = gap_width(len(idle))
        active_ms = self.total_ms - sum(end - start for start, end in idle)
        if active_ms <= 0 and idle:  # nothing but idle: the stretches share the axis
            width = room / len(idle)
        scale = (room - width * len(idle)) / active_ms if active_ms > 0 else 0.0
        self.scale_ms = 1 / scale if scale else 0.0  # ms of the run per percent of the axis, where kept to scale
        self.parts: list[Part] = []
        left, at = 0.0, 0.0
        for start, end in [*idle, (self.total_ms, self.total_ms)]:
            if start > at or not self.parts:
                self.parts.append(Part(at, start, left, (start - at) * scale, idle=False))
                left += (start - at) * scale
            if end > start:
                self.parts.append(Part(start, end, left, width, idle=True))
                left += width
            at = end
        self.gaps = [Gap(p.start_ms, p.end_ms, round(p.left, 3), round(p.width, 3)) for p in self.parts if p.idle]
        self._starts = [p.start_ms for p in self.parts]

    def at(self, ms: float) -> float:
        """Where ``ms`` after the run's start falls, in percent of the axis."""
        ms = min(max(ms, 0.0), self.total_ms)
        part = self.parts[max(bisect_right(self._starts, ms) - 1, 0)]
        length = part.end_ms - part.start_ms
        return part.left + (part.width * (ms - part.start_ms) / length if length > 0 else 0.0)

    def ticks(self) -> list[Tick]:
        """Marks along the parts kept to scale, about ``TICK_EVERY_PCT`` apart, none closer than ``TICK_APART_PCT``.

        Past an idle stretch the first mark gives the time from the run's start, the next ones the time since it.
        """
        if not self.scale_ms:
            return [Tick(0.0, "0")]
        step = nice(self.scale_ms * TICK_EVERY_PCT)
        found: list[Tick] = []
        first = True
        for part in self.parts:
            if part.idle:
                continue
            count = int((part.end_ms - part.start_ms) / step + 1e-9)
            for n in range(count + 1):
                ms = part.start_ms + n * step
                left = self.at(ms)
                if found and left - found[-1].left < TICK_APART_PCT:
                    if first or n:
                        continue
                    found.pop()  # the first tick after an idle stretch, which says where the axis is, stays
                label = clock(ms) if first or n == 0 else "+" + clock(n * step)
                found.append(Tick(round(left, 3), label))
            first = False
        return found


def stretches(total_ms: float, busy: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The stretches between ``busy`` intervals with nothing under way, longer than ``IDLE_MIN_MS``."""
    found: list[tuple[float, float]] = []
    reached = 0.0
    for start, end in sorted(busy):
        if start - reached > IDLE_MIN_MS:
            found.append((reached, start))
        reached = max(reached, end)
    if total_ms - reached > IDLE_MIN_MS:
        found.append((reached, total_ms))
    return found


def compressed(total_ms: float, idle: list[tuple[float, float]], room: float = 100.0) -> list[tuple[float, float]]:
    """The idle stretches worth drawing narrow: each would be wider kept to scale, beside the others drawn narrow.

    The shortest is left to scale while one is not worth it, and the rest are weighed again.
    """
    chosen = sorted(idle, key=lambda s: s[0] - s[1])
    while chosen:
        start, end = chosen[-1]  # the shortest, were it kept to scale
        others = len(chosen) - 1
        rest_ms = total_ms - sum(e - s for s, e in chosen[:-1])
        if rest_ms <= 0 or (end - start) * (room - gap_width(others) * others) / rest_ms > gap_width(len(chosen)):
            break
        chosen.pop()
    return sorted(chosen)


def gap_width(count: int) -> float:
    """How wide each of ``count`` idle stretches drawn narrow is: ``GAP_PCT``, less when together they take too much."""
    return min(GAP_PCT, GAPS_AT_MOST_PCT / count) if count else 0.0


def nice(ms: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten at least ``ms`` (a tick step)."""
    if ms <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(ms))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= ms * (1 - 1e-9))


def clock(ms: float) -> str:
    """A time on the axis for people: ``0``, ``250 ms``, ``1.5 s``, ``3m05s``, ``2h04m``."""
    if ms == 0:
        return "0"
    if ms < 1000:
        return f"{round(ms, 3):g} ms"
    if ms < 60_000:
        return f"{round(ms / 1000, 3):g} s"
    return seconds(ms / 1000)
