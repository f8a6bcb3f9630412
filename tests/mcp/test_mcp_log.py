"""What the log keeps of a run's MCP servers, and the commands read back from it (no server is started here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from runner import ScriptedModel, ToolRegistry, open_store, run_agent
from runner._view.continuation import recorded_mcp, recorded_tools, resume_command
from runner.events import EventDecodeError, RunStarted, decode, encode
from runner.messages import McpRef
from runner.store import RunStore
from runner.ui.actions import Actions
from tests.loop.helpers import call, reply
from tests.mcp.helpers import server_line, servers_alive
from tests.ui.helpers import start_console

SERVERS: list[McpRef] = [{"transport": "stdio", "target": "python 'my server.py' --port 1"},
                         {"transport": "http", "target": "https://mcp.example.org/mcp?x=1&y=2"}]
SHELL_ARGS = " --mcp 'python '\"'\"'my server.py'\"'\"' --port 1' --mcp-url 'https://mcp.example.org/mcp?x=1&y=2'"


def stopped(store: RunStore, **options: Any) -> str:
    """A run that stopped on its step limit, asking for a call: something to resume."""
    result = run_agent("Go", ScriptedModel([reply("", call("c1", "nothing"))]), ToolRegistry(), store=store,
                       max_steps=1, **options)
    assert result.status == "step_limit"
    return result.run_id


def test_a_runs_mcp_servers_are_logged_and_name_the_resume_command(store: RunStore) -> None:
    run = store.get_run(stopped(store, mcp_servers=SERVERS))
    started = run.facts[0]
    assert isinstance(started, RunStarted)
    assert started.mcp_servers == SERVERS
    assert (recorded_tools(run), recorded_mcp(run)) == (None, SERVERS)
    assert resume_command("1f2e3d4c", recorded_tools(run), ("c1",), " --db x", recorded_mcp(run)) == (
        f"runner resume 1f2e3d4c{SHELL_ARGS} --approve c1 --db x")
    outcome = Actions(store).go_on(run)  # a console without tools: it says what to run, with a limit that goes on
    assert outcome.command == f"runner resume {store.short_ids([run.run_id])[run.run_id]}{SHELL_ARGS} --max-steps 2"
    given = Actions(store).resume(run.run_id, 5)  # the Resume form's max steps: in the command once, in its place
    assert given.command == f"runner resume {store.short_ids([run.run_id])[run.run_id]}{SHELL_ARGS} --max-steps 5"
    both = store.get_run(stopped(store, mcp_servers=SERVERS[:1], tools_ref="myapp.tools:registry"))
    assert resume_command("x", recorded_tools(both), (), "", recorded_mcp(both)) == (
        "runner resume x --tools myapp.tools:registry --mcp 'python '\"'\"'my server.py'\"'\"' --port 1'")
    plain = store.get_run(stopped(store))
    assert (recorded_tools(plain), recorded_mcp(plain)) == ("MODULE:ATTR", [])
    assert "mcp_servers" not in encode(plain.facts[0])[1]  # written only when set: older readers see nothing new


@pytest.mark.parametrize("forged", [{"transport": "stdio"}, [{"transport": "ssh", "target": "x"}],
                                    [{"transport": "stdio", "target": ""}], ["python s.py"],
                                    [{"transport": "http", "target": "u", "headers": {"a": "b"}}]])
def test_a_forged_record_of_mcp_servers_is_one_store_error_line(forged: object) -> None:
    data = {"task": "t", "system": "s", "limits": {}, "tool_specs": [], "model": "m", "mcp_servers": forged}
    with pytest.raises(EventDecodeError, match=r"^run_started event is malformed: mcp_servers must be a list of "
                                               r"\{transport: stdio\|http, target: text\}$"):
        decode("run_started", data)


def test_a_run_option_naming_servers_wrongly_is_refused_before_anything_is_recorded(store: RunStore) -> None:
    with pytest.raises(TypeError, match=r"^mcp_servers must be a list of"):
        run_agent("Go", ScriptedModel(["done"]), ToolRegistry(), store=store,
                  mcp_servers=["python server.py"])  # type: ignore[list-item]
    assert store.list_runs() == []


@pytest.mark.process
def test_the_console_serves_with_an_mcp_servers_tools_and_stops_the_server_when_it_stops(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(db).close()
    console = start_console(db, "--mcp", server_line(tmp_path), ran=tmp_path / "console.log", logs=tmp_path)
    try:
        assert len(servers_alive(tmp_path)) == 1  # its tools were listed before it served
        with urlopen(console.at("/")) as page:
            assert page.status == 200
    finally:
        console.stop()
    assert servers_alive(tmp_path) == []
