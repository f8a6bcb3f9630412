"""Fold a run's facts into ``RunState``, everything the loop knows about the run.

The loop changes its state only by applying the facts it records.
So ``fold`` of the stored events gives back exactly the state the loop had when it wrote the last one.
That makes resume, fork and follow-up the same loop started from another state.
It also tells resume, from the log alone, which calls finished, never started, or are in doubt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from .. import _jsontext
from ..messages import DEFAULT_TRAITS, Message, ModelReply, ToolCall, ToolTraits
from . import tally
from .facts import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    ModelDelta,
    OutputRejected,
    OutputSchema,
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
from .statuses import Status

# Refusals after which a run of identical calls starts over (the call was never a repeat).
_RESETS_REPEATS = frozenset({"unknown_tool", "invalid_args"})


def call_key(call: ToolCall) -> str | None:
    """What makes two calls identical for the repeat guard; None when the args cannot be keyed."""
    try:
        return call.name + "\x00" + _jsontext.sorted_keys(call.args)
    except (TypeError, ValueError, RecursionError):
        return None


class Repeats(NamedTuple):
    """The repeat guard's count: the key of the last call answered, and how many identical calls in a row end there."""

    key: str | None
    in_a_row: int

    def then(self, key: str | None, refused: str | None) -> Repeats:
        """The count once a call of ``key`` is answered (``refused`` says why it was not run, if it was not)."""
        if refused in _RESETS_REPEATS:
            return Repeats(None, 0)
        return Repeats(key, self.in_a_row + 1 if key is not None and key == self.key else 1)


