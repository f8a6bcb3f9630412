"""Turning command-line specs into objects: ``--tools module:attr``, ``--model provider:name``, a tracer."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._text import clean
from .._tools.registry import ToolRegistry
from .._view.continuation import last_model
from ..errors import RunnerError
from ..messages import Model
from ..store import StoredRun
from ..tracing.attrs import RUN_ID
from ..tracing.otlp import otlp_protocol, otlp_setting, traces_endpoint
from .options import CliError, CliUsageError

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

R = TypeVar("R")
PROVIDERS = ("openai", "anthropic")
MODEL_HELP = "openai:NAME (any OpenAI-compatible server) or anthropic:NAME"
SERVICE_NAME = "runner"
DEFAULT_TRACES_ENDPOINT = "http://127.0.0.1:4318/v1/traces"  # OTLP/HTTP's usual port
CLI_EXPORT_TIMEOUT_S = 2.0  # per export, retries included: what a dead collector adds to a CLI run


def load_tools(spec: str) -> ToolRegistry:
    """The ``ToolRegistry`` named by ``module:attr`` (an instance, or a zero-argument callable returning one).

    The current directory is importable, as with ``python -m``.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"--tools expects module:attr (e.g. myapp.tools:registry), got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliUsageError(f"--tools {spec}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:
        raise CliUsageError(f"--tools {spec}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CliUsageError(f"--tools {spec}: {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(value, ToolRegistry) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise CliUsageError(f"--tools {spec}: calling {attr}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, ToolRegistry):
        raise CliUsageError(f"--tools {spec}: expected a ToolRegistry or a function returning one, "
                       f"got {type(value).__name__}")
    return value


def model_options(fn: Callable[..., R]) -> Callable[..., R]:
    """``--model``, ``--base-url`` and ``--api-key``, for the commands that call a real model."""
    fn = click.option("--api-key", envvar=None, default=None, metavar="KEY",
                      help="API key (default: OPENAI_API_KEY or ANTHROPIC_API_KEY).")(fn)
    fn = click.option("--base-url", default=None, metavar="URL",
                      help="Server URL (default: OPENAI_BASE_URL or ANTHROPIC_BASE_URL).")(fn)
    return fn


def build_model(spec: str, base_url: str | None, api_key: str | None) -> Model:
    """A model adapter from ``provider:name``; the SDK's own environment variables fill the rest."""
    provider, sep, name = spec.partition(":")
    if not sep or provider not in PROVIDERS or not name:
        raise CliUsageError(f"--model expects {MODEL_HELP}, got {spec!r}")
    from .. import adapters

    build = adapters.openai_model if provider == "openai" else adapters.anthropic_model
    try:
        return build(name, base_url=base_url, api_key=api_key)
    except RunnerError:
        raise  # a missing SDK: its own message names the extra to install
    except Exception as exc:  # the SDK refusing its settings (no key, bad URL) before any call
        raise CliError(f"cannot set up {spec}: {exc}") from None


def tracer_provider(db_hint: str = "") -> tuple[TracerProvider, Callable[[], None]]:
    """The provider a recorded run is traced with, and how to flush it before exiting.

    With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) set, an OTLP
    exporter configured by the standard variables (``cli_exporter``); otherwise
    OpenTelemetry's global provider (whatever the process set up, a no-op by default).
    ``db_hint`` (``Env.hint``) completes the command its warning suggests.
    """
    from opentelemetry import trace

    if otlp_setting("ENDPOINT"):
        from ..tracing import configure_tracing

        provider = configure_tracing(SERVICE_NAME, exporter=cli_exporter(db_hint))
        return provider, provider.shutdown
    return trace.get_tracer_provider(), lambda: None


def cli_exporter(db_hint: str = "") -> WarnOnce:
    """Make the OTLP exporter of a CLI run, which gives up after ``CLI_EXPORT_TIMEOUT_S`` in all.

    ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`` overrides that time.
    It gives up in time even with a collector that answers a byte at a time.
    So a collector that is down or stuck delays the exit by about that, and its failures are one warning line.
    """
    from ..tracing.otlp import export_timeout_s, otlp_exporter
    from .spans import EXPORT_GRACE_S

    inner = otlp_exporter(None if otlp_setting("TIMEOUT") else CLI_EXPORT_TIMEOUT_S)
    deadline_s = export_timeout_s(CLI_EXPORT_TIMEOUT_S) + EXPORT_GRACE_S
    return WarnOnce(inner, traces_endpoint(), deadline_s, db_hint)


def configured_endpoint() -> str | None:
    """The OTLP traces URL the ``OTEL_EXPORTER_OTLP_*`` variables set, or None when they set none."""
    return traces_endpoint() if otlp_setting("ENDPOINT") else None


def spans_command(run_ref: str, db_hint: str, endpoint: str | None) -> str:
    """The ``runner spans`` command that sends a run's spans to ``endpoint`` (None: OTLP's usual one).

    Over gRPC it leaves the endpoint to the variables that set it (``--endpoint`` is OTLP/HTTP's).
    """
    if endpoint is not None and otlp_protocol() == "grpc":
        return f"runner spans {run_ref}{db_hint}"
    return f"runner spans {run_ref} --endpoint {shlex.quote(endpoint or DEFAULT_TRACES_ENDPOINT)}{db_hint}"


def continuing_model(spec: str | None, run: StoredRun, base_url: str | None, api_key: str | None) -> Model:
    """The model that continues ``run``: ``--model`` if given, else the one it last ran with.

    The log records a model's provider and name, not its server or key: those come
    from ``--base-url``/``--api-key`` or the SDK's environment variables, as for ``run``.
    """
    if spec is None:
        name, provider = last_model(run)
        if provider not in PROVIDERS:
            raise CliUsageError(f"run {run.run_id} ran with model {name!r}" + (f" ({provider})" if provider else "")
                                + f", which cannot be rebuilt from the log: pass --model ({MODEL_HELP})")
        spec = f"{provider}:{name}"
    if spec == "scripted":
        raise CliUsageError("a scripted model cannot continue a run: use --model with " + MODEL_HELP)
    return build_model(spec, base_url, api_key)


class WarnOnce(SpanExporter):
    """``inner``, with its failures (logged warnings, errors, retries) turned into one warning line.

    The exporter's own log lines are kept off stderr while it exports (see ``spans.exporter_logs``);
    the first failed export prints one line naming the endpoint, later ones nothing.
    """

    def __init__(self, inner: SpanExporter, endpoint: str, deadline_s: float, db_hint: str = "") -> None:
        self.inner, self.endpoint, self.deadline_s, self.db_hint = inner, endpoint, deadline_s, db_hint
        self.warned = self.hung = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from .spans import bounded_export, exporter_logs

        if self.hung:  # the collector never answered the last one: do not wait on it again
            return SpanExportResult.FAILURE
        with exporter_logs():
            result = bounded_export(self.inner, spans, self.deadline_s)  # an exporter bug: FAILURE
        self.hung = result is None
        if result is not SpanExportResult.SUCCESS and not self.warned:
            self.warned = True
            why = f"no answer within {self.deadline_s:g} s" if self.hung else "is the collector running?"
            command = spans_command(_run_of(spans), self.db_hint, self.endpoint)
            click.echo(f"warning: spans not exported to {clean(self.endpoint)} ({why}); the run "
                       f"is recorded: `{clean(command)}` sends its spans later", err=True)
        return result if result is not None else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        from .spans import exporter_logs

        if self.hung:  # its shutdown would wait on the export that never ended
            return
        with exporter_logs():
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _run_of(spans: Sequence[ReadableSpan]) -> str:
    """The run id the spans carry (``RUN`` for spans of no run)."""
    for span in spans:
        run_id = (span.attributes or {}).get(RUN_ID)
        if isinstance(run_id, str) and run_id:
            return run_id
    return "RUN"
