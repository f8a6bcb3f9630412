"""Shared by the MCP tests: the test server's command line, what it ran, its processes, and a model that reads.

The server is ``tests/mcp/server.py`` (a real ``mcp`` SDK server); each test gives it a log of its own in
``tmp_path``, where it also leaves ``server-PID.pid`` while it runs. ``ReadingOpenAI`` is the CLI tests'
fake OpenAI server, answering each request from the messages in it, so an answer can use a tool's result.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from runner import Message, ModelReply, ToolCall, ToolSpec
from tests.cli.helpers import FakeOpenAI, completion, sse_of
from tests.helpers import Answer

SERVER = Path(__file__).resolve().parent / "server.py"
ROOT = Path(__file__).resolve().parents[2]
LISTED = ["add", "send", "upsert", "fail", "picture", "crash"]  # the server's tools, in the order it lists them


def server_argv(workdir: Path, *extra: str) -> list[str]:
    """The test server's command and arguments, logging to ``workdir``."""
    return [sys.executable, str(SERVER), "--log", str(workdir / "ran.log"), *extra]


def server_line(workdir: Path, *extra: str) -> str:
    """``--mcp``'s value for the test server: its command line."""
    return shlex.join(server_argv(workdir, *extra))


def ran(workdir: Path) -> list[str]:
    """Each call the server ran, in order."""
    log = workdir / "ran.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def started(workdir: Path) -> list[int]:
    """The pid of every test server started with a log in ``workdir`` that has not exited cleanly."""
    return sorted(int(path.read_text(encoding="utf-8")) for path in workdir.glob("server-*.pid"))


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def servers_alive(workdir: Path) -> list[int]:
    return [pid for pid in started(workdir) if alive(pid)]


def mcp_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "runner-mcp"]


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


class ReadingOpenAI(FakeOpenAI):
    """A fake OpenAI server whose reply to each request is ``reply(messages)``, worked out from what it is sent."""

    def __init__(self, reply: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> None:
        self.reply = reply
        super().__init__()

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> Answer | None:
        sent = json.loads(body)
        self.requests.append(sent)
        out = self.reply(sent["messages"])
        if sent.get("stream"):  # runner run streams the adapter's model unless --no-stream
            return Answer(200, "text/event-stream",
                          sse_of(out, bool((sent.get("stream_options") or {}).get("include_usage"))))
        return Answer(200, "application/json", json.dumps(out).encode())


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def add_then_send(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Asks for ``add(2, 3)`` and ``send``, then answers with the sum ``add`` returned."""
    results = tool_results(messages)
    if not results:
        return completion("", [("call_1", "add", {"a": 2, "b": 3}), ("call_2", "send", {"to": "ann", "text": "hi"})])
    return completion(f"2 + 3 = {json.loads(results[0])['result']}")


def calls_then_answers(*calls: tuple[str, str, dict[str, Any]]) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """Asks for one call a step, in order; then answers with the observations it read, one a line."""

    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if len(results) < len(calls):
            return completion("", [calls[len(results)]])
        return completion("\n".join(results))

    return reply


class Scripted:
    """A Python model for the API tests: one call a step from ``calls``, then the observations as its answer."""

    def __init__(self, *calls: ToolCall) -> None:
        self.calls = calls

    def __call__(self, messages: Sequence[Message], specs: Sequence[ToolSpec], /) -> ModelReply:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if len(results) < len(self.calls):
            return ModelReply("", [self.calls[len(results)]])
        return ModelReply("\n".join(results))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def http_server(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    """The test server over streamable HTTP in a process of its own, once it listens; and its URL."""
    port = free_port()
    process = subprocess.Popen([*server_argv(workdir), "--http", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)

    def listening() -> bool:
        assert process.poll() is None, process.communicate()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, "the HTTP server listens")
    return process, f"http://127.0.0.1:{port}/mcp"


def runner_env(server: FakeOpenAI) -> dict[str, str]:
    """The environment of a ``runner`` subprocess: the fake model server's URL and key, no OTLP or RUNNER_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RUNNER_"))}
    return env | {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "NO_PROXY": "127.0.0.1",
                  "no_proxy": "127.0.0.1"}
