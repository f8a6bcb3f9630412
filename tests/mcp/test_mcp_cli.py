"""The issue's acceptance, through the real CLI: ``runner run ... --mcp "python tests/mcp/server.py"``.

The model is the real OpenAI adapter against a local fake OpenAI-compatible server; the tools are the
test server's (a real ``mcp`` SDK server over stdio, or streamable HTTP). Every test checks that no
server process and no MCP thread outlives the command that started it.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from runner import open_store
from runner.events import RunStarted
from tests.cli.helpers import at, invoke, one_error_line, run_id_in
from tests.mcp.helpers import (
    LISTED,
    ReadingOpenAI,
    add_then_send,
    calls_then_answers,
    http_server,
    mcp_threads,
    ran,
    server_line,
    servers_alive,
    started,
)


def started_fact(url: str, run_id: str) -> RunStarted:
    with open_store(url) as store:
        fact = store.get_run(run_id).facts[0]
    assert isinstance(fact, RunStarted)
    return fact


@pytest.mark.process
def test_a_run_with_an_mcp_servers_tools_ends_done_using_adds_result_and_sends_once(tmp_path: Path) -> None:
    url, line = f"sqlite:///{tmp_path / 'runs.db'}", server_line(tmp_path)
    with ReadingOpenAI(add_then_send) as model:
        result = invoke("run", "Add 2 and 3, then tell ann", "--mcp", line, "--model", "openai:fake", *at(model),
                        "--db", url, "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "2 + 3 = 5"
    assert sorted(ran(tmp_path)) == sorted(["add 2 3", "send ann hi"])
    assert [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"] == [
        '{"result": 5}', '{"result": "sent to ann"}']
    fact = started_fact(url, run_id_in(result))
    assert [spec["name"] for spec in fact.tool_specs] == LISTED
    add = next(spec for spec in fact.tool_specs if spec["name"] == "add")
    assert add == {"name": "add", "description": "Add two integers.", "parameters": {
        "type": "object", "title": "addArguments", "required": ["a", "b"],
        "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}}}}
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == [s["name"] for s in fact.tool_specs]
    assert fact.mcp_servers == [{"transport": "stdio", "target": line}]
    assert fact.tools_ref is None
    assert fact.tool_traits == {
        "send": {"side_effects": True, "needs_approval": False, "idempotency_key": None},
        "upsert": {"side_effects": True, "needs_approval": False, "idempotency_key": None, "idempotent": True}}
    assert servers_alive(tmp_path) == []
    assert started(tmp_path) == []  # it exited, and cleanly
    assert mcp_threads() == []

    fixture = tmp_path / "run.json"
    assert invoke("export", run_id_in(result), "-o", str(fixture), "--db", url).exit_code == 0
    replayed = invoke("replay", str(fixture), "--mcp", line)
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout.startswith("ok  ")
    # add ran again; send's result was served (the calls of one reply run together: in any order)
    assert sorted(ran(tmp_path)) == sorted(["add 2 3", "send ann hi", "add 2 3"])
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


@pytest.mark.process
def test_mcp_tools_join_the_tools_of_tools_and_the_next_commands_name_both(tmp_path: Path) -> None:
    url, line = f"sqlite:///{tmp_path / 'runs.db'}", server_line(tmp_path)
    reply = calls_then_answers(("c1", "get_weather", {"city": "Oslo"}), ("c2", "add", {"a": 1, "b": 2}))
    with ReadingOpenAI(reply) as model:
        result = invoke("run", "Weather and a sum", "--tools", "tests.loop.helpers:weather_registry", "--mcp", line,
                        "--model", "openai:fake", *at(model), "--db", url, "-q", "--max-steps", "2")
    assert result.exit_code == 1, result.output  # stopped on its step limit, so it says how to go on
    run_id = run_id_in(result)
    fact = started_fact(url, run_id)
    assert fact.tools_ref == "tests.loop.helpers:weather_registry"
    assert [spec["name"] for spec in fact.tool_specs] == ["get_weather", "c_to_f", *LISTED]
    quoted = "'" + line + "'"
    assert f"  runner resume {run_id[:8]} --tools tests.loop.helpers:weather_registry --mcp {quoted} --max-steps 4 " \
        f"--db {url}" in result.stdout.splitlines()  # stopped step_limit: a resume goes on with a larger limit
    assert f"  runner replay tests/fixtures/run.json --tools tests.loop.helpers:weather_registry --mcp {quoted}" \
        in result.stdout.splitlines()
    assert ran(tmp_path) == ["add 1 2"]

    with ReadingOpenAI(reply) as model:
        resumed = invoke("resume", run_id[:8], "--tools", "tests.loop.helpers:weather_registry", "--mcp", line,
                         "--max-steps", "3", *at(model), "--db", url, "-q")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.splitlines()[:2] == ['{"celsius": -3}', '{"result": 3}']
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


@pytest.mark.process
def test_a_server_that_crashes_mid_run_is_an_error_observation_and_the_next_call_starts_it_again(
        tmp_path: Path) -> None:
    url, line = f"sqlite:///{tmp_path / 'runs.db'}", server_line(tmp_path)
    with ReadingOpenAI(calls_then_answers(("c1", "crash", {}), ("c2", "add", {"a": 1, "b": 1}))) as model:
        result = invoke("run", "Crash, then add", "--mcp", line, "--model", "openai:fake", *at(model), "--db", url,
                        "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        f"ERROR: crash failed: MCP server `{line}` closed the connection before answering; the next call opens a "
        "new one", '{"result": 2}']
    assert sorted(ran(tmp_path)) == sorted(["crash", "add 1 1"])
    assert len(started(tmp_path)) == 1  # the crashed server never removed its pid file; the second one did
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


@pytest.mark.process
def test_a_tools_error_and_an_image_are_observations(tmp_path: Path) -> None:
    url, line = f"sqlite:///{tmp_path / 'runs.db'}", server_line(tmp_path)
    with ReadingOpenAI(calls_then_answers(("c1", "fail", {"reason": "no stamp"}), ("c2", "picture", {}))) as model:
        result = invoke("run", "Fail, then a picture", "--mcp", line, "--model", "openai:fake", *at(model),
                        "--db", url, "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == ["ERROR: fail failed: Error executing tool fail: no stamp",
                                              "[image: image/png]"]
    with open_store(url) as store:
        finished = [e.data for e in store.get_run(run_id_in(result)).events if e.kind == "tool_finished"]
    assert [(d["name"], d["ok"]) for d in finished] == [("fail", False), ("picture", True)]


@pytest.mark.process
def test_a_server_that_never_answers_initialize_fails_in_one_line_and_nothing_is_recorded(tmp_path: Path) -> None:
    url, line = f"sqlite:///{tmp_path / 'runs.db'}", server_line(tmp_path, "--silent")
    with ReadingOpenAI(add_then_send) as model:
        result = invoke("run", "Add", "--mcp", line, "--model", "openai:fake", *at(model), "--db", url)
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: MCP server `{line}` did not answer initialize within 10 s"
    assert model.requests == []
    assert not (tmp_path / "runs.db").exists()
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


@pytest.mark.process
def test_a_server_that_cannot_start_and_a_malformed_mcp_option_are_one_line_each(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    missing = invoke("run", "Add", "--mcp", str(tmp_path / "no-such-server"), "--model", "openai:fake", "--api-key",
                     "k", "--db", url)
    assert missing.exit_code == 3
    assert one_error_line(missing) == (f"Error: MCP server `{tmp_path / 'no-such-server'}` could not be started: "
                                       f"FileNotFoundError: [Errno 2] No such file or directory: "
                                       f"'{tmp_path / 'no-such-server'}'")
    unclosed = invoke("run", "Add", "--mcp", "python 'server.py", "--model", "openai:fake", "--db", url)
    assert unclosed.exit_code == 2
    assert one_error_line(unclosed) == ("Error: --mcp \"python 'server.py\": cannot split \"python 'server.py\" into "
                                        "a command and its arguments: No closing quotation")
    no_url = invoke("replay", "x.json", "--mcp-url", "ftp://example.org/mcp")
    assert no_url.exit_code == 2
    assert one_error_line(no_url) == ("Error: --mcp-url 'ftp://example.org/mcp': an MCP server's URL must start "
                                      "with http:// or https://, got 'ftp://example.org/mcp'")
    no_tools = invoke("run", "Add", "--model", "openai:fake", "--db", url)
    assert no_tools.exit_code == 2
    assert one_error_line(no_tools) == ('Error: a run needs its tools: --tools MODULE:ATTR, --mcp "COMMAND ARGS..." '
                                        "or --mcp-url URL")


@pytest.mark.process
def test_a_server_over_streamable_http_gives_its_tools_to_a_run_and_a_fork(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    process, address = http_server(tmp_path)
    try:
        with ReadingOpenAI(add_then_send) as model:
            result = invoke("run", "Add 2 and 3, then tell ann", "--mcp-url", address, "--model", "openai:fake",
                            *at(model), "--db", url, "-q")
            assert result.exit_code == 0, result.output
            forked = invoke("fork", run_id_in(result)[:8], "--at", "2", "--mcp-url", address, *at(model),
                            "--db", url, "-q")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert result.stdout.splitlines()[0] == "2 + 3 = 5"
    assert forked.exit_code == 0, forked.output
    assert sorted(ran(tmp_path)) == sorted(["add 2 3", "send ann hi"])  # the fork started after both calls
    assert started_fact(url, run_id_in(result)).mcp_servers == [{"transport": "http", "target": address}]
    with open_store(url) as store:
        (child,) = store.children(run_id_in(result))
    assert started_fact(url, child.run_id).mcp_servers == [{"transport": "http", "target": address}]
    assert json.loads(model.requests[-1]["messages"][-1]["content"]) == {"result": "sent to ann"}
    assert mcp_threads() == []
