"""``RunState``: everything the loop knows about a run, folded from its facts.

The loop changes its state only by applying the facts it records, so
``fold(stored events)`` gives back exactly the state the loop had when it wrote
the last of them. That is what makes resume, fork and follow-up the same loop
started from a different state, and what tells resume, from the log alone, which
calls of the interrupted reply finished, which never started and which are in
doubt (started, never finished: the process died while the tool ran).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from . import statuses as st
from .events import (
    ApprovalRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
)
from .messages import Message, ModelReply, ToolCall

# Refusals after which a run of identical calls starts over (the call was never a repeat).
_RESETS_REPEATS = frozenset({"unknown_tool", "invalid_args"})


def call_key(call: ToolCall) -> str | None:
    """What makes two calls identical for the repeat guard; None when the args cannot be keyed."""
    try:
        return call.name + "\x00" + json.dumps(call.args, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


@dataclass(slots=True)
class RunState:
    """One run's state. ``reply`` is the reply whose calls are being worked through and
    ``next_call`` the index of its first call without an observation."""

    run_id: str = ""
    started: RunStarted | None = None
    limits: dict[str, object] = field(default_factory=dict)  # the latest: a resume may change them
    messages: list[Message] = field(default_factory=list)
    steps: int = 0
    spent: int = 0
    tool_calls_run: int = 0
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
    open_step: bool = False
    status: str = st.RUNNING
    answer: str | None = None
    error: str | None = None
    segment: int = 0
    resumed_from: str | None = None
    resumed_error: str | None = None
    events: int = 0
    # The repeat guard's key of the call looked at last: the loop asks before a call runs and
    # again when it finishes, and the key costs a sorted json.dumps.
    _key_memo: tuple[ToolCall | None, str | None] = field(default=(None, None), repr=False, compare=False)

    def copy(self) -> RunState:
        """An independent copy (containers copied; messages and facts are never mutated)."""
        return replace(self, limits=dict(self.limits), messages=list(self.messages), seen_ids=set(self.seen_ids),
                       started_calls=dict(self.started_calls), finished_calls=dict(self.finished_calls),
                       pending_approvals=dict(self.pending_approvals), decisions=dict(self.decisions))

    @property
    def remaining_calls(self) -> list[ToolCall]:
        """Calls of the current reply that have no observation yet, in order."""
        if self.reply is None:
            return []
        return list(self.reply.tool_calls[self.next_call:])

    def in_doubt(self, call_id: str) -> bool:
        return call_id in self.started_calls and call_id not in self.finished_calls

    def apply(self, event: Event) -> None:
        """Advance by one fact (the loop calls this for every fact it records)."""
        self.events += not isinstance(event, ModelCallStarted)
        if isinstance(event, MessageAppended):
            self._message(event.message)
        elif isinstance(event, ModelCalled):
            self._model_called(event)
        elif isinstance(event, StepStarted):
            if event.step != self.reply_step:
                self.reply = None
            self.steps, self.open_step = max(self.steps, event.step), True
        elif isinstance(event, ToolStarted):
            self.tool_calls_run += 1
            self.started_calls[event.call_id] = event
        elif isinstance(event, ToolFinished):
            self._tool_finished(event)
        elif isinstance(event, ApprovalRequested):
            self.pending_approvals[event.call_id] = event
        elif isinstance(event, StepFinished):
            self.open_step = False
            if not self.remaining_calls:
                self.reply = None
        elif isinstance(event, RunFinished):
            self.status, self.answer, self.error = event.status, event.answer, event.error
        elif isinstance(event, RunResumed):
            self.run_id = event.run_id or self.run_id
            self.segment += 1
            self.resumed_from, self.resumed_error = self.status, self.error
            self.status, self.answer, self.error = st.RUNNING, None, None
            self.decisions.update(event.decisions)
            self.limits = dict(event.limits)
        elif isinstance(event, RunStarted):
            self.started = event
            self.run_id = event.run_id or self.run_id
            self.limits = dict(event.limits)
            if event.forked_at_step:
                self.steps = event.forked_at_step - 1

    def _message(self, message: Message) -> None:
        self.messages.append(message)
        if message["role"] == "tool" and self.reply is not None:
            self.next_call += 1
            self.pending_approvals.pop(message["tool_call_id"], None)

    def _model_called(self, event: ModelCalled) -> None:
        reply = event.reply
        if reply is None or event.error is not None:
            return
        self.seen_ids.update(call.id for call in reply.tool_calls)
        if reply.usage is not None:
            self.spent += reply.usage.input_tokens + reply.usage.output_tokens
        else:
            self.spent += event.prompt_tokens + event.reply_tokens
        self.reply, self.reply_step, self.next_call = reply, event.step, 0
        self.started_calls, self.finished_calls = {}, {}

    def _tool_finished(self, event: ToolFinished) -> None:
        self.finished_calls[event.call_id] = event
        if event.refused in _RESETS_REPEATS:
            self.last_call_key, self.repeats = None, 0
            return
        call = next((c for c in self.remaining_calls if c.id == event.call_id), None)
        key = None if call is None else self.key_of(call)
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


def fold(events: Iterable[Event], run_id: str = "") -> RunState:
    """The state a run's facts add up to."""
    state = RunState(run_id=run_id)
    for event in events:
        state.apply(event)
    return state


