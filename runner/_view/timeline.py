"""A run's timeline as plain entries, built once from its log for ``runner show`` and the console's run page.

One entry per step, model call, tool call, approval asked, decision, resume, cancel request, requeue and end, in
log order (a tool call where it started, with its result when it has one or returned late; a reply's text being
written, or cut off, with no reply logged after it); each sub-agent's child run under its call (``tree`` adds
them); what a fork or follow-up inherited; the calls a crash left in doubt (``doubts``). The CLI renders the
entries as rich text, the console as HTML: both show the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from .._log import tally
from .._log.records import LIVE, StoredRun
from .._log.state import RunState
from .._tools.registry import ToolRegistry
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    MessageAppended,
    ModelCalled,
    ModelDelta,
    OutputRejected,
    RunFinished,
    RunRequeued,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolReturnedLate,
    ToolStarted,
)
from ..messages import Message
from .doubts import InDoubt, ends, in_doubt
from .inherited import Inherited, inherited
from .kinds import CallOutcome, Kind
from .summary import Totals


@dataclass(slots=True)
class StepEntry:
    """A step opened: its duration (None until it finished) and its model call's tokens.

    ``continued``: a resume opened this step again.
    """

    kind: ClassVar[Kind] = Kind.STEP
    step: int
    at: datetime
    continued: bool = False
    seconds: float | None = None
    tokens: int = 0
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A model call: the logged fact (reply, tokens, latency, cost, error) and the messages it was sent.

    It was sent ``seen`` messages: the ones the call before it was sent, then ``fresh`` (that call's reply and
    what was logged since; all of them for the first call).
    Each call keeps only what is new, so a long run's page grows with its log, not with its square.
    """

    kind: ClassVar[Kind] = Kind.MODEL
    step: int
    at: datetime
    call: ModelCalled
    seen: int = 0
    fresh: tuple[Message, ...] = ()

    @property
    def earlier(self) -> int:
        """How many of the messages it was sent came before ``fresh``."""
        return self.seen - len(self.fresh)

    @property
    def outcome(self) -> CallOutcome:
        return CallOutcome.ERROR if self.call.error else CallOutcome.OK


@dataclass(slots=True)
class PartialEntry:
    """The text a model was writing (its ``model_delta`` facts) with no reply logged after it.

    ``live``: the run's process still goes and this is its latest reply: it is being written.
    Else it was cut off: the process died, or the call failed or was given up on.
    """

    kind: ClassVar[Kind] = Kind.PARTIAL
    step: int
    at: datetime
    pieces: list[str]
    live: bool = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)


@dataclass(slots=True)
class ToolEntry:
    """A tool call: where it started (``started`` None: refused before starting) and its result, if any.

    ``late``: what a call given up on (a deadline, a cancel, its timeout) returned after all; ``waiting``: a
    sub-agent's call its run stopped on (its child waits for a decision, or ran out): it goes on in the child.
    """

    kind: ClassVar[Kind] = Kind.TOOL
    step: int
    at: datetime
    call_id: str
    name: str
    started: ToolStarted | None
    finished: ToolFinished | None = None
    live: bool = False  # the run's process still goes: an unfinished call is running, not in doubt
    late: ToolReturnedLate | None = None
    waiting: bool = False

    @property
    def attempt(self) -> int:
        return self.started.attempt if self.started is not None else 1

    @property
    def outcome(self) -> CallOutcome:
        found = self.finished
        if self.late is not None:
            return CallOutcome.RETURNED_LATE
        if found is None:
            return CallOutcome.RUNNING if self.live else CallOutcome.WAITING if self.waiting else CallOutcome.IN_DOUBT
        if found.ran:
            return CallOutcome.OK if found.ok else CallOutcome.ERROR
        return CallOutcome.IN_DOUBT if found.refused == "in_doubt" else CallOutcome.REFUSED

    @property
    def failed(self) -> bool:
        """Whether it failed (``tool_failed``); an unfinished call has not."""
        return self.finished is not None and tool_failed(self.finished)

    @property
    def args(self) -> str:
        return args_text(self.started.args) if self.started is not None else ""


