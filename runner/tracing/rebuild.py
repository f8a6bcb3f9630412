"""A stored run's spans, rebuilt from its event log, and shipped after the fact.

Every event carries the id of the span it belongs to and the run carries its
trace id, so the rebuilt spans have the ids the live ones had (or the derived
ones when nothing traced the run). Names and attributes come from the same
functions the live recorder uses. Exporting a run twice sends the same ids,
which backends deduplicate.

A run that did not finish (its process was killed) still rebuilds: its open
spans end at its last event and carry no status.

The spans go out under the ``service.name`` the live ones had (logged with
``run_started``), so a resent trace lands with the service that produced it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags

from ..ids import derived_span_id, derived_trace_id
from . import attrs as a

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

DEFAULT_SERVICE_NAME = "runner"  # what ``runner run`` traces under, too


class StoredEventLike(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def at(self) -> datetime: ...
    @property
    def step(self) -> int | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def data(self) -> Mapping[str, Any]: ...
    @property
    def span_id(self) -> str | None: ...


class StoredRunLike(Protocol):
    """What rebuilding needs of ``store.get_run(run_id)``."""

    @property
    def run_id(self) -> str: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def agent_name(self) -> str | None: ...
    @property
    def events(self) -> Sequence[StoredEventLike]: ...


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
    attrs: a.Attrs
    end: int | None = None
    status: Status = field(default_factory=lambda: a.UNSET)


class _Builder:
    def __init__(self, run: StoredRunLike, record_content: bool) -> None:
        self.run, self.record_content = run, record_content
        self.run_id = run.run_id
        self.model = run.model or ""
        self.provider = run.provider
        self.spans: dict[str, _Span] = {}
        self.order: list[_Span] = []
        self.shown: list[dict[str, Any]] = []
        self.shown_at_step: dict[int, int] = {}
        self.args: dict[str, Any] = {}
        self.service_name: str | None = None
        self.last = 0

    def id_for(self, key: str, event: StoredEventLike) -> str:
        return event.span_id or derived_span_id(self.run_id, key)

    def open(self, key: str, name: str, kind: SpanKind, event: StoredEventLike, parent: str | None,
             attrs: a.Attrs, start: int | None = None) -> _Span:
        parent_id = self.spans[parent].span_id if parent in self.spans else None
        span = _Span(key, name, kind, self.id_for(key, event), parent_id,
                     _ns(event.at) if start is None else start, attrs)
        self.spans[key] = span
        self.order.append(span)
        return span

    def close(self, key: str, event: StoredEventLike, attrs: a.Attrs | None = None,
              status: Status | None = None) -> None:
        span = self.spans.get(key)
        if span is None or span.end is not None:
            return
        span.end = _ns(event.at)
        if attrs:
            span.attrs.update(attrs)
        if status is not None:
            span.status = status

    def feed(self, event: StoredEventLike) -> None:
        self.last = max(self.last, _ns(event.at))
        data, kind = event.data, event.kind
        if kind == "run_started":
            self.model = str(data.get("model") or self.model)
            self.provider = data.get("provider") or self.provider
            agent = data.get("agent_name") or self.run.agent_name
            self.service_name = data.get("service_name") or None
            self.open("run", a.run_name(agent), a.KIND_RUN, event, None,
                      a.run_start(self.run_id, self.model, self.provider, agent))
        elif kind == "message":
            message = data["message"]
            self.shown.append(dict(message))
            for call in message.get("tool_calls") or ():
                self.args[f"tool:{call.get('id')}"] = call.get("args")
        elif kind == "step_started":
            step = int(data["step"])
            self.shown_at_step[step] = len(self.shown)
            self.open(f"step:{step}", a.step_name(step), a.KIND_STEP, event, "run", a.step_start(self.run_id, step))
        elif kind == "model_call":
            self.model_call(event, data)
        elif kind == "tool_started":
            step = self.step_of(event)
            self.open(f"tool:{data['call_id']}", a.tool_name(str(data["name"])), a.KIND_TOOL, event,
                      f"step:{step}", a.tool_start(self.run_id, step, str(data["name"]), str(data["call_id"])))
        elif kind == "tool_finished":
            self.tool_finished(event, data)
        elif kind == "step_finished":
            self.close(f"step:{data['step']}", event)
        elif kind == "run_finished":
            for span in self.order:
                if span.key != "run":
                    self.close(span.key, event)
            attrs, status = a.run_end(str(data["status"]), data.get("error"), content=self.record_content)
            self.close("run", event, attrs, status)

    def step_of(self, event: StoredEventLike) -> int:
        step = event.step if event.step is not None else event.data.get("step")
        return int(step or 0)

    def model_call(self, event: StoredEventLike, data: Mapping[str, Any]) -> None:
        step = int(data.get("step") or self.step_of(event))
        start = _ns(event.at) - round(float(data.get("latency_s") or 0.0) * 1e9)
        span = self.open(f"chat:{step}", a.chat_name(self.model), a.KIND_CHAT, event, f"step:{step}",
                         a.chat_start(self.run_id, step, self.model, self.provider), start=start)
        reply = data.get("reply")
        usage_data = data.get("usage") or (reply or {}).get("usage")
        usage = (int(usage_data["input_tokens"]), int(usage_data["output_tokens"])) if usage_data else None
        attrs, status = a.chat_end(int(data.get("prompt_tokens") or 0), int(data.get("reply_tokens") or 0), usage,
                                   reply, data.get("error"), data.get("error_type"), content=self.record_content)
        if self.record_content:
            attrs.update(a.chat_content(self.shown[:self.shown_at_step.get(step, len(self.shown))], reply))
        span.attrs.update(attrs)
        span.status = status
        span.end = _ns(event.at)

    def tool_finished(self, event: StoredEventLike, data: Mapping[str, Any]) -> None:
        key, name = f"tool:{data['call_id']}", str(data["name"])
        if key not in self.spans:  # refused before running: a span of zero length
            step = self.step_of(event)
            self.open(key, a.tool_name(name), a.KIND_TOOL, event, f"step:{step}",
                      a.tool_start(self.run_id, step, name, str(data["call_id"])))
        observation = str(data["observation"])
        attrs, status = a.tool_end(name, observation, bool(data["ok"]), bool(data.get("ran", True)),
                                  content=self.record_content)
        if self.record_content:
            attrs.update(a.tool_content(self.args.get(key), observation))
        self.close(key, event, attrs, status)


def run_resource(service_name: str | None) -> Resource:
    """The resource a rebuilt run goes out under.

    The environment's resource (``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME``),
    as a ``TracerProvider`` would build it, named after ``service_name`` (the live
    run's, from its log) when there is one. A run no SDK recorded has none: it keeps
    the environment's service name, or ``DEFAULT_SERVICE_NAME`` ("runner") rather
    than OpenTelemetry's ``unknown_service:python``.
    """
    found = Resource.create()
    if service_name:
        return found.merge(Resource({SERVICE_NAME: service_name}))
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        return found.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return found


def rebuild_spans(run: StoredRunLike, *, record_content: bool = False,
                  resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of a stored run, with its recorded ids, names, attributes, parents and times.

    ``record_content`` must match what the live run used for the attributes to
    agree. ``resource``, when given, is used as is; by default it is
    ``run_resource`` of the service name the live run logged (see there).
    """
    builder = _Builder(run, record_content)
    for event in sorted(run.events, key=lambda e: e.seq):
        builder.feed(event)
    trace_id = int(run.trace_id or derived_trace_id(run.run_id), 16)
    flags = TraceFlags(TraceFlags.SAMPLED)
    scope = InstrumentationScope(a.SCOPE)
    resource = resource if resource is not None else run_resource(builder.service_name)
    spans = []
    for s in builder.order:
        parent = SpanContext(trace_id, int(s.parent, 16), False, flags) if s.parent else None
        spans.append(ReadableSpan(
            s.name, SpanContext(trace_id, int(s.span_id, 16), False, flags), parent, resource, s.attrs,
            kind=s.kind, status=s.status, start_time=s.start,
            end_time=s.end if s.end is not None else builder.last, instrumentation_scope=scope))
    return spans


def export_run(run: StoredRunLike, exporter: SpanExporter, *, record_content: bool = False,
               resource: Resource | None = None) -> SpanExportResult:
    """Rebuild ``run``'s spans and hand them to ``exporter`` (OTLP or any other)."""
    return exporter.export(rebuild_spans(run, record_content=record_content, resource=resource))
