"""A real MCP server for the tests, over stdio (or streamable HTTP with ``--http PORT``), built with the ``mcp`` SDK.

``python tests/mcp/server.py [--log FILE] [--hold-once FILE [--hold TOOLS]] [--silent] [--odd] [--big] [--http PORT]``

Its tools say what they do to the world in their annotations: ``add`` is read-only, ``send`` destructive,
``upsert`` idempotent. Every call appends one line to ``--log`` (flushed and fsynced first), so a test
counts how often each really ran. With ``--hold-once FILE``, the first call of a tool in ``--hold``
creates FILE and then sleeps, so a test can kill the runner while it runs. ``--silent`` never answers
``initialize``. Each server leaves ``server-PID.pid`` beside ``--log`` until it exits.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import time
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

# The smallest PNG there is: one transparent pixel.
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                      "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")

options = argparse.ArgumentParser()
options.add_argument("--log", type=Path)
options.add_argument("--hold-once", type=Path)
options.add_argument("--hold", default="send,add,upsert", help="the tools --hold-once may hold")
options.add_argument("--silent", action="store_true")
options.add_argument("--odd", action="store_true", help="also list a tool whose schema runner refuses")
options.add_argument("--big", action="store_true", help="also list a tool whose result is as long as asked")
options.add_argument("--http", type=int)
given = options.parse_args()

server = MCPServer("runner-tests", log_level="WARNING")
PARENT = os.getppid()


def ran(line: str, tool: str) -> None:
    """Log one call, then hold it if ``--hold-once`` asks (the first time only)."""
    if given.log is not None:
        with open(given.log, "a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
    marker = given.hold_once
    if marker is not None and tool in given.hold.split(",") and not marker.exists():
        marker.write_text("held\n", encoding="utf-8")
        while os.getppid() == PARENT:  # the test kills the runner now; then this call ends, and the server
            time.sleep(0.05)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    ran(f"add {a} {b}", "add")
    return a + b


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def send(to: str, text: str) -> str:
    """Send a message."""
    ran(f"send {to} {text}", "send")
    return f"sent to {to}"


@server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def upsert(key: str, value: str) -> str:
    """Set a key to a value."""
    ran(f"upsert {key} {value}", "upsert")
    return f"{key}={value}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    """Fail with a reason."""
    ran(f"fail {reason}", "fail")
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> Image:
    """A picture of one pixel."""
    ran("picture", "picture")
    return Image(data=PIXEL, format="png")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Exit the server at once, mid-call."""
    ran("crash", "crash")
    os._exit(3)


if given.odd:

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def odd(host: Annotated[str, Field(json_schema_extra={"format": "hostname"})]) -> str:
        """A format runner does not check, so it refuses the schema."""
        return host

if given.big:

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def big(chars: int) -> str:
        """A text of ``chars`` characters: digits, so a cut shows where it fell."""
        return "".join(str(i % 10) for i in range(chars))


def main() -> None:
    if given.log is not None:
        pid_file = given.log.parent / f"server-{os.getpid()}.pid"
        pid_file.write_text(str(os.getpid()), encoding="utf-8")
        atexit.register(pid_file.unlink, missing_ok=True)
    if given.silent:
        for _ in sys.stdin:  # reads every request, answers none
            pass
        return
    if given.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=given.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
