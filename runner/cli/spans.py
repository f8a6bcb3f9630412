"""``runner spans RUN...``: rebuild runs' spans from the log and send them over OTLP, sub-agents' runs too.

A sub-agent's child run is a run of its own, whose spans go in its parent's trace under the parent's
span of the call: sending the parent alone would leave that trace without them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from rich.text import Text

from .._log.facts import RunStarted
from .._log.records import StoredRun
from .._text import plural
from .._tools.agents import SUBAGENT
from ..tracing import otlp_exporter, rebuild_spans
from ..tracing.otlp import export_timeout_s, otlp_setting
from .options import CliError, Env, common
from .render import console, print_json
from .specs import CLI_EXPORT_TIMEOUT_S

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from ..store import RunStore

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


def with_subagents(store: RunStore, runs: Sequence[StoredRun]) -> list[tuple[StoredRun, str | None]]:
    """``runs``, each followed by its sub-agents' child runs and theirs, depth first, each once.

    With each run, the run it was found under (None: one of ``runs``).
    """
    found: dict[str, tuple[StoredRun, str | None]] = {}
    pending: list[tuple[StoredRun, str | None]] = [(run, None) for run in reversed(runs)]
    while pending:
        run, above = pending.pop()
        if run.run_id in found:
            continue
        found[run.run_id] = (run, above)
        below = [store.get_run(child.run_id) for child in store.children(run.run_id)]
        pending.extend((child, run.run_id) for child in reversed(below) if _origin(child) == SUBAGENT)
    return list(found.values())


def _origin(run: StoredRun) -> str | None:
    started = next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)
    return started.origin if started is not None else None


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

    A run's sub-agents' runs go too (their spans are in its trace, under its calls).
    The spans keep the ids and the service name the live run had (or ids derived
    from the run id), so a backend that already has them deduplicates. Standard
    OTEL_* variables apply; OTEL_SERVICE_NAME names only runs no tracer recorded
    (default: runner).
    """
    with env.store() as store:
        stored = with_subagents(store, [store.find_run(ref) for ref in run_refs])
    built = [(run.run_id, rebuild_spans(run, record_content=record_content)) for run, _ in stored]
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
    sent = [{"run_id": run_id, "trace_id": f"{s[0].context.trace_id:032x}" if s else None, "spans": len(s),
             "subagent_of": above} for (run_id, s), (_, above) in zip(built, stored, strict=True)]
    if env.as_json:
        print_json(sent)
        return
    out = console()
    for item, (_, run_spans), (_, above) in zip(sent, built, stored, strict=True):
        of = f", sub-agent of run {above}" if above else ""
        out.print(Text(f"sent {plural(len(run_spans), 'span')} of run {item['run_id']}{of} (trace {item['trace_id']})"))
