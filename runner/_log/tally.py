"""What runs add to the stats' rollups: counts, tokens, cost and latency histograms, per kind and name.

A run's share comes from its facts alone, through one ``Tally``: the recorder feeds it each fact
as it logs it, a read of the log feeds it a stored run's facts; both therefore count alike.
Latencies go in buckets (``bucket_of``): a p50 or p95 is its bucket's upper bound, at most 9% high.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Final, NamedTuple, TypeVar

from .facts import Event, ModelCalled, RunResumed, RunStarted, StepFinished, StepStarted, ToolFinished

# The kinds of rollup row, and what each row's figures count.
STATUS: Final = "status"  # name: a run status. number: runs started in the hour that have it now
RUN: Final = "run"  # name "". tokens: the runs' own tokens; number: their tool calls that ran (as each run counts)
MODEL: Final = "model"  # name: provider:model. number: calls; cost_nusd, unknown: their cost known, replies unpriced
TOOL: Final = "tool"  # name: a tool; bucket: its latency. number: calls; errors: failed; micros: their time
TOOL_STEPS: Final = "tool_steps"  # name: a tool. number: the steps that called it; cost: their model calls' cost
STEP: Final = "step"  # name ""; bucket: a step's latency. number: steps; micros: their time
KINDS: Final = (STATUS, RUN, MODEL, TOOL, TOOL_STEPS, STEP)
DAILY: Final = frozenset({STATUS, MODEL})  # the kinds the charts draw day by day

NO_BUCKET: Final = -1
FLOOR_S: Final = 0.001  # bucket 0 holds every latency up to a millisecond
PER_DOUBLING: Final = 8  # buckets per doubling: each bound 2**(1/8) (9%) above the one before
LAST_BUCKET: Final = 25 * PER_DOUBLING  # up to 2**25 ms (9.3 hours); longer latencies share it
NANO: Final = 10**9  # costs are kept in billionths of a dollar: sums that add and subtract exactly
MAX_NUSD: Final = 10**15  # a call's cost is taken as at most a million dollars (the column is 64-bit)

_K = TypeVar("_K")


class Key(NamedTuple):
    """A rollup row's key within an hour: its kind, the name it counts under, its latency bucket."""

    kind: str
    name: str
    bucket: int = NO_BUCKET


class Figures(NamedTuple):
    """A rollup row's figures (every kind uses some of them; the rest stay 0)."""

    number: int = 0
    errors: int = 0
    tokens: int = 0
    cost_nusd: int = 0
    unknown: int = 0
    micros: int = 0


FIELDS: Final = Figures._fields


def bucket_of(seconds: float) -> int:
    """The latency bucket of ``seconds``: the first ``k`` with ``seconds <= upper_bound(k)``."""
    if not seconds > FLOOR_S:  # NaN too
        return 0
    return min(math.ceil(PER_DOUBLING * math.log2(seconds / FLOOR_S)), LAST_BUCKET)


def upper_bound(bucket: int) -> float:
    """The largest latency bucket ``bucket`` holds, in seconds (the last one holds every longer one too)."""
    return FLOOR_S * 2 ** (bucket / PER_DOUBLING)


def nusd(cost_usd: float | None) -> int | None:
    """A cost in USD as whole billionths of a dollar (None stays None; a cost that is not finite counts as none)."""
    if cost_usd is None or not math.isfinite(cost_usd):
        return None
    return max(0, min(round(cost_usd * NANO), MAX_NUSD))


def model_key(model: str, provider: str | None) -> str:
    """The name a model's calls count under: ``provider:model``, or the model alone."""
    return f"{provider}:{model}" if provider else model


