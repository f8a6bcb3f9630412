"""Hostile command lines: huge and negative numbers, surrogates, NUL, non-UTF-8 bytes, dates at the edges.

Each one is a usage error (exit 2, one line) or a clean "no such run" (exit 3), never an
"unexpected ..." line or a traceback; and the exit statuses tell a "no" from an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.errors import StoreError
from runner.store import RunStore, open_store
from tests.cli.helpers import R1, R4, FakeOpenAI, completion, fill, invoke, one_error_line

SURROGATE = b"ab\xff".decode("utf-8", "surrogateescape")  # how Python decodes a non-UTF-8 argv byte


@pytest.fixture
def db(store_url: str) -> str:
    fill(store_url)
    return store_url


def usage_error(result_args: list[str], db: str) -> str:
    result = invoke(*result_args, "--db", db)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    return one_error_line(result)


@pytest.mark.parametrize("ref", ["\U0010ffff", "1111aaaa\U0010ffff", "\udcff", "a\x00b"])
def test_a_run_ref_no_run_can_have_is_no_such_run_in_the_store(store: RunStore, ref: str) -> None:
    with pytest.raises(StoreError, match=r"^no run "):
        store.find_run(ref)


def test_show_of_the_last_code_point_is_no_such_run(db: str) -> None:
    result = invoke("show", "\U0010ffff", "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith("Error: no run '\\U0010ffff' in ")


@pytest.mark.parametrize("limit", ["99999999999999999999", "1000000001", "0", "-1"])
def test_runs_limit_out_of_range_is_a_usage_error(db: str, limit: str) -> None:
    line = usage_error(["runs", "--limit", limit], db)
    assert line == (f"Error: Invalid value for '--limit': {limit} is not in the range 1<=x<=1000000000. "
                    "(see 'runner runs --help')")


@pytest.mark.parametrize("command", ["runs", "stats"])
@pytest.mark.parametrize(("option", "value"), [
    ("--since", "9999-12-31T23:59:59-23:00"), ("--until", "0001-01-01T00:00:00+23:00")])
def test_a_datetime_that_leaves_the_calendar_in_utc_is_a_usage_error(db: str, command: str, option: str,
                                                                      value: str) -> None:
    line = usage_error([command, option, value], db)
    assert line == (f"Error: Invalid value for '{option}': {value!r} is outside the years 1 to 9999 in UTC "
                    f"(see 'runner {command} --help')")


@pytest.mark.parametrize(("args", "shown"), [
    (["show", SURROGATE], "'ab\\xff'"),
    (["runs", "--tool", "\ud800"], "'\\ud800'"),
    (["runs", "--search", "a\x00b"], "'a\\x00b'"),
    (["runs", "--label", "k=\x00"], "'k=\\x00'"),
    (["export", "a\x00", "-o", "-"], "'a\\x00'"),
    (["spans", R1[:8], "\udc80"], "'\\x80'"),
])
def test_arguments_that_are_not_text_are_usage_errors(db: str, args: list[str], shown: str) -> None:
    line = usage_error(args, db)
    assert line == f"Error: argument {shown} is not valid UTF-8 text without NUL characters"


@pytest.mark.process
def test_non_utf8_bytes_in_a_real_argv_are_a_usage_error_and_record_nothing(tmp_path: Path) -> None:
    runner = str(Path(sys.executable).parent / "runner")
    db = tmp_path / "runs.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    cases = [([b"show", b"\xff\xfe"], "'\\xff\\xfe'"),
             ([b"run", b"task \xff", b"--tools", b"tests.loop.helpers:weather_registry", b"--model", b"openai:x",
               b"--base-url", b"http://127.0.0.1:9/v1"], "'task \\xff'")]
    for args, shown in cases:
        found = subprocess.run([runner.encode(), *args, b"--db", f"sqlite:///{db}".encode()], capture_output=True,
                               env=env, timeout=60, cwd=Path(__file__).resolve().parents[2], check=False)
        assert found.returncode == 2, found.stderr
        assert found.stderr.decode().splitlines() == [
            f"Error: argument {shown} is not valid UTF-8 text without NUL characters"]
        assert found.stdout == b""
    assert not db.exists()


@pytest.mark.process
def test_a_reader_that_stops_early_is_no_failure(tmp_path: Path) -> None:
    runner = str(Path(sys.executable).parent / "runner")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:  # more output than a pipe holds, so the writer meets the closed end
        for i in range(1200):
            run_agent(f"task {i} " + "x" * 60, ScriptedModel(["done " + "y" * 60]), ToolRegistry(), store=store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    for args in (["runs", "--limit", "1200"], ["runs", "--limit", "1200", "--json"],
                 ["prune", "--before", "0s", "--dry-run"]):
        shell = f"set -o pipefail; {runner} {' '.join(args)} --db {db} | head -1 >/dev/null"
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, timeout=60, check=False)
        assert (done.returncode, done.stderr) == (0, ""), args  # a table's broken pipe exited 1 (a "no")


@pytest.mark.process
def test_a_reader_that_is_gone_before_the_first_byte_is_no_failure(tmp_path: Path) -> None:
    runner = str(Path(sys.executable).parent / "runner")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        run_id = run_agent("task", ScriptedModel(["done"]), ToolRegistry(), store=store).run_id
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    for args in (["show", run_id, "--json"], ["show", run_id], ["runs", "--json"], ["show", run_id, "--full"],
                 ["export", run_id, "-o", "-"]):
        # `true` exits without reading, so the very first write meets a closed pipe (it said "unexpected
        # BrokenPipeError" and exited 3)
        shell = f"set -o pipefail; {runner} {' '.join(args)} --db {db} | true"
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, timeout=60, check=False)
        assert (done.returncode, done.stderr) == (0, ""), args


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fixture_that_is_a_fifo_is_one_error_line(tmp_path: Path) -> None:
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    result = invoke("replay", str(fifo), "--tools", "tests.loop.helpers:weather_registry")
    assert (result.exit_code, one_error_line(result)) == (3, f"Error: fixture '{fifo}' is not a regular file")


def test_exit_statuses_tell_a_no_from_an_error(db: str, tmp_path: Path) -> None:
    fixture = tmp_path / "run.json"
    assert invoke("export", R4[:9], "-o", str(fixture), "--db", db).exit_code == 0
    differs = invoke("replay", str(fixture), "--tools", "runner.demo:demo_registry")
    assert differs.exit_code == 1  # a "no": the replay diverged
    assert invoke("show", "nope", "--db", db).exit_code == 3  # an error: no such run
    assert invoke("export", "nope", "-o", "-", "--db", db).exit_code == 3
    assert invoke("replay", str(tmp_path / "missing.json"), "--tools", "runner.demo:demo_registry").exit_code == 3
    assert invoke("runs", "--bogus").exit_code == 2  # a usage mistake


# Every command and option, given the values a hostile caller tries first.
HOSTILE = ["99999999999999999999", "-99999999999999999999", "-1", "0", "1e400", "inf", "nan", "\U0010ffff",
           "\ud800", "a\x00b", "", "%", "_"]
RUN = ["run", "task", "--tools", "tests.loop.helpers:weather_registry", "--model", "openai:fake", "--api-key", "k"]
COMMANDS = [
    ["show", "{}"], ["show", "{}", "--full", "--json"], ["export", "{}", "-o", "-"], ["spans", "{}"],
    ["replay", "{}", "--tools", "runner.demo:demo_registry"], ["replay", "x.json", "--tools", "{}"],
    ["runs", "--limit", "{}"], ["runs", "--since", "{}"], ["runs", "--until", "{}"], ["runs", "--tool", "{}"],
    ["runs", "--search", "{}"], ["runs", "--label", "{}=v"], ["runs", "--label", "k={}"], ["runs", "--status", "{}"],
    ["stats", "--since", "{}"], ["stats", "--until", "{}"],
    ["demo", "--model", "{}"], ["db", "current", "--json", "--db", "sqlite:///TMP/{}.db"],
    [*RUN, "--max-steps", "{}"], [*RUN, "--token-budget", "{}"], [*RUN, "--max-tool-calls", "{}"],
    [*RUN, "--timeout", "{}"], [*RUN, "--label", "k={}"], [*RUN, "--system", "{}"], ["run", "{}", *RUN[2:]],
    ["run", "t", "--tools", "{}", "--model", "openai:x"], ["run", "t", "--tools", RUN[3], "--model", "openai:{}"],
]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_hostile_values_never_give_an_unexpected_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       command: list[str], value: str) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(db).close()
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    with FakeOpenAI(*[completion("done")] * 3) as server:
        args = [arg.replace("{}", value).replace("TMP", str(tmp_path)) for arg in command]
        extra = ["--base-url", server.url] if "--api-key" in args else []
        result = invoke(*args, *extra, *([] if "--db" in args else ["--db", db]))
    assert result.exit_code in (0, 1, 2, 3), result.output
    if result.exit_code:
        line = one_error_line(result) if result.stderr else ""
        assert "unexpected" not in line


@pytest.mark.parametrize("command", [["runs"], ["show", "x"], ["db", "current"], ["stats"]])
def test_a_runner_db_that_is_not_text_is_a_usage_error(command: list[str]) -> None:
    result = invoke(*command, env={"RUNNER_DB": "sqlite:///" + SURROGATE})
    assert result.exit_code == 2
    assert one_error_line(result) == (
        "Error: --db (or RUNNER_DB) 'sqlite:///ab\\xff' is not valid UTF-8 text without NUL characters")
