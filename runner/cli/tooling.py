"""The tools a command runs with: ``--tools MODULE:ATTR``, MCP servers (``--mcp``, ``--mcp-url``), or both.

The MCP servers' tools join the ``--tools`` registry (or an empty one). Their sessions open when their
tools are listed, at the start of the command, and close when it ends, so no server outlives it.
A run logs the servers as it logs ``--tools`` (``run_started.mcp_servers``), for the commands ``show`` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple, TypeVar

import click

from .._tools.registry import ToolRegistry
from .._view.continuation import tools_args
from ..errors import RunnerError
from ..mcp.servers import McpServer, from_command_line, http
from ..messages import McpRef
from .options import CliError, CliUsageError
from .specs import load_tools

R = TypeVar("R")


class ToolsGiven(NamedTuple):
    """The tools named on the command line: ``--tools`` (or None), each ``--mcp`` and each ``--mcp-url``."""

    spec: str | None = None
    commands: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        return self.spec is not None or bool(self.commands) or bool(self.urls)

    def refs(self) -> list[McpRef]:
        """The MCP servers as the log records them, ``--mcp`` ones first (the order their tools are added in)."""
        return [server.ref for server in self.servers()]

    def servers(self) -> list[McpServer]:
        """The MCP servers given; a malformed one is a usage error (exit 2)."""
        found: list[McpServer] = []
        for option, values, parse in (("--mcp", self.commands, from_command_line), ("--mcp-url", self.urls, http)):
            for value in values:
                try:
                    found.append(parse(value))
                except ValueError as exc:
                    raise CliUsageError(f"{option} {value!r}: {exc}") from None
        return found

    def args(self) -> str:
        """These tools as options to paste into another command (a leading space; '' for none)."""
        return tools_args(self.spec, self.refs())


def mcp_options(fn: Callable[..., R]) -> Callable[..., R]:
    """``--mcp "COMMAND ARGS..."`` and ``--mcp-url URL``, each repeatable: MCP servers whose tools the run uses."""
    fn = click.option("--mcp-url", "mcp_urls", multiple=True, metavar="URL",
                      help="An MCP server over streamable HTTP whose tools the run uses (repeatable).")(fn)
    fn = click.option("--mcp", "mcp_commands", multiple=True, metavar='"COMMAND ARGS..."',
                      help="An MCP server to start over stdio, whose tools the run uses (repeatable; beside or "
                           "instead of --tools).")(fn)
    return fn


def check(given: ToolsGiven, what: str | None = "a run") -> None:
    """A usage error (exit 2) for a malformed ``--mcp``, or for no tools at all when ``what`` (a run) needs some."""
    if what is not None and not given.given:
        raise CliUsageError(f"{what} needs its tools: --tools MODULE:ATTR, --mcp \"COMMAND ARGS...\" or --mcp-url URL")
    given.servers()


def base_tools(given: ToolsGiven) -> ToolRegistry:
    """The ``--tools`` registry (or an empty one), before any MCP server's tools join it."""
    return load_tools(given.spec) if given.spec is not None else ToolRegistry()


@contextmanager
def tools_for(given: ToolsGiven, base: ToolRegistry | None = None) -> Iterator[ToolRegistry]:
    """The registry of ``given`` (``base`` when loaded already), its MCP sessions closed when the block ends."""
    registry = base if base is not None else base_tools(given)
    servers = given.servers()
    if not servers:
        yield registry
        return
    import runner.mcp

    try:
        for server in servers:
            try:
                registry.add_mcp(server)
            except (RunnerError, ValueError) as exc:
                raise CliError(str(exc)) from None
        yield registry
    finally:
        runner.mcp.close()


def given_tools(spec: str | None, commands: Sequence[str], urls: Sequence[str]) -> ToolsGiven:
    return ToolsGiven(spec, tuple(commands), tuple(urls))