@dataclass(slots=True)
class RunState:
    """Hold one run's state.

    ``reply`` is the reply whose calls are being worked through, ``next_call`` its first call with no observation;
    ``pending_approvals`` are the calls awaiting a decision, ``decisions`` every decision logged. ``tool_traits``
    are the traits of the tools it goes on with (None: none logged), ``started_traits`` each started call's.
    ``cost_usd`` adds up the model calls whose cost is known; ``costs_unknown`` counts the replies whose cost
    is not; ``tree_spent`` and ``tree_cost_usd`` add the sub-agents' child runs: what the budgets count.
    """

    run_id: str = ""
    started: RunStarted | None = None
    model: str = ""  # the model its calls go to now, as ``provider:model`` (a resume may name another)
    limits: dict[str, object] = field(default_factory=dict)  # the latest: a resume may change them
    messages: list[Message] = field(default_factory=list)
    steps: int = 0
    spent: int = 0
    cost_usd: float = 0.0
    costs_unknown: int = 0
    children_spent: int = 0  # the tokens of the sub-agent calls answered (their child runs' trees)
    children_cost_usd: float = 0.0  # and the known part of their cost
    tool_calls_run: int = 0  # tool functions started, a call run again counted again: what max_tool_calls limits
    tool_calls: int = 0  # calls that ran, each once however many attempts it took: what the run reports
    seen_ids: set[str] = field(default_factory=set)
    last_call_key: str | None = None
    repeats: int = 0
    reply: ModelReply | None = None
    reply_step: int = 0
    next_call: int = 0
    started_calls: dict[str, ToolStarted] = field(default_factory=dict)
    finished_calls: dict[str, ToolFinished] = field(default_factory=dict)
    pending_approvals: dict[str, ApprovalRequested] = field(default_factory=dict)
    decisions: dict[str, bool | str] = field(default_factory=dict)
    decided_by: dict[str, str] = field(default_factory=dict)
    tool_traits: dict[str, ToolTraits] | None = None
    started_traits: dict[str, ToolTraits | None] = field(default_factory=dict)
    open_step: bool = False
    status: Status = Status.RUNNING
    answer: str | None = None
    error: str | None = None
    segment: int = 0
    resumed_from: str | None = None
    resumed_error: str | None = None
    cancel_requested_by: str | None = None  # who asked for the cancel the run last stopped for
    events: int = 0
    output_schema: OutputSchema | None = None  # the typed result due (output_type=), the latest start's or resume's
    output_failures: int = 0  # its failed attempts (output_rejected), against max_output_retries
    output: Any = None  # the typed result a done run ended with, as JSON
    # The repeat guard's key of the call looked at last: the loop asks before a call runs and
    # again when it finishes, and the key costs a sorted json.dumps.
    _key_memo: tuple[ToolCall | None, str | None] = field(default=(None, None), repr=False, compare=False)

    def copy(self) -> RunState:
        """An independent copy (containers copied; messages and facts are never mutated)."""
        return replace(self, limits=dict(self.limits), messages=list(self.messages), seen_ids=set(self.seen_ids),
                       started_calls=dict(self.started_calls), finished_calls=dict(self.finished_calls),
                       pending_approvals=dict(self.pending_approvals), decisions=dict(self.decisions),
                       decided_by=dict(self.decided_by), started_traits=dict(self.started_traits))

    @property
    def remaining_calls(self) -> list[ToolCall]:
        """Calls of the current reply that have no observation yet, in order."""
        if self.reply is None:
            return []
        return list(self.reply.tool_calls[self.next_call:])

    @property
    def tree_spent(self) -> int:
        """The run's tokens and those of the child runs its answered sub-agent calls made."""
        return self.spent + self.children_spent

    @property
    def tree_cost_usd(self) -> float:
        """The known cost of the run's model calls and of its answered sub-agent calls' child runs."""
        return self.cost_usd + self.children_cost_usd

    def in_doubt(self, call_id: str) -> bool:
        return call_id in self.started_calls and call_id not in self.finished_calls

    def traits_of(self, name: str) -> ToolTraits | None:
        """The traits the log records for tool ``name`` now (None: the log records none)."""
        if self.tool_traits is None:
            return None
        return self.tool_traits.get(name, DEFAULT_TRAITS)

    def apply(self, event: Event) -> None:
        """Advance by one fact (the loop calls this for every fact it records)."""
        kind = type(event)
        (_APPLY.get(kind) or _handler(kind))(self, event)

    def _step_started(self, event: StepStarted) -> None:
        self.events += 1
        if event.step != self.reply_step:
            self.reply = None
        self.steps, self.open_step = max(self.steps, event.step), True

    def _model_call_started(self, event: ModelCallStarted) -> None:
        pass  # transient: never stored, so not counted among the run's events

    def _tool_started(self, event: ToolStarted) -> None:
        self.events += 1
        self.tool_calls_run += 1
        if event.call_id not in self.started_calls:  # else a call in doubt run again on resume
            self.tool_calls += 1
        self.started_calls[event.call_id] = event
        if self.tool_traits is not None:
            self.started_traits[event.call_id] = self.traits_of(event.name)

    def _approval_requested(self, event: ApprovalRequested) -> None:
        self.events += 1
        if event.call_id not in self.decisions:
            self.pending_approvals[event.call_id] = event

    def _approval_decided(self, event: ApprovalDecided) -> None:
        self.events += 1
        self.decisions[event.call_id] = event.verdict
        self.decided_by[event.call_id] = event.decided_by
        self.pending_approvals.pop(event.call_id, None)

    def _step_finished(self, event: StepFinished) -> None:
        self.events += 1
        self.open_step = False
        if self.reply is not None and self.next_call >= len(self.reply.tool_calls):
            self.reply = None

    def _run_finished(self, event: RunFinished) -> None:
        self.events += 1
        self.status, self.answer, self.error = event.status, event.answer, event.error
        self.output = event.output

    def _output_rejected(self, event: OutputRejected) -> None:
        self.events += 1
        self.output_failures += 1

    def _run_resumed(self, event: RunResumed) -> None:
        self.events += 1
        self.run_id = event.run_id or self.run_id
        self.segment += 1
        self.resumed_from, self.resumed_error = self.status, self.error
        self.status, self.answer, self.error, self.output = Status.RUNNING, None, None, None
        if event.model:
            self.model = tally.model_key(event.model, event.provider)
        if event.output_schema is not None:
            self.output_schema = event.output_schema
        self.decisions.update(event.decisions)
        for call_id in event.decisions:
            self.pending_approvals.pop(call_id, None)
        self.limits = dict(event.limits)
        self._traits(event.tool_traits)

    def _run_requeued(self, event: RunRequeued) -> None:
        self.events += 1
        self.limits = {**self.limits, **event.limits}  # the limits a worker resumes it under

    def _cancel_requested(self, event: CancelRequested) -> None:
        self.events += 1
        self.cancel_requested_by = event.requested_by

    def _run_started(self, event: RunStarted) -> None:
        self.events += 1
        self.started = event
        self.model = tally.model_key(event.model, event.provider)
        self.run_id = event.run_id or self.run_id
        self.limits = dict(event.limits)
        self._traits(event.tool_traits)
        self.output_schema = event.output_schema
        if event.forked_at_step:
            self.steps = event.forked_at_step - 1

    def _traits(self, recorded: dict[str, ToolTraits] | None) -> None:
        """Take a start's or a resume's tool traits.

        A log that recorded traits once records them at every start and resume; an older log has none.
        """
        if recorded is not None or self.tool_traits is not None:
            self.tool_traits = dict(recorded or {})

    def _not_folded(self, event: Event) -> None:
        self.events += 1  # a fact the loop's state does not depend on (``run_queued``)

    def _message(self, event: MessageAppended) -> None:
        self.events += 1
        message = event.message
        self.messages.append(message)
        if message["role"] == "assistant" and message.get("tool_calls"):  # every accepted reply's, and the
            self.seen_ids.update(call["id"] for call in message["tool_calls"])  # ones a fork or follow-up carries
        elif message["role"] == "tool" and self.reply is not None:
            self._answered(message["tool_call_id"])

    def _model_called(self, event: ModelCalled) -> None:
        self.events += 1
        if event.cost_usd is not None:
            self.cost_usd += event.cost_usd
        elif event.reply is not None:  # a call that returned nothing is taken to have cost nothing
            self.costs_unknown += 1
        reply = event.reply
        if reply is None or event.error is not None:
            return
        if reply.usage is not None:
            self.spent += reply.usage.input_tokens + reply.usage.output_tokens
        else:
            self.spent += event.prompt_tokens + event.reply_tokens
        self.reply, self.reply_step, self.next_call = reply, event.step, 0
        self.started_calls, self.finished_calls, self.started_traits = {}, {}, {}

    def _tool_finished(self, event: ToolFinished) -> None:
        self.events += 1
        self.finished_calls[event.call_id] = event
        if event.child_run_id is not None:
            self.children_spent += event.child_tokens
            self.children_cost_usd += event.child_cost_usd

    def _tool_returned_late(self, event: ToolReturnedLate) -> None:
        """A call cut short returned after all: a resume gives the model what it returned.

        Only while its observation has not entered the conversation (a call given up on when
        it timed out and answered since keeps the observation the model read).
        """
        self.events += 1
        finished = self.finished_calls.get(event.call_id)
        if finished is not None and any(call.id == event.call_id for call in self.remaining_calls):
            self.finished_calls[event.call_id] = replace(finished, observation=event.observation, ok=event.ok)

    def _answered(self, call_id: str) -> None:
        """A call's observation entered the conversation: the repeat guard counts it, in the reply's order.

        Counted here rather than at ``tool_finished``: calls run together finish in any order,
        while their observations are appended in the reply's.
        """
        calls = self.reply.tool_calls if self.reply is not None else ()
        call = calls[self.next_call] if self.next_call < len(calls) else None
        self.next_call += 1
        self.pending_approvals.pop(call_id, None)
        if call is None or call.id != call_id:
            self.last_call_key, self.repeats = None, 0
            return
        finished = self.finished_calls.get(call_id)
        if finished is not None and finished.refused in _RESETS_REPEATS:  # as ``Repeats.then``, spelled out:
            self.last_call_key, self.repeats = None, 0  # this runs for every call
            return
        key = self.key_of(call)
        self.repeats = self.repeats_if(key)
        self.last_call_key = key

    def key_of(self, call: ToolCall) -> str | None:
        """``call_key(call)``, computed once for the call being worked on."""
        memo = self._key_memo
        if memo[0] is not call:
            memo = self._key_memo = (call, call_key(call))
        return memo[1]

    def repeats_if(self, key: str | None) -> int:
        """How many identical calls in a row there would be with one more call of ``key``."""
        return self.repeats + 1 if key is not None and key == self.last_call_key else 1


