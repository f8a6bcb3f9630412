"""A run's waterfall: a bar per step, model call, tool call and sub-agent child, on one time axis.

Bars are placed by the log's times (``StoredEvent.at``) from its first event: a step from ``step_started`` to
``step_finished``, a model call its ``latency_s`` up to its ``model_call``, a tool call ``tool_started`` to
``tool_finished`` (a sub-agent's call is its child's bar), a call awaiting approval from its request. A bar with
no end in the log ends with its part of the run (a resume starts the next, with a marker), or now while it goes
on. Built from the timeline's entries: each bar names its entry's id on the run page (``entry-N``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Final, NamedTuple

from .._log.ids import child_run_id
from .._log.records import LIVE, StoredRun
from .._log.statuses import Status
from .._text import shown_name
from .._tools.agents import subagent_calls
from ..events import ApprovalDecided, RunFinished, RunRequeued, RunResumed, ToolFinished
from .axis import Axis, Gap, Tick
from .summary import money, seconds
from .timeline import (
    AskedEntry,
    ChildEntry,
    DecidedEntry,
    ModelEntry,
    ResumedEntry,
    StepEntry,
    Timeline,
    ToolEntry,
    timeline,
    tool_failed,
)

MIN_WIDTH_PCT: Final = 0.3  # a shorter bar is drawn this wide, to be seen and hovered
CUT_STOPS: Final = (Status.DEADLINE, Status.CANCELLED)
IN_DOUBT: Final = "in_doubt"  # a resume's refusal of a call its process left in doubt (``ToolFinished.refused``)


class BarKind(StrEnum):
    """What a bar stands for (``data-kind`` on the page)."""

    STEP = "step"
    MODEL = "model"
    TOOL = "tool"
    SUBAGENT = "subagent"


class Outcome(StrEnum):
    """How a bar's step or call came out, which colours it."""

    OK = "ok"
    FAILED = "failed"
    REFUSED = "refused"
    CUT_SHORT = "cut short"  # a deadline, a cancel or its timeout gave up on it
    IN_DOUBT = "in doubt"  # its process stopped while it ran
    AWAITING = "awaiting approval"
    WAITING = "waiting on its sub-agent"
    RUNNING = "running"


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: what it is, when (ms from the run's start), how deep under its step, how it came out, where drawn.

    ``anchor`` is its timeline entry's id; ``child_run_id`` the run a sub-agent's bar links to; ``tokens`` and
    ``cost_usd`` what it spent (None: nothing to say, or a cost unknown); ``left`` and ``width`` in percent.
    """

    kind: BarKind
    label: str
    start_ms: float
    duration_ms: float
    depth: int
    outcome: Outcome
    anchor: str
    left: float
    width: float
    tokens: int | None = None
    cost_usd: float | None = None
    call_id: str | None = None
    child_run_id: str | None = None

    @property
    def end_ms(self) -> float:
        return round(self.start_ms + self.duration_ms, 3)

    @property
    def title(self) -> str:
        """What hovering the bar shows: name, duration, outcome, tokens and cost."""
        name = self.label + (f" ({shown_name(self.call_id)})" if self.call_id is not None else "")
        parts = [name, seconds(self.duration_ms / 1000), str(self.outcome)]
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost_usd is not None:
            parts.append(money(self.cost_usd))
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class Marker:
    """A resume: when (ms from the run's start), where on the axis, and who resumed after what."""

    at_ms: float
    left: float
    label: str


@dataclass(frozen=True, slots=True)
class Waterfall:
    """The bars in the timeline's order, the resume markers, the compressed idle stretches and the axis's ticks."""

    bars: list[Bar]
    total_ms: float
    markers: list[Marker] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)


class Resume(NamedTuple):
    """A resume, when it was logged and what its marker says."""

    at: datetime
    label: str


@dataclass(slots=True)
class Span:
    """A bar before the axis is known: its times as datetimes, and whether it counts as the run being busy."""

    kind: BarKind
    label: str
    start: datetime
    end: datetime
    depth: int
    outcome: Outcome
    anchor: str
    tokens: int | None = None
    cost_usd: float | None = None
    call_id: str | None = None
    child: str | None = None
    busy: bool = True


class Parts:
    """The run's parts: from its start, or a resume, to the last event its process logged before the next resume.

    The last part ends at ``now`` while the run goes on. A decision logged while the run waited is not its process's.
    """

    def __init__(self, run: StoredRun, now: datetime | None) -> None:
        self.starts: list[datetime] = []
        self.ends: list[datetime] = []
        self.finished: list[RunFinished | None] = []  # how each part ended, when its log says
        last = run.events[0].at
        for event, fact in zip(run.events, run.facts, strict=True):
            if isinstance(fact, RunResumed) or not self.starts:
                if self.starts:
                    self.ends.append(last)
                self.starts.append(event.at)
                self.finished.append(None)
            if isinstance(fact, RunFinished):
                self.finished[-1] = fact
            if not isinstance(fact, ApprovalDecided | RunRequeued):
                last = event.at
        self.ends.append(max(now, last) if now is not None else last)

    def index(self, at: datetime) -> int:
        return max(i for i, start in enumerate(self.starts) if start <= at) if at >= self.starts[0] else 0

    def end(self, at: datetime) -> datetime:
        """The end of the part ``at`` falls in."""
        return self.ends[self.index(at)]

    def last(self, at: datetime) -> bool:
        return self.index(at) == len(self.starts) - 1


def waterfall(run: StoredRun, shown: Timeline | None = None, *, now: datetime | None = None) -> Waterfall | None:
    """``run``'s waterfall from ``shown``, its timeline (the run page's, sub-agents nested); None for an empty log.

    ``now``: the time a live run's unfinished bars reach (None: its last event's).
    """
    if not run.events:
        return None
    entries = (shown if shown is not None else timeline(run)).entries
    live = run.liveness == LIVE
    parts = Parts(run, now if live else None)
    logged = {id(fact): event.at for event, fact in zip(run.events, run.facts, strict=True)}
    agents = subagent_calls(run.facts)
    children = {e.call_id: e for e in entries if isinstance(e, ChildEntry)}
    decided = {e.fact.call_id for e in entries if isinstance(e, DecidedEntry)}
    called = {e.call_id for e in entries if isinstance(e, ToolEntry)}
    spans: list[Span] = []
    markers: list[Resume] = []
    for n, entry in enumerate(entries, start=1):
        anchor = f"entry-{n}"
        match entry:
            case StepEntry():
                spans.append(step_span(entry, anchor, parts, live))
            case ModelEntry():
                spans.append(model_span(entry, anchor))
            case ToolEntry():
                child = entry.call_id in agents or (entry.finished is not None and bool(entry.finished.child_run_id))
                span = tool_span(entry, anchor, parts, live, logged, child)
                if child:
                    subagent(span, entry, children.get(entry.call_id), run.run_id)
                spans.append(span)
            case AskedEntry(fact=asked) if asked.call_id not in decided and asked.call_id not in called:
                spans.append(Span(BarKind.TOOL, shown_name(asked.name), entry.at, parts.end(entry.at), 1,
                                  Outcome.AWAITING, anchor, call_id=asked.call_id, busy=False))
            case ResumedEntry():
                markers.append(Resume(entry.at, f"resumed by {shown_name(entry.who)} after {entry.fact.reason}"))
            case _:
                pass
    step_costs(spans)
    return placed(spans, [event.at for event in run.events], max(parts.ends[-1], run.events[-1].at), markers, live)


def step_span(entry: StepEntry, anchor: str, parts: Parts, live: bool) -> Span:
    """A step's span: to its ``step_finished``, else to its part's end (running, cut short or in doubt)."""
    label = f"step {entry.step}" + (" (continued)" if entry.continued else "")
    if entry.seconds is not None:
        return Span(BarKind.STEP, label, entry.at, entry.at + timedelta(seconds=entry.seconds), 0, Outcome.OK,
                    anchor, busy=False)
    ended = parts.finished[parts.index(entry.at)]
    outcome = (Outcome.RUNNING if live and parts.last(entry.at) else Outcome.IN_DOUBT if ended is None
               else Outcome.CUT_SHORT if ended.status in CUT_STOPS else Outcome.OK)
    return Span(BarKind.STEP, label, entry.at, parts.end(entry.at), 0, outcome, anchor,
                busy=outcome == Outcome.RUNNING)


def model_span(entry: ModelEntry, anchor: str) -> Span:
    """A model call's span: its ``latency_s`` up to its ``model_call``."""
    call = entry.call
    outcome = (Outcome.OK if call.error is None else Outcome.CUT_SHORT if call.error_type in CUT_STOPS
               else Outcome.FAILED)
    return Span(BarKind.MODEL, "model call", entry.at - timedelta(seconds=call.latency_s), entry.at, 1, outcome,
                anchor, tokens=call.tokens.total, cost_usd=call.cost_usd)


def tool_span(entry: ToolEntry, anchor: str, parts: Parts, live: bool, logged: dict[int, datetime],
              child: bool) -> Span:
    """A tool call's span, ``tool_started`` to ``tool_finished``; a call with no end in its part ends with the part.

    Such a call is running (the run goes on), waiting on its sub-agent (its run stopped while the child
    waited or stopped), or in doubt (its process died; a resume's ``tool_finished`` is a later part's).
    """
    found = entry.finished
    end = logged.get(id(found)) if found is not None else None
    if end is not None and parts.index(end) == parts.index(entry.at):
        outcome = tool_outcome(found, entry)
    else:
        ended = parts.finished[parts.index(entry.at)]
        outcome = (Outcome.RUNNING if live and parts.last(entry.at) else Outcome.WAITING if child and ended
                   else Outcome.IN_DOUBT)
        end = parts.end(entry.at)
    return Span(BarKind.TOOL, shown_name(entry.name), entry.at, end, 1, outcome, anchor, call_id=entry.call_id,
                busy=outcome not in (Outcome.WAITING, Outcome.IN_DOUBT))


def tool_outcome(found: ToolFinished | None, entry: ToolEntry) -> Outcome:
    """How a finished call came out; a call given up on (a deadline, a cancel, its timeout) was cut short."""
    if found is None or found.refused == IN_DOUBT:
        return Outcome.IN_DOUBT
    if not found.ran:
        return Outcome.REFUSED
    text = str(found.observation)
    if entry.late is not None or text.startswith((f"ERROR: {found.name} was abandoned while it ran (",
                                                  f"ERROR: {found.name} timed out after ")):
        return Outcome.CUT_SHORT
    return Outcome.FAILED if tool_failed(found) else Outcome.OK


def subagent(span: Span, entry: ToolEntry, child: ChildEntry | None, run_id: str) -> None:
    """Make a sub-agent's call its child's bar: linked to the child's run, with what the child's tree spent."""
    span.kind = BarKind.SUBAGENT
    found = entry.finished
    span.child = (found.child_run_id if found is not None and found.child_run_id
                  else child.run.run_id if child is not None else child_run_id(run_id, entry.call_id))
    if child is not None:
        span.tokens, span.cost_usd = child.tree.tokens, child.tree.cost_usd
    elif found is not None:
        span.tokens, span.cost_usd = found.child_tokens, found.child_cost_usd


def step_costs(spans: Sequence[Span]) -> None:
    """Give each step's span what its model calls spent: tokens, and a cost (None when any one's is unknown)."""
    step: Span | None = None
    calls: list[Span] = []
    for span in [*spans, None]:
        if span is None or span.kind == BarKind.STEP:
            if step is not None and calls:
                step.tokens = sum(call.tokens or 0 for call in calls)
                costs = [call.cost_usd for call in calls]
                step.cost_usd = None if None in costs else sum(cost or 0.0 for cost in costs)
            step, calls = span, []
        elif span.kind == BarKind.MODEL:
            calls.append(span)


def placed(spans: Sequence[Span], moments: Sequence[datetime], end: datetime, resumes: Sequence[Resume],
           live: bool) -> Waterfall:
    """The spans as bars on an axis from the first of ``moments`` (the log's times) to ``end``, idle compressed.

    The run is busy during a span that is (a call that ran), at each of ``moments``, and, while it goes on,
    from its last event until ``end`` (now).
    """
    start = moments[0]

    def ms(at: datetime) -> float:
        return (at - start).total_seconds() * 1000

    total = ms(end)
    busy = [(ms(s.start), ms(s.end)) for s in spans if s.busy] + [(ms(at), ms(at)) for at in moments]
    if live:
        busy.append((ms(moments[-1]), total))
    axis = Axis(total, busy, room=100.0 - MIN_WIDTH_PCT)
    steps = [i for i, s in enumerate(spans) if s.kind == BarKind.STEP]
    following = dict(pairwise(steps))  # each step's next, which its bar must not reach
    bars: list[Bar] = []
    for i, s in enumerate(spans):
        first, final = round(ms(s.start), 3), round(ms(s.end), 3)  # to the microsecond
        left, right = axis.at(first), axis.at(final)
        width = max(right - left, MIN_WIDTH_PCT)
        if i in following:  # drawn wider to be seen, a step stops short of the next
            width = max(min(width, axis.at(round(ms(spans[following[i]].start), 3)) - left), right - left)
        bars.append(Bar(s.kind, s.label, first, round(max(final - first, 0.0), 3), s.depth, s.outcome, s.anchor,
                        round(left, 3), round(width, 3), s.tokens, s.cost_usd, s.call_id, s.child))
    markers = [Marker(round(ms(r.at), 3), round(axis.at(ms(r.at)), 3), r.label) for r in resumes]
    return Waterfall(bars, round(total, 3), markers, axis.gaps, axis.ticks())
