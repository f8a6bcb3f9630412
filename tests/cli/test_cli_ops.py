"""``runner stats``, ``runner db`` and ``runner spans`` (against a real OTLP/HTTP receiver)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from runner.store import open_store
from runner.store.engine import parse_url, shown
from runner.store.migrate import alembic_config, head_revision
from tests.cli.helpers import R1, R2, R3, R4, R5, fill, invoke, one_error_line, rows
from tests.tracing.helpers import Receiver


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fill(url)
    return url


def test_stats_json_counts_statuses_tools_errors_and_tokens(db: str) -> None:
    with open_store(db) as store:
        tokens = sum(run.tokens for run in store.list_runs())
        steps = sum(1 for r in (R1, R2, R3, R4, R5) for e in store.get_run(r).events if e.kind == "step_finished")
    result = invoke("stats", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["runs"] == 5
    assert found["by_status"] == {"done": 3, "model_error": 1, "step_limit": 1}
    assert found["tokens"]["total"] == tokens
    assert found["tool_calls"] == 3
    assert {name: (t["calls"], t["errors"], t["error_rate"]) for name, t in found["tools"].items()} == {
        "c_to_f": (1, 0, 0.0), "echo_long": (1, 0, 0.0), "get_forecast": (1, 1, 1.0), "get_weather": (1, 0, 0.0)}
    assert found["step_latency"]["count"] == steps
    assert found["tool_latency"]["count"] == 4
    assert 0 <= found["step_latency"]["median_s"] <= found["step_latency"]["p95_s"]


def test_stats_window_and_table(db: str) -> None:
    result = invoke("stats", "--db", db, "--since", "2025-01-01T02:00", "--until", "2025-01-01T04:00")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("2 runs since 2025-01-01T02:00:00+00:00 until 2025-01-01T04:00:00+00:00; ")
    assert rows(result.stdout)[:2] == [["done", "1", "50%"], ["model_error", "1", "50%"]]
    recent = json.loads(invoke("stats", "--db", db, "--since", "1h", "--json").stdout)
    assert recent["by_status"] == {"done": 1}
    assert list(recent["tools"]) == ["echo_long", "get_forecast"]


def test_stats_of_an_empty_window(db: str) -> None:
    result = invoke("stats", "--db", db, "--since", "2030-01-01")
    assert result.stdout == "0 runs since 2030-01-01T00:00:00+00:00; 0 tokens; 0 tool calls\n"


def test_db_current_check_and_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    head = head_revision()
    result = invoke("db", "current", "--db", url)
    assert result.stdout == f"{url}: revision none (empty store), head is {head}\n"
    assert not (tmp_path / "fresh.db").exists()
    result = invoke("db", "check", "--db", url)
    assert result.exit_code == 1
    assert result.stderr == f"{url}: revision none (empty store), head is {head}: run `runner db upgrade`\n"
    result = invoke("db", "upgrade", "--db", url)
    assert result.exit_code == 0
    assert result.stdout == f"{url}: upgraded from empty to revision {head} (head)\n"
    assert invoke("db", "upgrade", "--db", url).stdout == f"{url}: already at revision {head} (head)\n"
    result = invoke("db", "check", "--db", url)
    assert (result.exit_code, result.stdout) == (0, f"{url}: revision {head} (head)\n")
    assert json.loads(invoke("db", "current", "--db", url, "--json").stdout) == {
        "db": url, "revision": head, "head": head, "at_head": True}


@pytest.mark.parametrize(("url", "message"), [
    ("nosuch://x/y", "Error: cannot open store nosuch://x/y: unsupported backend 'nosuch'"),
    ("sqlite:////no/such/dir/runs.db", "Error: cannot open store sqlite:////no/such/dir/runs.db: directory"),
])
def test_bad_database_urls_are_one_line(url: str, message: str) -> None:
    for args in (["db", "current"], ["demo"]):
        result = invoke(*args, "--db", url)
        assert result.exit_code == 3
        assert one_error_line(result).startswith(message)


@pytest.mark.parametrize("command", [["runs"], ["show", "abc"], ["stats"], ["export", "abc", "-o", "x.json"],
                                     ["spans", "abc"]])
def test_read_commands_refuse_a_missing_store_file_instead_of_creating_it(
        tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo.db"
    result = invoke(*command, "--db", f"sqlite:///{typo}")
    assert result.exit_code == 3
    assert one_error_line(result) == (
        f"Error: no store at {typo} (runner demo, runner run or runner db upgrade creates one)")
    assert not typo.exists()


def test_a_corrupt_database_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all" * 10)
    result = invoke("runs", "--db", f"sqlite:///{bad}")
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: cannot open store sqlite:///{bad}: {bad} is not a SQLite database"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    rec = Receiver()
    rec.thread.start()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    yield rec
    rec.server.shutdown()
    rec.server.server_close()


def test_spans_sends_rebuilt_runs_to_the_given_endpoint(db: str, receiver: Receiver) -> None:
    result = invoke("spans", "1111", R2, "--db", db, "--endpoint", f"{receiver.url}/v1/traces")
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        traces = {r: store.get_run(r).trace_id for r in (R1, R2)}
    assert result.stdout.splitlines() == [f"sent 6 spans of run {R1} (trace {traces[R1]})",
                                          f"sent 3 spans of run {R2} (trace {traces[R2]})"]
    spans = receiver.spans()
    assert receiver.paths == ["/v1/traces", "/v1/traces"]
    assert sorted(s["name"] for s in spans if s["trace_id"] == traces[R1]) == [
        "chat scripted", "chat scripted", "execute_tool get_weather", "invoke_agent", "step 1", "step 2"]
    assert {s["trace_id"] for s in spans} == set(traces.values())
    assert {s["service"] for s in spans} == {"runner"}
    assert {s["attrs"]["runner.run_id"] for s in spans} == {R1, R2}


def test_spans_honours_the_standard_environment(db: str, receiver: Receiver) -> None:
    result = invoke("spans", R3, "--db", db, "--json",
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "on-call"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["run_id"] == R3
    assert receiver.paths == ["/v1/traces"]
    assert {s["service"] for s in receiver.spans()} == {"on-call"}


def test_spans_to_an_unreachable_endpoint_fail_in_one_line(db: str, receiver: Receiver) -> None:
    url = f"{receiver.url}/v1/traces"
    receiver.server.shutdown()
    receiver.server.server_close()
    result = invoke("spans", R4, "--db", db, "--endpoint", url, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert result.exit_code == 3
    assert one_error_line(result).startswith(f"Error: exporting the spans of run {R4} to {url} failed")


@pytest.mark.parametrize("command", [["runs"], ["show", "abc"], ["stats"], ["export", "abc", "-o", "x.json"],
                                     ["spans", "abc"]])
def test_read_commands_leave_an_empty_file_empty(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "z.db"
    empty.touch()
    result = invoke(*command, "--db", f"sqlite:///{empty}")
    assert result.exit_code == 3
    assert one_error_line(result) == (
        f"Error: no store at {empty} (runner demo, runner run or runner db upgrade creates one)")
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["z.db"]


def test_read_commands_create_no_tables_in_an_empty_database(store_url: str) -> None:
    shown_url = shown(parse_url(store_url))
    where = parse_url(store_url).database if store_url.startswith("sqlite") else shown_url
    for args in (["runs"], ["stats"], ["show", "abc"]):
        result = invoke(*args, "--db", store_url)
        assert result.exit_code == 3
        assert one_error_line(result) == (
            f"Error: no store at {where} (runner demo, runner run or runner db upgrade creates one)")
    engine = create_engine(store_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_read_commands_do_not_migrate_an_older_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    fill(url)
    with open_store(url) as store, store.engine.begin() as conn:  # as if written before revision 0002
        command.downgrade(alembic_config(conn), "0001")
    result = invoke("runs", "--db", url, "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 5
    assert invoke("db", "current", "--db", url).stdout == f"{url}: revision 0001, head is {head_revision()}\n"
