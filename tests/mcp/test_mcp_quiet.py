"""A broken MCP server over HTTP: runner's one-line error speaks, the SDK's tracebacks stay out of stderr
(``RUNNER_DEBUG=1`` shows them); through a real ``runner run`` subprocess."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cli.helpers import installed_runner

pytestmark = pytest.mark.process


class Broken(BaseHTTPRequestHandler):
    """Answers every request as JSON with a body that is no JSON at all."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"not json"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_DELETE = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def broken_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()


def run_against(url: str, tmp_path: Path, *extra_env: tuple[str, str]) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "RUNNER_DEBUG"}
    env |= {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", **dict(extra_env)}
    return subprocess.run([installed_runner(), "run", "Add", "--mcp-url", url, "--model", "openai:fake",
                           "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "-q",
                           "--db", f"sqlite:///{tmp_path / 'runs.db'}"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def test_a_broken_http_server_is_one_line_on_stderr(broken_url: str, tmp_path: Path) -> None:
    result = run_against(broken_url, tmp_path)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Error: MCP server at {broken_url} "), lines[0]
    assert result.stdout == ""


def test_runner_debug_shows_the_traceback(broken_url: str, tmp_path: Path) -> None:
    result = run_against(broken_url, tmp_path, ("RUNNER_DEBUG", "1"))
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
