"""Tools from MCP servers: ``registry.add_mcp(runner.mcp.stdio("python", ["server.py"]))`` (see docs/mcp.md).

Built on the official ``mcp`` SDK (``pip install 'durable-agent-runner[mcp]'``). Describing a server loads
nothing; the SDK is imported when a server's tools are first listed, and ``close`` loads it on first use too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .servers import (
    DEFAULT_RESULT_CHARS,
    INITIALIZE_TIMEOUT_S,
    HttpServer,
    McpError,
    McpServer,
    StdioServer,
    from_command_line,
    http,
    stdio,
)

if TYPE_CHECKING:
    from .sessions import close


def __getattr__(name: str) -> Any:
    if name != "close":
        raise AttributeError(f"module 'runner.mcp' has no attribute {name!r}")
    value = importlib.import_module(".sessions", __name__).close
    globals()[name] = value
    return value


__all__ = ["DEFAULT_RESULT_CHARS", "INITIALIZE_TIMEOUT_S", "HttpServer",
           "McpError", "McpServer", "StdioServer", "close",
           "from_command_line", "http", "stdio"]