_APPLY: dict[type, Callable[[RunState, Any], None]] = {
    MessageAppended: RunState._message,
    ModelCalled: RunState._model_called,
    StepStarted: RunState._step_started,
    ModelCallStarted: RunState._model_call_started,
    ToolStarted: RunState._tool_started,
    ToolFinished: RunState._tool_finished,
    ToolReturnedLate: RunState._tool_returned_late,
    ApprovalRequested: RunState._approval_requested,
    ApprovalDecided: RunState._approval_decided,
    StepFinished: RunState._step_finished,
    RunFinished: RunState._run_finished,
    RunResumed: RunState._run_resumed,
    RunRequeued: RunState._run_requeued,
    CancelRequested: RunState._cancel_requested,
    OutputRejected: RunState._output_rejected,
    RunStarted: RunState._run_started,
    ModelDelta: RunState._not_folded,  # live text, not conversation: a resume asks the model again
}


def _handler(kind: type) -> Callable[[RunState, Any], None]:
    """The handler of a fact's type: of the fact class it derives from, or none (only counted)."""
    found = next((h for cls, h in _APPLY.items() if issubclass(kind, cls)), RunState._not_folded)
    _APPLY[kind] = found
    return found


def fold(events: Iterable[Event], run_id: str = "") -> RunState:
    """The state a run's facts add up to."""
    state = RunState(run_id=run_id)
    for event in events:
        state.apply(event)
    return state


