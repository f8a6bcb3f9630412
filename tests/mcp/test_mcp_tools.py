"""``ToolRegistry.add_mcp`` and ``runner.mcp`` from Python: annotations, overrides, lifecycle, sync and async runs.

Each test starts the test server (``tests/mcp/server.py``) over stdio, and ends with every session closed,
checking that its processes exited and the private loop thread is gone.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner.mcp
from runner import ToolCall, ToolRegistry, arun_agent, open_store, run_agent
from runner._tools.registry import Observation, result_observation
from tests.mcp.helpers import LISTED, Scripted, mcp_threads, ran, server_argv, servers_alive, started


@pytest.fixture
def closing(tmp_path: Path) -> Iterator[None]:
    """Closes every MCP session after the test, and checks nothing of them is left."""
    yield
    runner.mcp.close()
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


def server(workdir: Path, *extra: str) -> runner.mcp.StdioServer:
    command, *args = server_argv(workdir, *extra)
    return runner.mcp.stdio(command, args)


def traits(registry: ToolRegistry) -> dict[str, tuple[bool, bool, bool]]:
    """Each tool's (side_effects, idempotent, needs_approval)."""
    return {name: (tool.side_effects, tool.idempotent, tool.needs_approval)
            for name in registry.names() if (tool := registry.get(name)) is not None}


@pytest.mark.process
def test_the_annotations_decide_side_effects_and_idempotence(tmp_path: Path, closing: None) -> None:
    registry = ToolRegistry()
    added = registry.add_mcp(server(tmp_path))
    assert [tool.name for tool in added] == LISTED
    assert traits(registry) == {"add": (False, False, False), "send": (True, False, False),
                                "upsert": (True, True, False), "fail": (False, False, False),
                                "picture": (False, False, False), "crash": (False, False, False)}
    assert {tool.timeout_s for tool in added} == {60.0}
    assert repr(added[0].fn) == f"<MCP tool 'add' of MCP server `{server(tmp_path).command_line}`>"


@pytest.mark.process
def test_add_mcps_arguments_pick_name_and_override_the_annotations(tmp_path: Path, closing: None) -> None:
    registry = ToolRegistry()
    registry.add_mcp(server(tmp_path), prefix="a_", include={"add", "send", "upsert"}, side_effects={"add"},
                     needs_approval={"send"}, timeout_s=5)
    registry.add_mcp(server(tmp_path), prefix="b_", exclude={"crash", "fail", "picture"}, side_effects=True)
    registry.add_mcp(server(tmp_path), prefix="c_", include=["send", "upsert"], side_effects=False,
                     needs_approval=True)
    assert traits(registry) == {
        # a set adds side effects to the tools it names; the others keep their annotations' (send is destructive)
        "a_add": (True, False, False), "a_send": (True, False, True), "a_upsert": (True, True, False),
        "b_add": (True, False, False), "b_send": (True, False, False), "b_upsert": (True, True, False),
        "c_send": (False, False, True), "c_upsert": (False, False, True)}
    assert registry.get("a_add").timeout_s == 5  # type: ignore[union-attr]
    assert registry.execute("b_add", {"a": 1, "b": 2}) == '{"result": 3}'
    assert ran(tmp_path) == ["add 1 2"]


@pytest.mark.process
def test_add_mcp_marks_tools_exclusive_for_all_or_by_name(tmp_path: Path, closing: None) -> None:
    registry = ToolRegistry()
    registry.add_mcp(server(tmp_path), prefix="a_", include={"add", "send"}, exclusive={"send"})
    registry.add_mcp(server(tmp_path), prefix="b_", include={"add", "send"}, exclusive=True)
    registry.add_mcp(server(tmp_path), prefix="c_", include={"add"})
    assert {name: tool.exclusive for name in registry.names() if (tool := registry.get(name)) is not None} == {
        "a_add": False, "a_send": True, "b_add": True, "b_send": True, "c_add": False}
    assert registry.get("a_send").traits()["exclusive"] is True  # type: ignore[union-attr]  # logged in tool_traits
    with pytest.raises(ValueError, match=r"^exclusive names 'snd', which .* does not list"):
        registry.add_mcp(server(tmp_path), prefix="d_", exclusive={"snd"})
    with pytest.raises(ValueError, match=r"^exclusive must be a collection of tool names, not the string 'send'$"):
        registry.add_mcp(server(tmp_path), prefix="d_", exclusive="send")
    assert not any(name.startswith("d_") for name in registry.names())


