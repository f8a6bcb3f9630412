"""What runs add to the stats' rollups: counts, tokens, cost and latency histograms, per kind and name.

A run's share comes from its facts alone, through one ``Tally``: the recorder feeds it each fact
as it logs it, a read of the log feeds it a stored run's facts; both therefore count alike.
Latencies go in buckets (``bucket_of``): a p50 or p95 is its bucket's upper bound, at most 9% high.
"""

from __future__ import annotations

import bisect
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
MAX_USD: Final = MAX_NUSD / NANO
MAX_SECONDS: Final = 10.0**9  # a tool call's duration counted at most (the rest: none)

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


# Each bucket's largest latency in microseconds: 1 ms x 2**(k/8), rounded (the last holds every longer one too).
BOUNDS: Final = tuple(round(FLOOR_S * 1e6 * 2 ** (k / PER_DOUBLING)) for k in range(LAST_BUCKET + 1))


def bucket_of(micros: int) -> int:
    """The latency bucket of ``micros`` microseconds: the first ``k`` with ``micros <= BOUNDS[k]``."""
    return bisect.bisect_left(BOUNDS, micros, 0, LAST_BUCKET)


def upper_bound(bucket: int) -> float:
    """The largest latency bucket ``bucket`` holds, in seconds (the last one holds every longer one too)."""
    return BOUNDS[bucket] / 1e6


