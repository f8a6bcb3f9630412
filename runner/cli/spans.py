"""``runner spans RUN...``: rebuild runs' spans from the log and send them over OTLP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from rich.text import Text

from .._text import plural
from ..tracing import otlp_exporter, rebuild_spans
from ..tracing.otlp import export_timeout_s, otlp_setting
from .options import CliError, Env, common
from .render import console, print_json
from .specs import CLI_EXPORT_TIMEOUT_S

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

EXPORT_GRACE_S = 1.0  # past the exporter's own timeout, before an export counts as hung


def bounded_export(exporter: SpanExporter, spans: Sequence[ReadableSpan], deadline_s: float) -> SpanExportResult | None:
    """Call ``exporter.export(spans)``, giving up after ``deadline_s`` in all and returning None then.

    The exporters' timeout bounds each read from the socket, not the export,
    so a collector that answers a byte at a time could hold an export without end.
    The export runs on a daemon thread, so one that never ends cannot keep the process from exiting.
    """
    box: list[SpanExportResult] = []

    def work() -> None:
        try:
            box.append(exporter.export(spans))
        except Exception:
            box.append(SpanExportResult.FAILURE)

    worker = threading.Thread(target=work, name="runner-export", daemon=True)
    worker.start()
    worker.join(deadline_s)
    return box[0] if box else None


def exporter_for(endpoint: str | None) -> SpanExporter:
    """The OTLP exporter the ``OTEL_EXPORTER_OTLP_*`` variables describe; ``endpoint`` overrides theirs.

    It gives up after ``CLI_EXPORT_TIMEOUT_S``, as a run's does, unless a variable sets the timeout.
    """
    timeout_s = None if otlp_setting("TIMEOUT") else CLI_EXPORT_TIMEOUT_S
    if endpoint is None:
        return otlp_exporter(timeout_s)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        return otlp_exporter()  # raises the install hint
    return OTLPSpanExporter(endpoint=endpoint, timeout=timeout_s)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def exporter_logs() -> Iterator[list[str]]:
    """Keep the exporter's own warnings off stderr; the caller reports them in its one line."""
    logger = logging.getLogger("opentelemetry.exporter")
    handler, propagate = _Collect(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@click.command()
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option("--endpoint", metavar="URL",
              help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces "
                   "(default: from OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT).")
@click.option("--record-content", is_flag=True,
              help="Include messages, arguments and results in the spans (as a run traced with record_content).")
@common
def spans(env: Env, run_refs: tuple[str, ...], endpoint: str | None, record_content: bool) -> None:
    """Rebuild the spans of stored runs from their log and export them over OTLP.

    The spans keep the ids and the service name the live run had (or ids derived
    from the run id), so a backend that already has them deduplicates. Standard
    OTEL_* variables apply; OTEL_SERVICE_NAME names only runs no tracer recorded
    (default: runner).
    """
    with env.store() as store:
        stored = [store.find_run(ref) for ref in run_refs]
    built = [(run.run_id, rebuild_spans(run, record_content=record_content)) for run in stored]
    exporter = exporter_for(endpoint)
    deadline_s = export_timeout_s(CLI_EXPORT_TIMEOUT_S) + EXPORT_GRACE_S
    hung = False
    try:
        with exporter_logs() as logged:
            for run_id, run_spans in built:
                result = bounded_export(exporter, run_spans, deadline_s)
                if result is not SpanExportResult.SUCCESS:
                    hung = result is None
                    target = endpoint or "the OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)"
                    why = (f": no answer within {deadline_s:g} s" if hung
                           else f": {logged[-1]}" if logged else "")
                    raise CliError(f"exporting the spans of run {run_id} to {target} failed{why}")
    finally:
        if not hung:  # a hung export holds the exporter: its shutdown would wait on it
            exporter.shutdown()
    sent = [{"run_id": run_id, "trace_id": f"{s[0].context.trace_id:032x}" if s else None, "spans": len(s)}
            for run_id, s in built]
    if env.as_json:
        print_json(sent)
        return
    out = console()
    for item, (_, run_spans) in zip(sent, built, strict=True):
        out.print(Text(f"sent {plural(len(run_spans), 'span')} of run {item['run_id']} (trace {item['trace_id']})"))
