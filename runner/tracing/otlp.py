"""Configure the standard OTLP exporter from the standard environment variables.

The exporter and the SDK read ``OTEL_EXPORTER_OTLP_*``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_BSP_*`` themselves.
The protocol is http/protobuf unless ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` says grpc.
The few settings the runner reads itself are read in this module only.
"""

from __future__ import annotations

import base64
import importlib
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status

from ..errors import RunnerError
from .attrs import OI_PROJECT

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

HTTP_HINT = "pip install 'durable-agent-runner[otlp]'"
DEFAULT_EXPORT_TIMEOUT_S = 10.0  # the OTLP exporters' own default
GRPC_HINT = "pip install opentelemetry-exporter-otlp-proto-grpc"


class TracingSetupError(RunnerError):
    """The OTLP exporter cannot be set up (missing package, unsupported protocol)."""


def otlp_setting(name: str) -> str | None:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``; None when neither is set."""
    return os.environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}") or None


def otlp_protocol() -> str:
    """The OTLP protocol the environment asks for: ``http/protobuf`` unless it says otherwise."""
    return (otlp_setting("PROTOCOL") or "http/protobuf").strip().lower()


def traces_endpoint() -> str:
    """Where the exporter sends spans: the traces endpoint as given, else the endpoint (``/v1/traces`` on HTTP)."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if endpoint:
        return endpoint
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/")
    return base if otlp_protocol() == "grpc" else f"{base}/v1/traces"


def export_timeout_s(default: float = DEFAULT_EXPORT_TIMEOUT_S) -> float:
    """The export timeout ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`` sets (seconds), or ``default``."""
    configured = otlp_setting("TIMEOUT")
    try:
        value = float(configured) if configured else default
    except ValueError:
        return default
    return value if value > 0 else default


def otlp_exporter(timeout_s: float | None = None) -> SpanExporter:
    """The OTLP span exporter the environment asks for (http/protobuf by default).

    ``timeout_s`` bounds each export, retries included (default: ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT``, else 10 s).
    """
    protocol = otlp_protocol()
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingSetupError(f"OTLP export needs the OTLP/HTTP exporter: {HTTP_HINT}") from None
        return OTLPSpanExporter(timeout=timeout_s)
    if protocol == "grpc":
        try:
            grpc = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        except ImportError:
            raise TracingSetupError(f"OTLP over gRPC needs the gRPC exporter: {GRPC_HINT}") from None
        exporter: SpanExporter = grpc.OTLPSpanExporter(timeout=timeout_s)
        return exporter
    raise TracingSetupError(f"unsupported OTLP protocol {protocol!r}: use 'http/protobuf' or 'grpc'")


def with_project(resource: Resource) -> Resource:
    """``resource`` with ``openinference.project.name`` set to its service name, unless it has one.

    Phoenix files each trace under that project (its "default" one otherwise); the
    standard ``OTEL_RESOURCE_ATTRIBUTES`` sets it explicitly, and then wins.
    """
    if resource.attributes.get(OI_PROJECT):
        return resource
    return resource.merge(Resource({OI_PROJECT: str(resource.attributes.get(SERVICE_NAME, ""))}))


def configure_tracing(service_name: str | None = None, *, set_global: bool = False,
                      exporter: SpanExporter | None = None) -> TracerProvider:
    """Make a ``TracerProvider`` that batches spans to the OTLP endpoint the environment names.

    Call ``provider.shutdown()`` before exiting: it flushes the spans still in the batch.
    The spans land in the OpenInference (Phoenix) project named after the service,
    unless ``OTEL_RESOURCE_ATTRIBUTES`` names one.

    Args:
        service_name: the service, used only when ``OTEL_SERVICE_NAME`` and
            ``OTEL_RESOURCE_ATTRIBUTES`` do not name one.
        set_global: also make it OpenTelemetry's global provider, which can be set once a process.
        exporter: replaces the OTLP exporter, for tests or other backends.
    """
    resource = Resource.create()
    if service_name and str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    resource = with_project(resource)
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter if exporter is not None else otlp_exporter()))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as an OTLP/JSON ``ExportTraceServiceRequest``: what a collector's ``/v1/traces`` takes as JSON.

    OTLP/JSON writes trace and span ids in hex, where protobuf's JSON mapping would write base64.
    """
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    value: dict[str, Any] = MessageToDict(encode_spans([_utf8_span(span) for span in spans]))
    for resource in value.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(value: Any) -> Any:
    """An attribute value with each lone surrogate as U+FFFD (the log keeps them; protobuf strings are UTF-8)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, (tuple, list)):
        return tuple(_utf8(item) for item in value)
    return value


def _utf8_span(span: ReadableSpan) -> ReadableSpan:
    """``span`` with its name, attributes, resource and status text encodable as UTF-8."""
    status = Status(span.status.status_code, _utf8(span.status.description))
    resource = Resource({k: _utf8(v) for k, v in span.resource.attributes.items()}, span.resource.schema_url)
    return ReadableSpan(_utf8(span.name), span.context, span.parent, resource,
                        {k: _utf8(v) for k, v in (span.attributes or {}).items()}, span.events, span.links,
                        span.kind, status=status, start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)
