"""Rebuild a stored run's spans from its event log, to ship them after the fact.

Each event carries its span id and the run its trace id, so rebuilt spans have the live ids.
Names and attributes come from the functions the live recorder uses.
Sending a run twice sends the same ids, which backends deduplicate.
A run whose process was killed still rebuilds: its open spans end at its last event.
Once the run has ended, a resumed run's first root reads as the whole run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags

from .._log.ids import child_run_id, derived_span_id, derived_trace_id
from .._log.records import StoredEvent, StoredRun
from ..events import (
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
from .otlp import with_project

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

DEFAULT_SERVICE_NAME = "runner"  # what ``runner run`` traces under, too


def _ns(at: datetime) -> int:
    """Nanoseconds since the epoch, exact to the microsecond a datetime holds."""
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(slots=True)
class _Span:
    key: str
    name: str
    kind: SpanKind
    span_id: str
    parent: str | None
    start: int
    attrs: attrs.Attrs
    end: int | None = None
    status: Status = field(default_factory=lambda: attrs.UNSET)


class _Builder:
    def __init__(self, run: StoredRun, record_content: bool) -> None:
        self.run, self.record_content = run, record_content
        self.run_id = run.run_id
        self.model = run.model or ""
        self.provider = run.provider
        self.spans: dict[str, _Span] = {}
        self.order: list[_Span] = []
        self.shown: list[dict[str, Any]] = []
        self.shown_at_step: dict[int, int] = {}
        self.args: dict[str, Any] = {}
        self.task: str | None = None
        self.tool_specs: list[Mapping[str, Any]] = []
        self.service_name: str | None = None
        self.common: attrs.Attrs = attrs.run_ids(self.run_id, None)
        self.context: attrs.Attrs = {}  # the root spans' session, parent and labels (``attrs.run_context``)
        self.offered: attrs.Attrs = {}
        self.described: dict[str, attrs.Attrs] = {}  # each tool's span attributes, by name (``attrs.tools_described``)
        self.top_start: attrs.Attrs = {}
        self.agent = run.agent_name
        self.subagents: frozenset[str] = frozenset()
        self.segment = 0
        self.last = self.last_event = 0

    def id_for(self, key: str, event: StoredEvent) -> str:
        return event.span_id or derived_span_id(self.run_id, key)

    def open(self, key: str, name: str, kind: SpanKind, event: StoredEvent, parent: str | None,
             values: attrs.Attrs, start: int | None = None, parent_id: str | None = None) -> _Span:
        """A span under the span of key ``parent``, or under span ``parent_id`` of another run (a child's root)."""
        parent_id = self.spans[parent].span_id if parent in self.spans else parent_id
        span = _Span(key, name, kind, self.id_for(key, event), parent_id,
                     _ns(event.at) if start is None else start, values)
        self.spans[key] = span
        self.order.append(span)
        return span

    def close(self, key: str, event: StoredEvent, values: attrs.Attrs | None = None,
              status: Status | None = None) -> None:
        span = self.spans.get(key)
        if span is None or span.end is not None:
            return
        span.end = _ns(event.at)
        if values:
            span.attrs.update(values)
        if status is not None:
            span.status = status

    def feed(self, event: StoredEvent, fact: Event) -> None:
        self.last_event = self.last
        self.last = max(self.last, _ns(event.at))
        if isinstance(fact, RunResumed):
            self.resumed(fact, event)
            return
        key = span_key(fact, self.segment)
        root = self.root_key
        if isinstance(fact, RunStarted):
            self.model, self.provider = fact.model or self.model, fact.provider or self.provider
            self.agent = fact.agent_name or self.run.agent_name
            self.service_name = fact.service_name or None
            self.task, self.tool_specs = fact.task, list(fact.tool_specs)
            self.described = attrs.tools_described(self.tool_specs)
            self.subagents = attrs.subagents(fact.tool_traits)
            self.offer()
            self.common = attrs.run_ids(self.run_id, fact.session_id, fact.labels)
            self.context = attrs.run_context(self.common, fact.parent_run_id)
            self.top_start = {**self.root_start(), **self.run_input()}
            self.open(key, attrs.run_name(self.agent), attrs.KIND_RUN, event, None, dict(self.top_start),
                      parent_id=fact.parent_span_id)
        elif isinstance(fact, MessageAppended):
            message = fact.message
            self.shown.append(dict(message))
            if message["role"] == "assistant":
                for call in message["tool_calls"]:
                    self.args[call["id"]] = call["args"]
        elif isinstance(fact, StepStarted):
            self.shown_at_step[fact.step] = len(self.shown)
            self.open(key, attrs.step_name(fact.step), attrs.KIND_STEP, event, root,
                      attrs.step_start(self.common, fact.step))
        elif isinstance(fact, ModelCalled):
            self.model_call(fact, key, event)
        elif isinstance(fact, ToolStarted):
            values = attrs.tool_start(self.common, fact.step, fact.name, fact.call_id, self.described)
            if fact.name in self.subagents:
                values.update(attrs.transfer(fact.name, child_run_id(self.run_id, fact.call_id)))
            self.open(key, attrs.tool_name(fact.name), attrs.KIND_TOOL, event, self.step_key(fact.step), values)
        elif isinstance(fact, ToolFinished):
            self.tool_finished(fact, key, event)
        elif isinstance(fact, StepFinished):
            self.close(key, event)
        elif isinstance(fact, RunFinished):
            for span in self.order:
                if span.key != root:
                    self.close(span.key, event)
            values, status = attrs.run_end(fact.status, fact.error, content=self.record_content)
            if self.record_content:
                values.update(attrs.run_output(fact.answer, fact.output is not None))
            self.close(root, event, values, status)
            top = self.spans.get("run")
            if self.segment and top is not None:  # the run's end is the top span's too
                top.attrs, top.status, top.end = {**self.top_start, **values}, status, _ns(event.at)

    @property
    def root_key(self) -> str:
        return f"run@{self.segment}" if self.segment else "run"

    def step_key(self, step: int) -> str:
        return span_key(StepStarted(step=step), self.segment)

    def resumed(self, fact: RunResumed, event: StoredEvent) -> None:
        """A new root in the same trace, under the first one; what a crash left open ends where it stopped."""
        for span in self.order:
            if span.end is None:
                span.end = self.last_event
        self.segment += 1
        self.model, self.provider = fact.model or self.model, fact.provider or self.provider
        if fact.tool_traits is not None:
            self.subagents = attrs.subagents(fact.tool_traits)
        self.offer()
        values = self.root_start()
        values[attrs.RESUMED_FROM] = fact.reason
        values.update(self.run_input())
        self.open(self.root_key, attrs.run_name(self.agent), attrs.KIND_RUN, event, "run", values)

    def offer(self) -> None:
        """With content on, what a part's chat spans repeat (a resumed part may name another model)."""
        if self.record_content:
            self.offered = content.offered(self.tool_specs)

    def root_start(self) -> attrs.Attrs:
        """A root span's attributes at start (the first part's and each resumed one's)."""
        return {**attrs.run_start(self.common, self.model, self.provider, self.agent), **self.context}

    def run_input(self) -> attrs.Attrs:
        return attrs.run_input(self.task) if self.record_content else {}

    def model_call(self, fact: ModelCalled, key: str, event: StoredEvent) -> None:
        step = fact.step
        start = _ns(event.at) - round(fact.latency_s * 1e9)
        span = self.open(key, attrs.chat_name(self.model), attrs.KIND_CHAT, event, self.step_key(step),
                         attrs.chat_start(self.common, step, self.model, self.provider), start=start)
        reply = None if fact.reply is None else reply_data(fact.reply)
        usage = fact.usage
        values, status = attrs.chat_end(fact.prompt_tokens, fact.reply_tokens,
                                        None if usage is None else (usage.input_tokens, usage.output_tokens),
                                        reply, fact.error, fact.error_type, content=self.record_content)
        if fact.cost_usd is not None:
            values.update(attrs.chat_cost(fact.cost_usd, fact.prompt_cost_usd, fact.completion_cost_usd))
        values.update(attrs.chat_streamed(fact.first_chunk_s))
        if self.record_content:
            shown = self.shown[:self.shown_at_step.get(step, len(self.shown))]
            values.update(content.chat_content(shown, reply, self.offered))
        span.attrs.update(values)
        span.status = status
        span.end = _ns(event.at)

    def tool_finished(self, fact: ToolFinished, key: str, event: StoredEvent) -> None:
        if key not in self.spans:  # refused before running: a span of zero length
            values = attrs.tool_start(self.common, fact.step, fact.name, fact.call_id, self.described)
            if fact.name in self.subagents:
                values.update(attrs.transfer(fact.name, None))
            self.open(key, attrs.tool_name(fact.name), attrs.KIND_TOOL, event, self.step_key(fact.step), values)
        values, status = attrs.tool_end(fact.name, fact.observation, fact.ok, fact.ran, content=self.record_content)
        if self.record_content:
            values.update(attrs.tool_content(self.args.get(fact.call_id), fact.observation))
        self.close(key, event, values, status)


def run_resource(service_name: str | None) -> Resource:
    """Build the resource a rebuilt run goes out under.

    It is the environment's resource, named after the live run's ``service_name`` when there is one.
    A run no SDK recorded keeps the environment's service name, else ``DEFAULT_SERVICE_NAME``.
    Its OpenInference project is named after that service unless the environment names one.
    """
    found = Resource.create()
    if service_name:
        found = found.merge(Resource({SERVICE_NAME: service_name}))
    elif str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return with_project(found)


def rebuild_spans(run: StoredRun, *, record_content: bool = False,
                  resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of a stored run, with its recorded ids, names, attributes, parents and times.

    ``record_content`` must match what the live run used for the attributes to
    agree. ``resource``, when given, is used as is; by default it is
    ``run_resource`` of the service name the live run logged (see there).
    """
    builder = _Builder(run, record_content)
    for event, fact in zip(run.events, run.facts, strict=True):
        builder.feed(event, fact)
    trace_id = int(run.trace_id or derived_trace_id(run.run_id), 16)
    flags = TraceFlags(TraceFlags.SAMPLED)
    scope = InstrumentationScope(attrs.SCOPE)
    resource = resource if resource is not None else run_resource(builder.service_name)
    spans = []
    for s in builder.order:
        parent = SpanContext(trace_id, int(s.parent, 16), False, flags) if s.parent else None
        spans.append(ReadableSpan(
            s.name, SpanContext(trace_id, int(s.span_id, 16), False, flags), parent, resource, s.attrs,
            kind=s.kind, status=s.status, start_time=s.start,
            end_time=s.end if s.end is not None else builder.last, instrumentation_scope=scope))
    return spans


def export_run(run: StoredRun, exporter: SpanExporter, *, record_content: bool = False,
               resource: Resource | None = None) -> SpanExportResult:
    """Rebuild ``run``'s spans and hand them to ``exporter`` (OTLP or any other)."""
    return exporter.export(rebuild_spans(run, record_content=record_content, resource=resource))
