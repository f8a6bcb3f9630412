"""The CLI with OTLP export on: a dead collector costs about 2 s and one warning line; --record-content."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner.cli import specs as loading
from runner.cli.spans import EXPORT_GRACE_S
from runner.tracing.attrs import TOOL_ARGUMENTS
from tests.cli.helpers import FakeOpenAI, completion, installed_runner, invoke


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def dead_collector(monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TIMEOUT",
                 "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return endpoint


def test_the_cli_exporter_waits_at_most_two_seconds_per_export(dead_collector: str) -> None:
    exporter = loading.cli_exporter()
    assert exporter.inner._client._timeout == loading.CLI_EXPORT_TIMEOUT_S == 2.0  # type: ignore[attr-defined]


def test_a_timeout_from_the_environment_wins(dead_collector: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    assert loading.cli_exporter().inner._client._timeout == 7.0  # type: ignore[attr-defined]


def test_a_failed_export_warns_once_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    class Failing(InMemorySpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.FAILURE

    exporter = loading.WarnOnce(Failing(), "http://127.0.0.1:1/v1/traces", 3.0)
    assert [exporter.export([]), exporter.export([])] == [SpanExportResult.FAILURE] * 2
    assert capsys.readouterr().err == (
        "warning: spans not exported to http://127.0.0.1:1/v1/traces (is the collector running?); the run is "
        "recorded: `runner spans RUN --endpoint http://127.0.0.1:1/v1/traces` sends its spans later\n")


@pytest.fixture
def stuck_collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A collector that takes the request, then answers one header line a second, for ever: each read
    from the socket is quick, so the exporters' own (per-read) timeout never fires."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TIMEOUT",
                 "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_PROTOCOL", "RUNNER_DB"):
        monkeypatch.delenv(name, raising=False)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(1 << 20)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not stop.wait(0.5):
                    conn.sendall(b"X-Wait: 1\r\n")
            except OSError:
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    yield endpoint
    stop.set()
    server.close()


@pytest.mark.process
def test_demo_with_a_collector_that_never_finishes_answering_gives_up_with_one_warning_line(
        stuck_collector: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    done = subprocess.run([installed_runner(), "demo", "--quiet", "--db", db],
                          capture_output=True, text=True, timeout=25, env=os.environ.copy())  # it took 32 s
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"warning: spans not exported to {stuck_collector}/v1/traces (no answer within 3 s); "
                           f"the run is recorded: `runner spans {run_id_in(done.stdout)} --endpoint "
                           f"{stuck_collector}/v1/traces --db {db}` sends its spans later\n")


@pytest.mark.process
def test_spans_to_a_collector_that_never_finishes_answering_is_one_error_line(
        stuck_collector: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    assert invoke("demo", "--quiet", "--db", db, env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""}).exit_code == 0
    run_id = invoke("runs", "--db", db, "--json").stdout.split('"run_id": "')[1].split('"')[0]
    env = dict(os.environ, OTEL_EXPORTER_OTLP_TIMEOUT="1")
    done = subprocess.run([installed_runner(), "spans", run_id, "--db", db, "--endpoint",
                           f"{stuck_collector}/v1/traces"], capture_output=True, text=True, timeout=25, env=env)
    assert (done.returncode, done.stderr) == (3, f"Error: exporting the spans of run {run_id} to "
                                                 f"{stuck_collector}/v1/traces failed: no answer within 2 s\n")


@pytest.mark.process
def test_demo_with_the_collector_down_ends_fast_with_one_warning_line(dead_collector: str, tmp_path: Path) -> None:
    """The installed script does not hang on a dead collector: its timeout says so. The bound is loose
    (ten times the export's deadline; about 3 s is usual) so a loaded machine cannot fail it: the
    next test pins the 2 s the demo's export may wait."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    done = subprocess.run([installed_runner(), "demo", "--quiet", "--db", db], capture_output=True, text=True,
                          timeout=10 * (loading.CLI_EXPORT_TIMEOUT_S + EXPORT_GRACE_S), env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"warning: spans not exported to {dead_collector}/v1/traces (is the collector running?); "
                           f"the run is recorded: `runner spans {run_id_in(done.stdout)} --endpoint "
                           f"{dead_collector}/v1/traces --db {db}` sends its spans later\n")