@dataclass(frozen=True, slots=True)
class AskedEntry:
    """A call that waits for an approval."""

    kind: ClassVar[Kind] = Kind.ASKED
    step: int
    at: datetime
    fact: ApprovalRequested


@dataclass(frozen=True, slots=True)
class DecidedEntry:
    """A logged decision on a call."""

    kind: ClassVar[Kind] = Kind.DECIDED
    step: int
    at: datetime
    fact: ApprovalDecided

    @property
    def verdict(self) -> str:
        return "approved" if self.fact.approved else "denied"


@dataclass(frozen=True, slots=True)
class ResumedEntry:
    """A resume: after what, by whom, with which model, limits and decisions."""

    kind: ClassVar[Kind] = Kind.RESUMED
    step: int
    at: datetime
    fact: RunResumed

    @property
    def who(self) -> str:
        """The person who resumed (``--by``); in an older log, which logged none, the process that did."""
        return self.fact.by if self.fact.by is not None else f"process {self.fact.owner}"

    @property
    def limits(self) -> list[tuple[str, Any]]:
        """The limits the run went on with, those set only, as (name, value)."""
        return [(name, value) for name, value in self.fact.limits.items() if value is not None]


@dataclass(frozen=True, slots=True)
class CancelEntry:
    """A cancel request the run stopped for, and who asked (``runner cancel --by``, the console's Cancel)."""

    kind: ClassVar[Kind] = Kind.CANCEL
    step: int
    at: datetime
    fact: CancelRequested


@dataclass(frozen=True, slots=True)
class RequeuedEntry:
    """A stopped pool run sent back to its queue, by whom, with the limits given (``runner resume``)."""

    kind: ClassVar[Kind] = Kind.REQUEUED
    step: int
    at: datetime
    fact: RunRequeued

    @property
    def limits(self) -> list[tuple[str, Any]]:
        """The limits given, as (name, value)."""
        return [(name, value) for name, value in self.fact.limits.items() if value is not None]


@dataclass(frozen=True, slots=True)
class EndEntry:
    """The run's end: its status, answer or error."""

    kind: ClassVar[Kind] = Kind.END
    step: int
    at: datetime
    fact: RunFinished


@dataclass(frozen=True, slots=True)
class RejectedEntry:
    """A failed attempt at the typed result (``output_rejected``): what the model was told was wrong."""

    kind: ClassVar[Kind] = Kind.REJECTED
    step: int
    at: datetime
    fact: OutputRejected


@dataclass(frozen=True, slots=True)
class ChildEntry:
    """A sub-agent's child run under the call it serves: the run with its log, its own timeline, its tree's totals.

    ``short``: its id as short as the store allows; ``pending``: the calls it waits on for a decision.
    """

    kind: ClassVar[Kind] = Kind.CHILD
    step: int
    at: datetime
    call_id: str
    run: StoredRun
    short: str
    timeline: Timeline
    tree: Totals
    pending: tuple[ApprovalRequested, ...] = ()


Entry = (StepEntry | ModelEntry | PartialEntry | ToolEntry | AskedEntry | DecidedEntry | ResumedEntry | CancelEntry
         | RequeuedEntry | RejectedEntry | EndEntry | ChildEntry)


@dataclass(frozen=True, slots=True)
class Timeline:
    """A run's entries in log order, what it inherited, its calls in doubt, and whether its log ends it.

    ``started``: its ``run_started`` (the system prompt and the tool specs its model was given); None for a
    queued run that has not started.
    """

    entries: list[Entry]
    inherited: Inherited | None = None
    doubts: list[InDoubt] = field(default_factory=list)
    finished: bool = False
    started: RunStarted | None = None


def tool_failed(finished: ToolFinished) -> bool:
    """Whether a call failed: not ok, or an ``ERROR:`` observation (as the stats count it)."""
    return tally.failed(finished)


