"""What runs add to the stats' rollups: counts, tokens, cost and latency histograms, per kind and name.

A run's share comes from its facts alone, through one ``Tally``: the recorder feeds it each fact
as it logs it, a read of the log feeds it a stored run's facts; both therefore count alike.
Latencies go in buckets (``bucket_of``): a p50 or p95 is its bucket's upper bound, at most 9% high.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final, NamedTuple, TypeVar

from .facts import Event, ModelCalled, RunResumed, RunStarted, StepFinished, StepStarted, ToolFinished, ToolStarted

# The kinds of rollup row, and what each row's figures count.
STATUS: Final = "status"  # name: a run status. number: runs started in the hour that have it now
RUN: Final = "run"  # name "". number: tool calls that ran, each once (as a run's summary counts them)
MODEL: Final = "model"  # name: provider:model. number: calls; tokens; cost_nusd, unknown: cost known, replies unpriced
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
    asked again after a resume counts again). A recorder that continues a run starts from its
    ``model`` and ``started`` calls. ``take`` hands over what was added since the last ``take``.
    """

    __slots__ = ("_keys", "_opened", "_started", "_step", "_step_cost", "_step_tools", "_step_unknown", "model",
                 "rows")

    def __init__(self, model: str = "", started: Iterable[str] = ()) -> None:
        self.model = model
        self.rows: dict[Key, list[int]] = {}
        self._started = set(started)  # the calls of the reply worked through that started (``RunState.started_calls``)
        self._opened: dict[int, datetime] = {}
        self._step = -1
        self._step_cost = 0
        self._step_unknown = 0
        self._step_tools: set[str] = set()
        self._keys: dict[str, dict[str, list[Key | None]]] = {}  # each row's key made once, by kind and name

    def feed(self, fact: Event, at: datetime | None = None) -> None:
        """Count ``fact``, logged at ``at`` (a step's start and end need theirs)."""
        counts = _COUNTS.get(type(fact))
        if counts is not None:
            counts(self, fact, at)

    def give_back(self, rows: Mapping[Key, Sequence[int]]) -> None:
        """Add rows taken before back (their commit failed: the next one carries them)."""
        for key, figures in rows.items():
            row = self._row(key)
            for i, value in enumerate(figures):
                row[i] += value

    def take(self) -> dict[Key, list[int]]:
        """The rows added since the last ``take`` (then none), each as its ``Figures``' values."""
        rows, self.rows = self.rows, {}
        return rows

    def _key(self, kind: str, name: str, bucket: int = NO_BUCKET) -> Key:
        named = self._keys.get(kind)
        if named is None:
            named = self._keys[kind] = {}
        keys = named.get(name)
        if keys is None:
            keys = named[name] = [None] * (LAST_BUCKET + 2)
        found = keys[bucket]  # NO_BUCKET (-1): the last
        if found is None:
            found = keys[bucket] = Key(kind, name, bucket)
        return found

    def _row(self, key: Key) -> list[int]:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0, 0, 0, 0, 0, 0]
        return row

    def _step_started(self, fact: StepStarted, at: datetime | None) -> None:
        if at is not None:
            self._opened[fact.step] = at

    def _step_finished(self, fact: StepFinished, at: datetime | None) -> None:
        began = self._opened.pop(fact.step, None)
        if began is not None and at is not None:
            micros = max((at - began) // MICROSECOND, 0)
            row = self._row(self._key(STEP, "", bucket_of(micros / 1e6)))
            row[0] += 1
            row[5] += micros

    def _tool_started(self, fact: ToolStarted, at: datetime | None) -> None:
        if fact.call_id not in self._started:  # else a call in doubt run again: it counts once
            self._started.add(fact.call_id)
            self._row(self._key(RUN, ""))[0] += 1

    def _tool_finished(self, fact: ToolFinished, at: datetime | None) -> None:
        seconds = fact.duration_s
        micros = max(round(seconds * 1e6), 0) if math.isfinite(seconds) else 0
        row = self._row(self._key(TOOL, str(fact.name), bucket_of(micros / 1e6)))
        row[0] += 1
        row[5] += micros
        if failed(fact):
            row[1] += 1

    def _model_called(self, fact: ModelCalled, at: datetime | None) -> None:
        reply = fact.reply
        cost = nusd(fact.cost_usd) or 0
        unknown = 1 if fact.cost_usd is None and reply is not None else 0
        row = self._row(self._key(MODEL, self.model))
        row[0] += 1
        row[3] += cost
        row[4] += unknown
        if fact.step != self._step:
            self._step, self._step_cost, self._step_unknown, self._step_tools = fact.step, 0, 0, set()
        self._step_cost += cost
        self._step_unknown += unknown
        for name in self._step_tools:  # the tools the step asked for already are charged this call too
            step = self._row(self._key(TOOL_STEPS, name))
            step[3] += cost
            step[4] += unknown
        if reply is None or fact.error is not None:  # no reply, or one the loop refused: it asks for nothing
            return
        usage = reply.usage  # the run's tokens as it counts them (``RunState.spent``)
        row[2] += (usage.input_tokens + usage.output_tokens) if usage is not None else (
            fact.prompt_tokens + fact.reply_tokens)
        self._started = set()
        for call in reply.tool_calls:
            name = str(call.name)
            if name not in self._step_tools:
                self._step_tools.add(name)  # a tool's step is charged every model call of it, those before too
                step = self._row(self._key(TOOL_STEPS, name))
                step[0] += 1
                step[3] += self._step_cost
                step[4] += self._step_unknown

    def _run_started(self, fact: RunStarted, at: datetime | None) -> None:
        self.model = model_key(fact.model, fact.provider)
        self._new_part()

    def _run_resumed(self, fact: RunResumed, at: datetime | None) -> None:
        if fact.model:
            self.model = model_key(fact.model, fact.provider)
        self._new_part()

    def _new_part(self) -> None:
        self._opened.clear()
        self._step = -1
        self._step_tools = set()


MICROSECOND: Final = timedelta(microseconds=1)
_COUNTS: Final[dict[type, Callable[[Tally, Any, datetime | None], None]]] = {
    StepStarted: Tally._step_started,
    ModelCalled: Tally._model_called,
    ToolStarted: Tally._tool_started,
    ToolFinished: Tally._tool_finished,
    StepFinished: Tally._step_finished,
    RunStarted: Tally._run_started,
    RunResumed: Tally._run_resumed,
}


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

