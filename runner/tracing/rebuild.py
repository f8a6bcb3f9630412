"""Rebuild a stored run's spans from its event log, to ship them after the fact.

The live tracer's builder (``builder.SpanBuilder``) is fed the stored facts with their logged
times and span ids, so the rebuilt spans are the live ones. Sending a run twice sends the
same ids, which backends deduplicate. A run whose process was killed still rebuilds: its
open spans end at its last event.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, TraceFlags, TraceState

from .._log.ids import derived_trace_id, is_trace_id
from .._log.records import StoredRun
from . import attrs
from .builder import Made, SpanBuilder
from .otlp import with_project

DEFAULT_SERVICE_NAME = "runner"  # what ``runner run`` traces under, too
_SCOPE = InstrumentationScope(attrs.SCOPE)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def readable(made: Made, trace_id: int, resource: Resource, state: TraceState | None = None,
             contexts: dict[str, SpanContext] | None = None) -> ReadableSpan:
    """The SDK's finished span of ``made`` in trace ``trace_id``: what span processors and exporters take.

    ``contexts`` keeps the contexts of the spans whose children were made first (a span ends after
    its children): each is made once, as a parent, then taken by its own span.
    """
    contexts = {} if contexts is None else contexts
    own = contexts.pop(made.span_id, None) or SpanContext(trace_id, int(made.span_id, 16), False, _SAMPLED, state)
    parent = None
    if made.parent:
        parent = contexts.get(made.parent)
        if parent is None:
            parent = contexts[made.parent] = SpanContext(trace_id, int(made.parent, 16), False, _SAMPLED, state)
    links: tuple[Link, ...] = ()
    if made.link is not None:
        links = (Link(SpanContext(int(made.link[0], 16), int(made.link[1], 16), True, _SAMPLED)),)
    # by position (name, context, parent, resource, attributes, events, links, kind, instrumentation_info,
    # status, start_time, end_time, instrumentation_scope): a span each, keywords cost more than the rest
    return ReadableSpan(made.name, own, parent, resource, made.attrs, (), links, made.kind, None, made.status,
                        made.start, made.end, _SCOPE)


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
    builder = SpanBuilder(run.run_id, record_content=record_content, model=run.model or "", provider=run.provider,
                          agent_name=run.agent_name)
    builder.replay(run)
    builder.cut(builder.last, short=False)
    trace_id = int(run.trace_id if is_trace_id(run.trace_id) else derived_trace_id(run.run_id), 16)
    resource = resource if resource is not None else run_resource(builder.service_name)
    contexts: dict[str, SpanContext] = {}
    return [readable(made, trace_id, resource, None, contexts)
            for made in sorted(builder.done, key=lambda made: made.order)]


def export_run(run: StoredRun, exporter: SpanExporter, *, record_content: bool = False,
               resource: Resource | None = None) -> SpanExportResult:
    """Rebuild ``run``'s spans and hand them to ``exporter`` (OTLP or any other)."""
    return exporter.export(rebuild_spans(run, record_content=record_content, resource=resource))