def args_text(args: Any) -> str:
    """A call's arguments as JSON (text arguments as they are)."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)


def timeline(run: StoredRun, parent: StoredRun | None = None, *, state: RunState | None = None,
             registry: ToolRegistry | None = None) -> Timeline:
    """``run``'s timeline; ``parent`` is the run it was forked from or follows (None: none, or not in the store).

    ``registry``: the tools a resume would bring, which judge its calls in doubt with the log's record.
    """
    return Timeline(entries(run), inherited(run.facts, parent), in_doubt(run, state, registry), ends(run),
                    started(run))


def started(run: StoredRun) -> RunStarted | None:
    """The run's ``run_started``, or None while a queued run has not started."""
    return next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)


def entries(run: StoredRun) -> list[Entry]:
    """The run's entries, in log order."""
    found: list[Entry] = []
    opened: dict[str, ToolEntry] = {}  # the latest start of each call without a result yet
    ended: dict[str, ToolEntry] = {}  # the latest result of each call
    steps: dict[int, StepEntry] = {}  # the latest opening of each step
    sent: list[MessageAppended] = []  # the messages logged since the last model call
    seen = 0  # the messages logged so far: the next call is sent them all
    live = run.liveness == LIVE
    partial: PartialEntry | None = None  # the reply being written, as its model_delta facts tell
    for event, fact in zip(run.events, run.facts, strict=True):
        at = event.at
        match fact:
            case StepStarted(step=step):
                steps[step] = StepEntry(step, at, continued=step in steps)
                found.append(steps[step])
            case StepFinished(step=step) if step in steps:
                steps[step].seconds = (at - steps[step].at).total_seconds()
            case ModelDelta(step=step, text=text, offset=offset):
                if partial is None or partial.step != step or offset == 0:  # a reply (or its new attempt) begins
                    partial = PartialEntry(step, at, [])
                    found.append(partial)
                partial.pieces.append(text)
            case ModelCalled():
                if partial is not None and fact.error is None:  # the reply came: the model entry has its text
                    _drop(found, partial)
                partial = None
                if fact.step in steps:
                    tokens = fact.tokens
                    steps[fact.step].tokens, steps[fact.step].estimated = tokens.total, tokens.estimated
                # its reply is logged just before it, in its step: what it answered, not what it was sent
                answer = sent[-1:] if sent and sent[-1].step == fact.step and \
                    sent[-1].message["role"] == "assistant" else []
                given = sent[:len(sent) - len(answer)]
                found.append(ModelEntry(fact.step, at, fact, seen - len(answer), tuple(m.message for m in given)))
                sent = answer
            case MessageAppended():
                sent.append(fact)
                seen += 1
            case ToolStarted(call_id=call_id):
                opened[call_id] = ToolEntry(fact.step, at, call_id, fact.name, fact, live=live)
                found.append(opened[call_id])
            case ToolFinished(call_id=call_id):
                entry = opened.pop(call_id, None)
                if entry is None:  # refused before it started
                    entry = ToolEntry(fact.step, at, call_id, fact.name, None)
                    found.append(entry)
                entry.finished, ended[call_id] = fact, entry
            case ToolReturnedLate(call_id=call_id) if call_id in ended:
                ended[call_id].late = fact
            case ApprovalRequested():
                found.append(AskedEntry(fact.step, at, fact))
            case ApprovalDecided():
                found.append(DecidedEntry(fact.step, at, fact))
            case RunResumed():
                found.append(ResumedEntry(fact.step, at, fact))
            case CancelRequested():
                found.append(CancelEntry(fact.step, at, fact))
            case RunRequeued():
                found.append(RequeuedEntry(fact.step, at, fact))
            case OutputRejected():
                found.append(RejectedEntry(fact.step, at, fact))
            case RunFinished():
                found.append(EndEntry(fact.step, at, fact))
            case _:
                pass
    if partial is not None:
        partial.live = live
    return found


def _drop(found: list[Entry], entry: Entry) -> None:
    """Take ``entry`` out of ``found``: it is the last one, or near it."""
    for i in range(len(found) - 1, -1, -1):
        if found[i] is entry:
            del found[i]
            return