@pytest.mark.process
def test_a_mistake_in_add_mcps_arguments_is_one_line_and_registers_nothing(tmp_path: Path, closing: None) -> None:
    registry, described = ToolRegistry(), server(tmp_path).describe()
    unknown = (f"include names 'ad', which {described} does not list (it lists 'add', 'send', 'upsert', 'fail', "
               "'picture', 'crash')")
    with pytest.raises(ValueError, match=f"^{re.escape(unknown)}$"):
        registry.add_mcp(server(tmp_path), include={"ad"})
    with pytest.raises(ValueError, match=r"^side_effects must be a collection of tool names, not the string 'add'$"):
        registry.add_mcp(server(tmp_path), side_effects="add")
    with pytest.raises(ValueError, match=r"^timeout_s must be a positive number of seconds, got 0$"):
        registry.add_mcp(server(tmp_path), timeout_s=0)
    registry.add_mcp(server(tmp_path), include={"add"})
    twice = f"tool 'add' of {described} is already registered (prefix= tells them apart)"
    with pytest.raises(ValueError, match=f"^{re.escape(twice)}$"):
        registry.add_mcp(server(tmp_path))
    odd = server(tmp_path, "--odd")
    refused = ("tool 'o_odd': parameters.host: unsupported format 'hostname' (checked: date, date-time, email, ipv4, "
               f"ipv6, regex, time, uuid) ({odd.describe()}; exclude={{'odd'}} leaves it out)")
    with pytest.raises(ValueError, match=f"^{re.escape(refused)}$"):
        registry.add_mcp(odd, prefix="o_")
    assert registry.names() == ["add"]  # all or nothing
    registry.add_mcp(odd, prefix="o_", exclude={"odd"})
    assert "o_send" in registry


@pytest.mark.process
def test_a_sync_run_and_an_async_run_share_one_session_per_server(tmp_path: Path, closing: None) -> None:
    registry = ToolRegistry()
    registry.add_mcp(server(tmp_path))
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        sync = run_agent("Add", Scripted(ToolCall("c1", "add", {"a": 1, "b": 2})), registry, store=store)
        done = asyncio.run(arun_agent("Add", Scripted(ToolCall("c1", "add", {"a": 3, "b": 4}),
                                                      ToolCall("c2", "picture", {})), registry, store=store))
    assert (sync.status, sync.answer) == ("done", '{"result": 3}')
    assert (done.status, done.answer) == ("done", '{"result": 7}\n[image: image/png]')
    assert sorted(ran(tmp_path)) == sorted(["add 1 2", "add 3 4", "picture"])
    assert len(servers_alive(tmp_path)) == 1  # one process served the listing and every call
    assert mcp_threads() == ["runner-mcp"]


@pytest.mark.process
def test_a_call_past_its_timeout_is_an_error_and_close_stops_the_server_still_working(tmp_path: Path,
                                                                                       closing: None) -> None:
    registry = ToolRegistry()
    registry.add_mcp(server(tmp_path, "--hold-once", str(tmp_path / "held"), "--hold", "send"), timeout_s=0.5)
    result = run_agent("Send", Scripted(ToolCall("c1", "send", {"to": "ann", "text": "hi"}),
                                        ToolCall("c2", "add", {"a": 1, "b": 1})), registry)
    assert (result.status, result.answer) == ("done", 'ERROR: send timed out after 0.5 s\n{"result": 2}')
    assert sorted(ran(tmp_path)) == sorted(["send ann hi", "add 1 1"])
    runner.mcp.close()
    assert servers_alive(tmp_path) == []  # stopped although its call never returned