class Tally:
    """A run's additions to the rollups, fed its facts in log order with the times they were logged.

    A step's latency runs from its ``step_started`` to its ``step_finished`` within one part of
    the run (a resume starts a new part: a crash's downtime is no step's latency). A tool's steps
    are those whose reply asked for it, charged every model call of the step in that part (a step
    asked again after a resume counts again). ``take`` hands over what was added since the last ``take``.
    """

    __slots__ = ("_opened", "_step", "_step_cost", "_step_tools", "_step_unknown", "model", "rows")

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.rows: dict[Key, list[int]] = {}
        self._opened: dict[int, datetime] = {}
        self._step = -1
        self._step_cost = 0
        self._step_unknown = 0
        self._step_tools: set[str] = set()

    def feed(self, fact: Event, at: datetime | None = None) -> None:
        """Count ``fact``, logged at ``at`` (a step's start and end need theirs)."""
        match fact:
            case StepStarted():
                if at is not None:
                    self._opened[fact.step] = at
            case StepFinished():
                began = self._opened.pop(fact.step, None)
                if began is not None and at is not None:
                    micros = max(round((at - began).total_seconds() * 1e6), 0)
                    self._add(Key(STEP, "", bucket_of(micros / 1e6)), 0, micros)
            case ModelCalled():
                self._model_called(fact)
            case ToolFinished():
                self._tool_finished(fact)
            case RunStarted():
                self.model = model_key(fact.model, fact.provider)
                self._new_part()
            case RunResumed():
                if fact.model:
                    self.model = model_key(fact.model, fact.provider)
                self._new_part()
            case _:
                pass

    def ran(self, tokens: int, tool_calls: int) -> None:
        """Count the run's own tokens and tool calls that ran (as its summary columns count them)."""
        if tokens or tool_calls:
            row = self._row(Key(RUN, ""))
            row[2] += tokens
            row[0] += tool_calls

    def give_back(self, rows: Mapping[Key, Figures]) -> None:
        """Add rows taken before back (their commit failed: the next one carries them)."""
        for key, figures in rows.items():
            row = self._row(key)
            for i, value in enumerate(figures):
                row[i] += value

    def take(self) -> dict[Key, list[int]]:
        """The rows added since the last ``take`` (then none), each as its ``Figures``' values."""
        rows, self.rows = self.rows, {}
        return rows

    def _row(self, key: Key) -> list[int]:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0, 0, 0, 0, 0, 0]
        return row

    def _add(self, key: Key, errors: int, micros: int) -> None:
        row = self._row(key)
        row[0] += 1
        row[1] += errors
        row[5] += micros

    def _new_part(self) -> None:
        self._opened.clear()
        self._step = -1
        self._step_tools = set()

    def _at_step(self, step: int) -> None:
        if step != self._step:
            self._step, self._step_cost, self._step_unknown, self._step_tools = step, 0, 0, set()

    def _model_called(self, fact: ModelCalled) -> None:
        cost = nusd(fact.cost_usd) or 0
        unknown = 1 if fact.cost_usd is None and fact.reply is not None else 0
        row = self._row(Key(MODEL, self.model))
        row[0] += 1
        row[3] += cost
        row[4] += unknown
        self._at_step(fact.step)
        self._step_cost += cost
        self._step_unknown += unknown
        for name in self._step_tools:  # the tools the step asked for already are charged this call too
            step = self._row(Key(TOOL_STEPS, name))
            step[3] += cost
            step[4] += unknown
        if fact.reply is None or fact.error is not None:  # no reply, or one the loop refused: it asks for nothing
            return
        for name in sorted({str(call.name) for call in fact.reply.tool_calls} - self._step_tools):
            self._step_tools.add(name)  # a tool's step is charged every model call of it, those before too
            step = self._row(Key(TOOL_STEPS, name))
            step[0] += 1
            step[3] += self._step_cost
            step[4] += self._step_unknown

    def _tool_finished(self, fact: ToolFinished) -> None:
        micros = max(round(float(fact.duration_s) * 1e6), 0) if math.isfinite(fact.duration_s) else 0
        self._add(Key(TOOL, str(fact.name), bucket_of(micros / 1e6)), 1 if failed(fact) else 0, micros)


def failed(finished: ToolFinished) -> bool:
    """Whether a call failed: not ok, or an ``ERROR:`` observation."""
    return not finished.ok or str(finished.observation).startswith("ERROR:")


class Rollup:
    """Rollup rows added up: over the whole window (``totals``), and day by day for the charts (``days``)."""

    __slots__ = ("days", "totals")

    def __init__(self) -> None:
        self.totals: dict[Key, list[int]] = {}
        self.days: dict[tuple[date, Key], list[int]] = {}

    def add(self, key: Key, figures: Iterable[int], day: date | None = None) -> None:
        """Add one row's figures (to its day's too, when given and of a kind drawn daily)."""
        values = list(figures)
        _plus(self.totals, key, values)
        if day is not None and key.kind in DAILY:
            _plus(self.days, (day, key), values)

    def add_hour(self, hour: datetime, rows: Mapping[Key, Figures]) -> None:
        """Add an hour's rows."""
        for key, figures in rows.items():
            self.add(key, figures, hour.date())

    def total(self, key: Key) -> Figures:
        """The figures of ``key`` over the window."""
        return Figures(*self.totals.get(key, (0, 0, 0, 0, 0, 0)))


def _plus(rows: dict[_K, list[int]], key: _K, values: list[int]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = list(values)
    else:
        for i, value in enumerate(values):
            row[i] += value