def nusd(cost_usd: float | None) -> int | None:
    """A cost in USD as whole billionths of a dollar (None stays None; one outside (0, $1M), NaN too, as 0)."""
    if cost_usd is None:
        return None
    return round(cost_usd * NANO) if 0 < cost_usd < MAX_USD else 0


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

    __slots__ = ("_model_key", "_opened", "_started", "_step", "_step_cost", "_step_keys", "_step_tools",
                 "_step_unknown", "_tool_keys", "model", "rows")

    def __init__(self, model: str = "", started: Iterable[str] = ()) -> None:
        self.rows: dict[Key, list[int]] = {}
        self._started = set(started)  # the calls of the reply worked through that started (``RunState.started_calls``)
        self._opened: dict[int, datetime] = {}
        self._step = -1
        self._step_cost = 0
        self._step_unknown = 0
        self._step_tools: set[str] = set()
        # Each row's key made once: a step adds to the same few rows again and again.
        self._tool_keys: dict[str, dict[int, Key]] = {}
        self._step_keys: dict[str, Key] = {}
        self._uses(model)

    def feed(self, fact: Event, at: datetime | None = None) -> None:
        """Count ``fact``, logged at ``at`` (a step's start and end need theirs)."""
        counts = _COUNTS.get(type(fact))
        if counts is not None:
            counts(self, fact, at)

    def counters(self) -> dict[type, Callable[[Any, datetime | None], None]]:
        """``feed`` as one function per kind of fact it counts, for a caller with the fact's type at hand.

        A recorder times steps itself (``took``) and counts the calls that ran from its run's state
        (``ran``): the counters of ``step_started``, ``step_finished`` and ``tool_started`` are left out.
        """
        return {kind: getattr(self, counts.__name__) for kind, counts in _COUNTS.items()
                if kind not in (StepStarted, StepFinished, ToolStarted)}

    def give_back(self, rows: Mapping[Key, Sequence[int]]) -> None:
        """Add rows taken before back (their commit failed: the next one carries them)."""
        for key, figures in rows.items():
            row = self.rows.get(key) or self.rows.setdefault(key, [0] * len(FIELDS))
            for i, value in enumerate(figures):
                row[i] += value

    def take(self) -> dict[Key, list[int]]:
        """The rows added since the last ``take`` (then none), each as its ``Figures``' values."""
        rows, self.rows = self.rows, {}
        return rows

    def _uses(self, model: str) -> None:
        self.model, self._model_key = model, Key(MODEL, model)

    # One per kind of fact counted (``_COUNTS``). Each spells its rows out: this runs for every fact.

    def _step_started(self, fact: StepStarted, at: datetime | None) -> None:
        if at is not None:
            self._opened[fact.step] = at

    def _step_finished(self, fact: StepFinished, at: datetime | None) -> None:
        began = self._opened.pop(fact.step, None)
        if began is not None and at is not None:
            self.took(began, at)

    def took(self, began: datetime, at: datetime) -> None:
        """Count a step that started at ``began`` and finished at ``at`` (``feed`` does, for its facts)."""
        micros = (at - began) // MICROSECOND
        if micros < 0:  # a clock set back
            micros = 0
        key = _STEP_KEYS[bisect.bisect_left(BOUNDS, micros, 0, LAST_BUCKET)]  # ``bucket_of``
        row = self.rows.get(key) or self.rows.setdefault(key, [0, 0, 0, 0, 0, 0])
        row[0] += 1
        row[5] += micros

    def ran(self, calls: int) -> None:
        """Count ``calls`` more tool calls that ran (``feed`` counts them from their ``tool_started``)."""
        if calls:
            row = self.rows.get(_RUN_KEY) or self.rows.setdefault(_RUN_KEY, [0, 0, 0, 0, 0, 0])
            row[0] += calls

    def _tool_started(self, fact: ToolStarted, at: datetime | None) -> None:
        if fact.call_id not in self._started:  # else a call in doubt run again: it counts once
            self._started.add(fact.call_id)
            row = self.rows.get(_RUN_KEY) or self.rows.setdefault(_RUN_KEY, [0, 0, 0, 0, 0, 0])
            row[0] += 1

    def _tool_finished(self, fact: ToolFinished, at: datetime | None) -> None:
        seconds = fact.duration_s
        micros = round(seconds * 1e6) if 0 < seconds < MAX_SECONDS else 0  # NaN and infinities too
        name = str(fact.name)
        keys = self._tool_keys.get(name)
        if keys is None:  # a model may make up any number of names: each gets the buckets it uses
            keys = self._tool_keys[name] = {}
        bucket = bisect.bisect_left(BOUNDS, micros, 0, LAST_BUCKET)  # ``bucket_of``
        key = keys.get(bucket) or keys.setdefault(bucket, Key(TOOL, name, bucket))
        row = self.rows.get(key) or self.rows.setdefault(key, [0, 0, 0, 0, 0, 0])
        row[0] += 1
        row[5] += micros
        if not fact.ok or str(fact.observation).startswith("ERROR:"):  # ``failed``, spelled out
            row[1] += 1

    def _model_called(self, fact: ModelCalled, at: datetime | None) -> None:
        reply, usd = fact.reply, fact.cost_usd
        cost = round(usd * NANO) if usd is not None and 0 < usd < MAX_USD else 0  # ``nusd``, spelled out
        unknown = 1 if usd is None and reply is not None else 0
        rows = self.rows
        row = rows.get(self._model_key) or rows.setdefault(self._model_key, [0, 0, 0, 0, 0, 0])
        row[0] += 1
        row[3] += cost
        row[4] += unknown
        if fact.step != self._step:
            self._step, self._step_cost, self._step_unknown, self._step_tools = fact.step, 0, 0, set()
        self._step_cost += cost
        self._step_unknown += unknown
        for name in self._step_tools:  # the tools the step asked for already are charged this call too
            step = rows.setdefault(self._step_key(name), [0, 0, 0, 0, 0, 0])
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
                step = rows.setdefault(self._step_key(name), [0, 0, 0, 0, 0, 0])
                step[0] += 1
                step[3] += self._step_cost
                step[4] += self._step_unknown

    def _step_key(self, name: str) -> Key:
        return self._step_keys.get(name) or self._step_keys.setdefault(name, Key(TOOL_STEPS, name))

    def _run_started(self, fact: RunStarted, at: datetime | None) -> None:
        self._uses(model_key(fact.model, fact.provider))
        self._new_part()

    def _run_resumed(self, fact: RunResumed, at: datetime | None) -> None:
        if fact.model:
            self._uses(model_key(fact.model, fact.provider))
        self._new_part()

    def _new_part(self) -> None:
        self._opened.clear()
        self._step = -1
        self._step_tools = set()


MICROSECOND: Final = timedelta(microseconds=1)
_RUN_KEY: Final = Key(RUN, "")
_STEP_KEYS: Final = tuple(Key(STEP, "", bucket) for bucket in range(LAST_BUCKET + 1))
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

