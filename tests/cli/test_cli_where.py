"""Errors that say where: a model server that cannot be reached, a console port in use, no OTLP collector."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.cli import spans as spans_command
from runner.store import open_store
from tests.cli.helpers import installed_runner, invoke, one_error_line

WAIT_S = 60  # a bound on a subprocess, not an expectation


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "OPENAI_BASE_URL",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TIMEOUT",
                 "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_server_that_cannot_be_reached_is_named_in_the_error(tmp_path: Path, provider: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "openai" else "")
    result = invoke("run", "Weather in Paris?", "--tools", "tests.loop.helpers:weather_registry", "--model",
                    f"{provider}:m", "--base-url", url, "--api-key", "k", "--db", f"sqlite:///{tmp_path / 'r.db'}",
                    "--json", "--quiet")
    found = json.loads(result.stdout)
    assert found["status"] == "model_error"
    assert found["error"].startswith("APIConnectionError: Connection error. (base URL ")  # it said no more
    assert url in found["error"]


def test_a_console_port_in_use_is_a_usage_error_that_names_port(tmp_path: Path) -> None:
    db, _ = stored_run(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("ui", "--port", str(port), "--db", db)
    assert (result.exit_code, one_error_line(result)) == (
        2, f"Error: cannot listen on 127.0.0.1:{port}: the port is in use; give another with --port (or --port 0 "
           "for any free one)")


def stored_run(tmp_path: Path) -> tuple[str, str]:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        return db, run_agent("task", ScriptedModel(["done"]), ToolRegistry(), store=store).run_id


def test_spans_waits_on_a_collector_at_most_two_seconds_an_export(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[SpanExporter] = []
    real = spans_command.exporter_for

    def kept(*args: object) -> SpanExporter:
        made.append(real(*args))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(spans_command, "exporter_for", kept)
    db, run_id = stored_run(tmp_path)
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    result = invoke("spans", run_id, "--endpoint", endpoint, "--db", db)
    assert result.exit_code == 3
    [exporter] = made
    assert isinstance(exporter, OTLPSpanExporter)
    assert exporter._client._timeout == 2.0  # it waited 10 s, the exporter's default, retrying a refused connection


@pytest.mark.process
def test_spans_with_no_collector_is_one_error_line(tmp_path: Path) -> None:
    db, run_id = stored_run(tmp_path)
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    done = subprocess.run([installed_runner(), "spans", run_id, "--endpoint", endpoint, "--db", db],
                          capture_output=True, text=True, timeout=WAIT_S, env=env, check=False)
    assert done.returncode == 3
    assert done.stderr.splitlines() == [f"Error: exporting the spans of run {run_id} to {endpoint} failed: Failed "
                                        "to export spans batch due to timeout, max retries or shutdown."]
