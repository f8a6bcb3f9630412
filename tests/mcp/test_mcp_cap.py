"""An MCP result's default cap: the model reads a marked truncation; ``max_result_chars`` still wins."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner.mcp
from runner import ScriptedModel, ToolRegistry, run_agent
from tests.loop.helpers import call, reply
from tests.mcp.helpers import mcp_threads, server_argv, servers_alive


def whole(chars: int) -> str:
    """What the model reads of the ``big`` tool's whole result (the SDK sends a str result as structured content)."""
    return '{"result": "' + "".join(str(i % 10) for i in range(chars)) + '"}'


@pytest.fixture
def closing(tmp_path: Path) -> Iterator[None]:
    yield
    runner.mcp.close()
    assert servers_alive(tmp_path) == []
    assert mcp_threads() == []


def big_tool(workdir: Path, **options: object) -> ToolRegistry:
    command, *args = server_argv(workdir, "--big")
    registry = ToolRegistry()
    registry.add_mcp(runner.mcp.stdio(command, args), include={"big"}, **options)  # type: ignore[arg-type]
    return registry


def observed(registry: ToolRegistry, chars: int, **limits: object) -> str:
    model = ScriptedModel([reply("", call("c1", "big", chars=chars)), "done"])
    result = run_agent("Read it.", model, registry, token_budget=10_000_000, **limits)  # type: ignore[arg-type]
    assert result.status == "done"
    return result.messages[3]["content"]


@pytest.mark.process
def test_a_result_past_the_default_cap_is_cut_with_a_marker(tmp_path: Path, closing: None) -> None:
    cap = runner.mcp.DEFAULT_RESULT_CHARS
    assert cap == 100_000 == inspect.signature(ToolRegistry.add_mcp).parameters["max_result_chars"].default
    text = observed(big_tool(tmp_path), 250_000)
    assert text == whole(250_000)[:cap] + f"... [cut: {len(whole(250_000)) - cap} more characters of the MCP result]"
    assert observed(big_tool(tmp_path), cap - len(whole(0))) == whole(cap - len(whole(0)))  # at the cap: whole


@pytest.mark.process
def test_add_mcps_cap_and_the_runs_max_result_chars_win(tmp_path: Path, closing: None) -> None:
    assert observed(big_tool(tmp_path, max_result_chars=None), 250_000) == whole(250_000)
    assert observed(big_tool(tmp_path, max_result_chars=20), 30) == (
        '{"result": "01234567... [cut: 24 more characters of the MCP result]')
    assert observed(big_tool(tmp_path), 50, max_result_chars=15) == '{"result": "012... [cut: 49 more characters]'


def test_a_bad_cap_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="max_result_chars must be a positive whole number of characters"):
            ToolRegistry().add_mcp(runner.mcp.stdio("no-such-command-anywhere"), max_result_chars=bad)  # type: ignore[arg-type]