@pytest.mark.process
def test_close_ends_every_session_and_a_later_call_opens_one_again(tmp_path: Path, closing: None) -> None:
    registry = ToolRegistry()
    registry.add_mcp(server(tmp_path))
    (first,) = servers_alive(tmp_path)
    runner.mcp.close()
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []
    assert registry.execute("add", {"a": 2, "b": 2}) == '{"result": 4}'
    (second,) = servers_alive(tmp_path)
    assert second != first


def test_describing_a_server_checks_it_and_keeps_secrets_out_of_its_repr_and_the_log() -> None:
    secret = runner.mcp.stdio("npx", ["server"], env={"TOKEN": "s3cret"}, cwd="/tmp")
    assert "s3cret" not in repr(secret)
    assert secret.ref == {"transport": "stdio", "target": "npx server"}
    remote = runner.mcp.http("https://mcp.example.org/mcp", headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(remote)
    assert remote.ref == {"transport": "http", "target": "https://mcp.example.org/mcp"}
    assert runner.mcp.from_command_line("python 'my server.py' --port 1") == runner.mcp.stdio(
        "python", ["my server.py", "--port", "1"])
    with pytest.raises(ValueError, match=r"^an MCP server's command must be a non-empty string$"):
        runner.mcp.stdio(" ")
    with pytest.raises(ValueError, match=r"^an MCP server's args must be a sequence of strings, got 'a b'$"):
        runner.mcp.stdio("python", "a b")
    with pytest.raises(ValueError, match=r"^an MCP server's URL must start with http:// or https://"):
        runner.mcp.http("localhost:8000")
    with pytest.raises(ValueError, match=r"^add_mcp takes runner.mcp.stdio\(...\) or runner.mcp.http\(...\), "
                                         r"got str$"):
        ToolRegistry().add_mcp("python server.py")  # type: ignore[arg-type]


def test_an_observation_is_its_own_text_where_other_results_are_json() -> None:
    assert result_observation("t", Observation("2 + 2 = 4")) == "2 + 2 = 4"
    assert result_observation("t", "2 + 2 = 4") == '"2 + 2 = 4"'


@pytest.mark.process
def test_importing_runner_mcp_or_the_registry_does_not_load_the_sdk() -> None:
    code = ("import sys, runner, runner.mcp; runner.mcp.stdio('x'); runner.ToolRegistry(); "
            "print('mcp' in sys.modules, 'anyio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.process
def test_a_python_process_that_never_closes_its_sessions_stops_its_servers_at_exit(tmp_path: Path) -> None:
    command, *args = server_argv(tmp_path)
    code = ("import sys, runner.mcp; from runner import ToolRegistry; registry = ToolRegistry(); "
            f"registry.add_mcp(runner.mcp.stdio({command!r}, {args!r})); "
            "print(registry.execute('add', {'a': 1, 'b': 2}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out == '{"result": 3}\n'
    assert ran(tmp_path) == ["add 1 2"]
    assert started(tmp_path) == []  # its pid file is gone: it exited on its own, once its stdin closed


def test_a_draft_07_input_schema_registers_as_the_same_schema_in_2020_12() -> None:
    from runner._tools.mcp_tools import as_2020_12

    draft_07 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}
    with pytest.raises(ValueError, match="only JSON Schema 2020-12"):
        ToolRegistry().register("read", "Read a file.", draft_07, lambda path: path)
    registry = ToolRegistry()
    registry.register("read", "Read a file.", as_2020_12(draft_07), lambda path: path)
    assert registry.check("read", {"path": "a"}) is None
    assert registry.check("read", {"path": 1}) is not None
    other = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}
    assert as_2020_12(other) is other
