"""MCP servers as values: a command to start over stdio, or a URL to reach over streamable HTTP.

A server is only a description; nothing starts until its tools are listed or called. Two equal
descriptions are one server, so a process holds one session per server (``runner.mcp.sessions``).
Environment values and headers are kept out of ``repr`` and out of the log: they often hold secrets.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import RunnerError
from ..messages import McpRef

INITIALIZE_TIMEOUT_S = 10.0  # a server that has not answered ``initialize`` by then is given up on
# The characters of one call's result the model reads (``add_mcp(max_result_chars=...)``); the rest is cut, marked.
# One 30 MB result would otherwise fill the log and the model's context at once.
DEFAULT_RESULT_CHARS = 100_000


class McpError(RunnerError):
    """An MCP server cannot be started, does not answer ``initialize`` in time, or cannot list its tools."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server started as a child process, spoken to over its stdin and stdout.

    ``env`` is added to the few variables the SDK passes on (see docs/mcp.md); ``cwd`` is where it starts.
    """

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)
    cwd: str | None = None

    @property
    def ref(self) -> McpRef:
        """The server as the log records it (``--mcp`` on the command line): its command line, no environment."""
        return {"transport": "stdio", "target": self.command_line}

    @property
    def command_line(self) -> str:
        return shlex.join([self.command, *self.args])

    def describe(self) -> str:
        return f"MCP server `{self.command_line}`"


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server reached over streamable HTTP at ``url``, each request carrying ``headers``."""

    url: str
    headers: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)

    @property
    def ref(self) -> McpRef:
        """The server as the log records it (``--mcp-url`` on the command line): its URL, no headers."""
        return {"transport": "http", "target": self.url}

    def describe(self) -> str:
        return f"MCP server at {self.url}"


McpServer = StdioServer | HttpServer


def stdio(command: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
          cwd: str | None = None) -> StdioServer:
    """A server started with ``command args...``; ``ValueError`` (one line) for a malformed one."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError("an MCP server's command must be a non-empty string")
    if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
        raise ValueError(f"an MCP server's args must be a sequence of strings, got {args!r}")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("an MCP server's env must map strings to strings")
    if cwd is not None and not isinstance(cwd, str):
        cwd = str(cwd)
    return StdioServer(command, tuple(args), None if env is None else tuple(sorted(env.items())), cwd)


def http(url: str, headers: Mapping[str, str] | None = None) -> HttpServer:
    """A server at ``url`` (``http://`` or ``https://``); ``ValueError`` (one line) for anything else."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise ValueError(f"an MCP server's URL must start with http:// or https://, got {url!r}")
    if headers is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ValueError("an MCP server's headers must map strings to strings")
    return HttpServer(url, None if headers is None else tuple(sorted(headers.items())))


def checked_cap(max_result_chars: int | None) -> int | None:
    """``add_mcp``'s ``max_result_chars``: None (no cap) or a positive int; ``ValueError`` (one line) else."""
    if max_result_chars is not None and (isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int)
                                         or max_result_chars < 1):
        raise ValueError(f"max_result_chars must be a positive whole number of characters or None, "
                         f"got {max_result_chars!r}")
    return max_result_chars


def from_command_line(line: str) -> StdioServer:
    """The server ``--mcp "COMMAND ARGS..."`` names (split as a shell would, without running one)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"cannot split {line!r} into a command and its arguments: {exc}") from None
    if not words:
        raise ValueError("an MCP server's command line is empty")
    return stdio(words[0], words[1:])