def test_demo_with_the_collector_down_exports_once_through_the_two_second_exporter(
        dead_collector: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[loading.WarnOnce] = []
    cli_exporter = loading.cli_exporter

    def recorded(db_hint: str = "") -> loading.WarnOnce:
        made.append(cli_exporter(db_hint))
        return made[-1]

    monkeypatch.setattr(loading, "cli_exporter", recorded)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    result = invoke("demo", "--quiet", "--db", db)
    assert result.exit_code == 0, result.output
    (exporter,) = made
    assert exporter.inner._client._timeout == loading.CLI_EXPORT_TIMEOUT_S == 2.0  # type: ignore[attr-defined]
    assert (exporter.deadline_s, exporter.warned, exporter.hung) == (3.0, True, False)
    assert result.stderr == (f"warning: spans not exported to {dead_collector}/v1/traces (is the collector running?); "
                             f"the run is recorded: `runner spans {run_id_in(result.stdout)} --endpoint "
                             f"{dead_collector}/v1/traces --db {db}` sends its spans later\n")


def run_id_in(stdout: str) -> str:
    found = re.search(r"^run id: ([0-9a-f]{32})$", stdout, re.M)
    assert found is not None, stdout
    return found[1]


@pytest.mark.process
def test_the_export_warning_and_the_next_steps_name_the_run_and_the_endpoint_set(
        dead_collector: str, tmp_path: Path) -> None:
    assert not dead_collector.endswith(":4318")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    done = subprocess.run([installed_runner(), "demo", "--quiet", "--db", db],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    run_id = run_id_in(done.stdout)
    command = f"runner spans {run_id} --endpoint {dead_collector}/v1/traces --db {db}"
    assert f"`{command}`" in done.stderr
    assert f"  runner spans {run_id[:8]} --endpoint {dead_collector}/v1/traces --db {db}\n" in done.stdout


@pytest.mark.parametrize(("flag", "arguments"),
                         [([], None), (["--record-content"], '{"expression": "127.50 * 1.18 / 4"}')])
def test_demo_record_content_puts_the_tool_arguments_on_the_spans(
        live: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        flag: list[str], arguments: str | None) -> None:
    provider, exporter = live
    monkeypatch.setattr("runner.cli.runs.tracer_provider", lambda *_: (provider, lambda: None))
    result = invoke("demo", "--quiet", "--db", f"sqlite:///{tmp_path / 'runs.db'}", *flag)
    assert result.exit_code == 0, result.output
    (tool,) = [span for span in exporter.get_finished_spans() if span.name == "execute_tool calculate"]
    assert tool.attributes is not None
    assert tool.attributes.get(TOOL_ARGUMENTS) == arguments



@pytest.mark.parametrize(("command", "flag", "arguments"), [
    ("resume", [], None), ("resume", ["--record-content"], '{"city": "Oslo"}'),
    ("fork", [], None), ("fork", ["--record-content"], '{"city": "Oslo"}')])
def test_resume_and_fork_record_content_put_the_tool_arguments_on_the_spans(
        live: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        command: str, flag: list[str], arguments: str | None) -> None:
    provider, exporter = live
    monkeypatch.setattr("runner.cli.runs.tracer_provider", lambda *_: (provider, lambda: None))
    tools = "tests.loop.helpers:weather_registry"
    oslo = completion("", [("c2", "get_weather", {"city": "Oslo"})])
    # resume: the first run stops on its step limit after Paris; fork: it ends at once, the fork asks again
    first_reply = completion("", [("c1", "get_weather", {"city": "Paris"})]) if command == "resume" else (
        completion("Let me see."))
    with FakeOpenAI(first_reply, oslo, completion("Cold.")) as server:
        model = ("--model", "openai:fake", "--base-url", server.url, "--api-key", "k", "--quiet",
                 "--db", f"sqlite:///{tmp_path / 'runs.db'}")
        first = invoke("run", "Weather?", "--tools", tools, "--max-steps", "1", *model)
        found = re.search(r"^run id: ([0-9a-f]{32})$", first.stdout, re.M)
        assert found is not None, first.output
        exporter.clear()
        then = ("--max-steps", "3") if command == "resume" else ("--at", "1", "--max-steps", "3")
        go = invoke(command, found[1][:8], "--tools", tools, *then, *model, *flag)
    assert go.exit_code == 0, go.output
    (tool,) = [span for span in exporter.get_finished_spans() if span.name == "execute_tool get_weather"]
    assert tool.attributes is not None
    assert tool.attributes.get(TOOL_ARGUMENTS) == arguments
