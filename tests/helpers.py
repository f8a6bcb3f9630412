"""Shared by the tests of several areas: a real HTTP server on 127.0.0.1 with scripted answers."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple


class Answer(NamedTuple):
    """What a ``LocalServer`` sends back to one POST."""

    status: int
    content_type: str
    body: bytes


Answering = Callable[[BaseHTTPRequestHandler, bytes], Answer | None]


class LocalServer:
    """A real HTTP server on a free port of 127.0.0.1; ``answer`` answers each POST on the server's threads.

    ``answer(request, body)`` gets the handler (its ``path`` and ``headers``) and the body read
    by ``Content-Length``; it returns the ``Answer`` to send, or None to send nothing (the
    connection then closes without a response). ``start`` serves on a daemon thread.
    """

    def __init__(self, answer: Answering) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                reply = answer(self, self.rfile.read(int(self.headers["Content-Length"])))
                if reply is None:
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def default_sigint() -> None:
    """For ``Popen(preexec_fn=...)``: the child takes SIGINT as Ctrl-C even when this process ignores it.

    A shell without job control starts a background job with SIGINT ignored, its children inherit that,
    and Python then never raises ``KeyboardInterrupt``: a test that sends SIGINT restores the default first.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_docs_example(page: str, workdir: Path) -> list[str]:
    """Run the first Python block of ``docs/PAGE`` as a script in ``workdir``: the lines it printed.

    A failing script fails the test with its stderr.
    """
    root = Path(__file__).resolve().parents[1]
    found = re.search(r"```python\n(.*?)```", (root / "docs" / page).read_text(encoding="utf-8"), re.S)
    assert found is not None, f"docs/{page} has no Python example"
    script = workdir / "example.py"
    script.write_text(found.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=workdir, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
