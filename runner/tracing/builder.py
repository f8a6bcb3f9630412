"""Turn a run's facts into spans: the one builder behind live and rebuilt traces.

It is fed each fact with its time (nanoseconds since the epoch) and the span id the log gave
it, in log order, and hands back each span as it ends. The live tracer feeds it the facts the
store has just committed (or, with no store, the facts as they happen) on its own thread;
``rebuild_spans`` feeds it a stored run. Same facts, same spans: ids, names, parents,
attributes, times and statuses. It knows nothing of the SDK: ``Made`` is plain data.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from .._log.ids import child_run_id, derived_span_id, is_link, is_span_id
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    MessageAppended,
    ModelCalled,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
    span_key,
)
from ..messages import reply_data
from . import attrs, content

if TYPE_CHECKING:
    from .._log.records import StoredRun

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The second SQLite's text last named, and its nanoseconds since the epoch: replaced whole, for threads.
_second: tuple[str, int] = ("\x00", 0)


def at_ns(at: datetime | str | int) -> int:
    """Nanoseconds since the epoch of a logged time, exact to the microsecond the log holds."""
    if isinstance(at, str):  # SQLite's text, YYYY-MM-DD HH:MM:SS.ffffff: the second's value is kept
        global _second
        known = _second
        if len(at) == 26 and at.startswith(known[0]):  # as the store writes it: the same second as the last
            return known[1] + int(at[20:]) * 1000
        head = at[:19]
        if known[0] != head:
            known = _second = (head, calendar.timegm(time.strptime(head, "%Y-%m-%d %H:%M:%S")) * 1_000_000_000)
        return known[1] + int(at[20:26].ljust(6, "0")) * 1000 if len(at) > 20 else known[1]
    if isinstance(at, int):
        return at
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(slots=True)
class Made:
    """One span of a run: open until ``end`` is set. ``parent`` and ``span_id`` are 16 hex digits.

    ``link`` is another trace's span the root points at (a fork's or a follow-up's parent run).
    ``segment`` is the part of the run (0, then 1 after the first resume...) it belongs to.
    """

    key: str
    name: str
    kind: SpanKind
    span_id: str
    parent: str | None
    start: int
    attrs: attrs.Attrs
    segment: int
    order: int = 0  # opened after ``order`` others of the run
    end: int | None = None
    status: Status = field(default_factory=lambda: attrs.UNSET)
    link: tuple[str, str] | None = None


class SpanBuilder:
    """Spans from one run's facts, fed in log order; each ended span is appended to ``done``.

    ``record_content`` puts messages, arguments and results on the spans (as the live run had it).
    """

    def __init__(self, run_id: str, *, record_content: bool = False, model: str = "", provider: str | None = None,
                 agent_name: str | None = None) -> None:
        self.run_id, self.record_content = run_id, record_content
        self.model, self.provider, self.agent = model, provider, agent_name
        self.done: list[Made] = []
        self.spans: dict[str, Made] = {}  # the open ones, by key
        self.shown: list[dict[str, Any]] = []
        self.shown_at_step: dict[int, int] = {}
        self.args: dict[str, Any] = {}
        self.task: str | None = None
        self.tool_specs: list[Mapping[str, Any]] = []
        self.described: dict[str, attrs.Attrs] = {}  # each tool's name, description and schema (``tools_described``)
        self.service_name: str | None = None
        self.common: attrs.Attrs = attrs.run_ids(run_id, None)
        self.context: attrs.Attrs = {}  # the root spans' session and parent (``attrs.run_context``)
        self.offered: attrs.Attrs = {}
        self.subagents: frozenset[str] = frozenset()
        self.segment = 0
        self.suffix, self.root_key = "", "run"  # the part's span keys' end, and its root's key
        self.first_root: str | None = None  # the first part's root span id: a resumed part's root goes under it
        self.last = self.last_event = 0
        self.opened = 0
        self.ended: set[int] = set()  # the parts of the run that ended with ``run_finished``
        self.decided: dict[str, attrs.Attrs] = {}  # each decided call's decision, for the span of its call

    # -- spans -----------------------------------------------------------------

    def open(self, key: str, name: str, kind: SpanKind, span_id: str, parent: str | None, start: int,
             values: attrs.Attrs, *, under: str | None = None) -> Made:
        """A span under the open span of key ``parent``; a root (``parent`` None) goes under span id ``under``.

        In a forged or damaged log the parent may not be open (a step's facts after ``run_finished``, or with
        no ``step_started``): the span goes under the part's root while it is open, else it is a root.
        A key still open (a forged second ``tool_started``) has its span ended first.
        """
        if parent is not None:
            under = self.under(parent)
        made = Made(key, name, kind, span_id, under, start, values, self.segment, self.opened, None, attrs.UNSET)
        self.opened += 1
        if key in self.spans:  # opened twice (a forged log): the first ends here rather than be lost
            self.close(key, start)
        self.spans[key] = made
        return made

    def under(self, parent: str) -> str | None:
        """The span id a span under the open span of key ``parent`` goes under (see ``open``)."""
        found = self.spans.get(parent) or self.spans.get(self.root_key)
        return found.span_id if found is not None else None

    def close(self, key: str, at: int, values: attrs.Attrs | None = None, status: Status | None = None) -> None:
        made = self.spans.pop(key, None)
        if made is None:
            return
        made.end = at
        if values:
            made.attrs.update(values)
        if status is not None:
            made.status = status
        self.done.append(made)

    def cut(self, at: int, *, short: bool) -> None:
        """End every open span at ``at``, where the run's log stops.

        ``short``: the run stopped there (it was resumed after its process died), so a tool call
        still open was cut short and its outcome is unknown, which its span says with its arguments.
        """
        for key, made in list(self.spans.items()):
            if short and key.startswith("tool:"):  # a call under way (not its step, nor one awaiting approval)
                made.attrs.update(attrs.cut_short())
                call_id = made.attrs.get(attrs.TOOL_CALL_ID)
                if self.record_content and isinstance(call_id, str):
                    made.attrs.update(attrs.tool_arguments(self.args.get(call_id)))
                made.status = Status(StatusCode.ERROR, attrs.CUT_SHORT)
            self.close(key, at)

    # -- facts -----------------------------------------------------------------

    def replay(self, run: StoredRun) -> None:
        """Feed a stored run's facts with their logged times and span ids.

        The log's columns are text anyone may write: an id that is not a span id is derived instead.
        """
        feed = self.feed
        for event, fact in zip(run.events, run.facts, strict=True):
            feed(fact, event.at, event.span_id if is_span_id(event.span_id) else None)

    def feed(self, fact: Event, logged_at: datetime | str | int, span_id: str | None) -> None:
        """Take the run's next fact, logged at ``logged_at`` under span ``span_id`` (None: derived from its key).

        ``logged_at`` is the log's time (a ``datetime``, SQLite's text, or ns since the epoch).
        A message has no span and is not where spans end: it is read only when content is recorded.
        """
        if fact.__class__ is MessageAppended:
            if self.record_content:
                self.saw(fact.message)
            return
        at = at_ns(logged_at)
        self.last_event = self.last
        if at > self.last:
            self.last = at
        if not span_id:
            span_id = derived_span_id(self.run_id, span_key(fact, self.segment + isinstance(fact, RunResumed)))
        match fact:  # the facts of every step first
            case StepStarted(step=step):
                self.shown_at_step[step] = len(self.shown)
                self.open(self.step_key(step), attrs.step_name(step), attrs.KIND_STEP, span_id, self.root_key, at,
                          attrs.step_start(self.common, step))
            case ModelCalled():
                self.model_call(fact, at, span_id)
            case ToolStarted(step=step, name=name, call_id=call_id):
                values = attrs.tool_start(self.common, step, name, call_id, self.described)
                if name in self.subagents:
                    values.update(attrs.transfer(name, child_run_id(self.run_id, call_id)))
                if self.decided:
                    values.update(self.decided.get(call_id, {}))
                self.open(f"tool:{call_id}{self.suffix}", attrs.tool_name(name), attrs.KIND_TOOL, span_id,
                          self.step_key(step), at, values)
            case ToolFinished():
                self.tool_finished(fact, at, span_id)
            case StepFinished(step=step):
                self.close(self.step_key(step), at)
            case RunResumed():
                self.resumed(fact, at, span_id)
            case RunStarted():
                self.started(fact, at, span_id)
            case RunFinished():
                self.finished(fact, at)
            case ApprovalRequested(step=step, name=name, call_id=call_id, args=args):
                self.awaiting(step, name, call_id, args, at)
            case ApprovalDecided(call_id=call_id, approved=approved, decided_by=by, reason=reason):
                self.decided[call_id] = attrs.decision(approved, by, reason if self.record_content else None)
            case _:
                pass

    def saw(self, message: Mapping[str, Any]) -> None:
        """A message of the conversation: what the next chat spans show, and the calls' arguments."""
        self.shown.append(dict(message))
        if message["role"] == "assistant":
            for call in message["tool_calls"]:
                self.args[call["id"]] = call["args"]

    def step_key(self, step: int) -> str:
        return f"step:{step}{self.suffix}"

    def part(self, segment: int) -> None:
        """Go on in part ``segment`` of the run: its span keys end ``@N`` after the first (as ``span_key``'s)."""
        self.segment = segment
        self.suffix = f"@{segment}" if segment else ""
        self.root_key = f"run{self.suffix}"

    def started(self, fact: RunStarted, at: int, span_id: str) -> None:
        self.run_id = fact.run_id or self.run_id
        self.model, self.provider = fact.model or self.model, fact.provider or self.provider
        self.agent = fact.agent_name or self.agent
        self.service_name = fact.service_name or None
        self.task, self.tool_specs = fact.task, list(fact.tool_specs)
        self.described = attrs.tools_described(self.tool_specs)
        self.subagents = attrs.subagents(fact.tool_traits)
        self.offer()
        self.common = attrs.run_ids(self.run_id, fact.session_id, fact.labels)
        self.context = attrs.run_context(self.common, fact.parent_run_id)
        values = {**self.root_start(), **self.run_input(), **attrs.origin(fact.origin, fact.forked_at_step)}
        name = attrs.fork_name(self.agent, fact.forked_at_step) if fact.origin == "fork" else attrs.run_name(self.agent)
        parent = fact.parent_span_id if is_span_id(fact.parent_span_id) else None
        root = self.open(self.root_key, name, attrs.KIND_RUN, span_id, None, at, values, under=parent)
        if is_link(fact.linked_span):
            trace_id, _, linked = fact.linked_span.partition(":")
            root.link = (trace_id, linked)
        self.first_root = span_id

    def resumed(self, fact: RunResumed, at: int, span_id: str) -> None:
        """A new root under the first one; what the last part left open ends where that part stopped."""
        self.cut(self.last_event, short=True)
        self.part(self.segment + 1)
        self.model, self.provider = fact.model or self.model, fact.provider or self.provider
        if fact.tool_traits is not None:
            self.subagents = attrs.subagents(fact.tool_traits)
        self.offer()
        values = self.root_start()
        values[attrs.RESUMED_FROM] = fact.reason
        values.update(self.run_input())
        self.open(self.root_key, attrs.resumed_name(self.agent, fact.reason), attrs.KIND_RUN, span_id, None, at,
                  values, under=self.first_root)

    def finished(self, fact: RunFinished, at: int) -> None:
        self.ended.add(self.segment)
        root = self.root_key
        for key in [key for key in self.spans if key != root]:
            self.close(key, at)
        values, status = attrs.run_end(fact.status, fact.error, content=self.record_content)
        if self.record_content:
            values.update(attrs.run_output(fact.answer, fact.output is not None))
        self.close(root, at, values, status)

    def offer(self) -> None:
        """With content on, what a part's chat spans repeat (a resumed part may name another model)."""
        if self.record_content:
            self.offered = content.offered(self.tool_specs)

    def root_start(self) -> attrs.Attrs:
        """A root span's attributes at start (the first part's and each resumed one's)."""
        return {**attrs.run_start(self.common, self.model, self.provider, self.agent), **self.context}

    def run_input(self) -> attrs.Attrs:
        return attrs.run_input(self.task) if self.record_content else {}

    def model_call(self, fact: ModelCalled, at: int, span_id: str) -> None:
        """A model call's span, whole: it is logged once the reply is in (opened and ended at once)."""
        step = fact.step
        values = attrs.chat_start(self.common, step, self.model, self.provider)
        reply = None
        if fact.reply is not None:
            reply = (reply_data(fact.reply) if self.record_content
                     else {"stop_reason": fact.reply.stop_reason, "tool_calls": fact.reply.tool_calls})
        usage = fact.usage
        ended, status = attrs.chat_end(fact.prompt_tokens, fact.reply_tokens,
                                       None if usage is None else (usage.input_tokens, usage.output_tokens),
                                       reply, fact.error, fact.error_type, content=self.record_content)
        values.update(ended)
        if fact.cost_usd is not None:
            values.update(attrs.chat_cost(fact.cost_usd, fact.prompt_cost_usd, fact.completion_cost_usd))
        if fact.first_chunk_s is not None:
            values.update(attrs.chat_streamed(fact.first_chunk_s))
        if self.record_content:
            shown = self.shown[:self.shown_at_step.get(step, len(self.shown))]
            values.update(content.chat_content(shown, reply, self.offered))
        self.done.append(Made(f"chat:{step}{self.suffix}", attrs.chat_name(self.model), attrs.KIND_CHAT, span_id,
                              self.under(self.step_key(step)), at - round(fact.latency_s * 1e9), values, self.segment,
                              self.opened, at, status))
        self.opened += 1

    def awaiting(self, step: int, name: str, call_id: str, args: Any, at: int) -> None:
        """A call that waits for a person's decision: its span lasts until the part of the run ends."""
        key = f"approval:{call_id}{self.suffix}"
        values = attrs.tool_start(self.common, step, name, call_id, self.described)
        values[attrs.AWAITING_APPROVAL] = True
        if self.record_content:
            values.update(attrs.tool_arguments(args))
        self.open(key, attrs.tool_name(name), attrs.KIND_TOOL, derived_span_id(self.run_id, key), self.step_key(step),
                  at, values)

    def tool_finished(self, fact: ToolFinished, at: int, span_id: str) -> None:
        key = f"tool:{fact.call_id}{self.suffix}"
        if key not in self.spans:  # refused before running: a span of zero length
            values = attrs.tool_start(self.common, fact.step, fact.name, fact.call_id, self.described)
            if fact.name in self.subagents:
                values.update(attrs.transfer(fact.name, None))
            values.update(self.decided.get(fact.call_id, {}))
            self.open(key, attrs.tool_name(fact.name), attrs.KIND_TOOL, span_id, self.step_key(fact.step), at, values)
        values, status = attrs.tool_end(fact.name, fact.observation, fact.ok, fact.ran, content=self.record_content)
        if self.record_content:
            values.update(attrs.tool_content(self.args.get(fact.call_id), fact.observation))
        self.close(key, at, values, status)
