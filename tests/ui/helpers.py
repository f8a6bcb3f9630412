"""Shared by the console's browser tests: the system Chromium, a real ``runner ui`` process, runs recorded
through ``runner run``, the store read back, and a page served from another origin.

Playwright never downloads a browser here: it drives the Chromium at ``RUNNER_TEST_CHROMIUM``,
else the one on PATH (``.ci/run`` installs Debian's package), and a test fails when there is none.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, NamedTuple
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Locator, Page, Request

from runner import AgentResult, RunNotFound, StoredEvent, ToolRegistry, open_store, run_agent
from runner._log.statuses import Status
from runner.store import RunStore
from tests.cli.helpers import FakeOpenAI, at, completion, installed_runner, invoke, run_id_in
from tests.helpers import Answer
from tests.streaming.helpers import StreamingModel
from tests.ui.console_tools import RAN_ENV

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS = "tests.ui.console_tools:tools"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SERVING = re.compile(r"runner ui: serving (http://\S+)")
WAITING = (Status.AWAITING_APPROVAL, Status.RUNNING)
"""The statuses of a decided run the console has not finished going on with yet."""
START_S = 60.0  # bounds, not expectations: how long a console may take to serve, to stop, a run to end
STOP_S = 30.0
SETTLE_S = 60.0
SCRUBBED = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
            "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL", "OPENAI_API_KEY",
            "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "RUNNER_DB", "RUNNER_UI_TOKEN", "RUNNER_BROKER",
            "RUNNER_BROKER_URL", "POOL_LEDGER_URL", "COLUMNS", RAN_ENV)


def chromium_path() -> str:
    """The Chromium to drive: ``RUNNER_TEST_CHROMIUM``, else ``chromium`` on PATH; the test fails without one."""
    path = os.environ.get("RUNNER_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        pytest.fail(f"no Chromium at {path}: the console's browser tests need one (apt-get install chromium, "
                    "as .ci/run does, or set RUNNER_TEST_CHROMIUM to its path)")
    return path


def local_env(ran: Path) -> dict[str, str]:
    """A console's environment: no proxy, model server or store from outside; the test's tools importable."""
    env = {name: value for name, value in os.environ.items() if name not in SCRUBBED}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env |= {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", "OPENAI_API_KEY": "k",
            RAN_ENV: str(ran)}
    return env


class Console:
    """A ``runner ui`` process serving at ``url``; ``stop`` sends it SIGINT and checks that it exits 0."""

    def __init__(self, process: subprocess.Popen[str], url: str, stderr: Path, pump: threading.Thread) -> None:
        self.process = process
        self.url = url
        self.stderr = stderr
        self.pump = pump
        parts = urlsplit(url)
        self.origin = f"{parts.scheme}://{parts.netloc}"

    def at(self, path: str) -> str:
        """The URL of ``path`` (``/approvals``) on this console."""
        return self.origin + path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"runner ui did not stop within {STOP_S}s of SIGINT:\n{self.stderr.read_text()}")
        self.pump.join(STOP_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        assert code == 0, f"runner ui exited {code} on SIGINT:\n{self.stderr.read_text()}"


def pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Move a process's stdout into ``lines`` (None at its end), so reading it can have a time bound."""
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def start_console(db: str, *options: str, ran: Path, logs: Path) -> Console:
    """``runner ui --db DB --port 0 OPTIONS`` (the installed script), once it says where it serves."""
    stderr = logs / f"console-{len(list(logs.glob('console-*.log')))}.log"
    with stderr.open("w", encoding="utf-8") as err:
        process = subprocess.Popen([installed_runner(), "ui", "--db", db, "--port", "0", *options], cwd=ROOT,
                                   env=local_env(ran), stdout=subprocess.PIPE, stderr=err, text=True)
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=pump, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        first = lines.get(timeout=START_S)
    except queue.Empty:
        first = f"(nothing within {START_S}s)"
    found = SERVING.fullmatch(first or "")
    if found is None:
        if process.poll() is None:
            process.kill()
        process.wait()
        reader.join(STOP_S)
        process.stdout.close()
        pytest.fail(f"runner ui printed {first!r} instead of 'runner ui: serving URL':\n{stderr.read_text()}")
    return Console(process, found[1], stderr, reader)


Start = Callable[..., Console]
"""The ``console`` fixture: ``console(DB, *OPTIONS)`` starts ``runner ui`` and returns it."""


def record(db: str, task: str, *replies: dict[str, Any], options: Sequence[str] = ()) -> str:
    """``runner run TASK`` with the console's tools, the OpenAI adapter and a fake server answering ``replies``."""
    with FakeOpenAI(*replies) as server:
        result = invoke("run", task, "--tools", TOOLS, "--model", "openai:fake", *at(server), "--db", db, "-q",
                        *options)
    return run_id_in(result)


def status_of(db: str, run_id: str) -> str:
    with open_store(db) as store:
        return store.get_run(run_id).status


def events_of(db: str, run_id: str) -> list[StoredEvent]:
    with open_store(db) as store:
        return store.get_run(run_id).events


def decisions(db: str, run_id: str) -> list[dict[str, object]]:
    """The ``approval_decided`` facts of a run, as logged."""
    return [dict(e.data) for e in events_of(db, run_id) if e.kind == "approval_decided"]


def settled(db: str, run_id: str, waiting: Sequence[str]) -> str:
    """The status of a run once it is no longer one of ``waiting`` (polling the store, at most ``SETTLE_S``)."""
    deadline = time.monotonic() + SETTLE_S
    while (status := status_of(db, run_id)) in waiting:
        if time.monotonic() > deadline:
            pytest.fail(f"run {run_id} is still {status} after {SETTLE_S}s")
        time.sleep(0.1)
    return status


def ran(path: Path) -> list[str]:
    """What the console's tools ran, a line per call (``transfer a``)."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


class HeldOpenAI(FakeOpenAI):
    """A ``FakeOpenAI`` that holds each answer until ``release`` is set (``asked`` is set once a request came)."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        super().__init__(*bodies)

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> Answer | None:
        self.asked.set()
        self.release.wait(SETTLE_S)
        return super().answer(request, body)

    def __enter__(self) -> HeldOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)


def shown_runs(page: Page) -> list[tuple[str, str]]:
    """The runs table's rows: (run id, status), top to bottom."""
    return [(row.get_attribute("data-run-id") or "", row.get_attribute("data-status") or "")
            for row in page.locator("tr[data-run-id]").all()]


class Shown(NamedTuple):
    """A page after a navigation: the HTTP status it was served with and its URL."""

    status: int
    url: str


class PageServer:
    """A real HTTP server on another port of 127.0.0.1 serving ``pages`` (path to HTML): another origin."""

    def __init__(self, pages: dict[str, str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                html = pages.get(self.path)
                body = (html or "not found").encode()
                self.send_response(200 if html is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def awaiting(db: str, ref: str = "a", task: str = "Send the money") -> str:
    """A run stopped awaiting approval of ``transfer`` call ``t1``."""
    run_id = record(db, task, completion("", [("t1", "transfer", {"ref": ref})]))
    assert status_of(db, run_id) == Status.AWAITING_APPROVAL
    return run_id


def pending(page: Page, run_id: str, call_id: str) -> Locator:
    return page.locator(f'form.pending[data-run-id="{run_id}"][data-call-id="{call_id}"]')


def decide(page: Page, run_id: str, call_id: str, verdict: str, reason: str = "") -> int:
    """Press Approve or Deny (``verdict``) on a pending call in the inbox, with ``reason`` typed first.

    Returns the HTTP status of the page the browser lands on (after the redirect, if any).
    """
    form = pending(page, run_id, call_id)
    if reason:
        form.locator('[name="reason"]').fill(reason)
    with page.expect_navigation() as landed:
        form.locator(f'button[name="verdict"][value="{verdict}"]').click()
    assert landed.value is not None
    return landed.value.status


def kinds(page: Page) -> list[str | None]:
    """The ``data-kind`` of each entry of a run page's timeline, in order."""
    return [entry.get_attribute("data-kind") for entry in page.locator("ol#timeline > li.entry").all()]


@contextmanager
def streaming(store: RunStore, model: StreamingModel, registry: ToolRegistry, run_id: str,
              task: str = "Weather in Paris?") -> Iterator[Future[AgentResult]]:
    """``run_agent(..., stream=True)`` in a thread of the test; yields once the run is logged as running.

    Its deltas are committed every 50 ms. Leaving waits for the run to end (at most ``SETTLE_S``).
    """
    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(run_agent, task, model, registry, store=store, stream=True, run_id=run_id,
                           delta_interval_s=0.05)
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and not done.done():
            try:
                if store.get_run(run_id).status == Status.RUNNING:
                    break
            except RunNotFound:
                pass
            time.sleep(0.01)
        yield done
        done.result(SETTLE_S)


# Put on a page before it loads: every CSP violation it meets, in ``window.__violations``.
SPY = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective));
"""


class Watch(NamedTuple):
    """What a page did: the requests it sent, and the CSP's complaints on its console."""

    requests: list[Request]
    blocked: list[str]

    def elsewhere(self, origin: str) -> list[str]:
        """The URLs it asked for outside ``origin``."""
        return [request.url for request in self.requests if not request.url.startswith(origin + "/")]


def watching(page: Page) -> Watch:
    """Note ``page``'s requests and CSP complaints from now on, and spy on its CSP violations (``SPY``)."""
    seen = Watch([], [])
    page.on("request", lambda request: seen.requests.append(request))
    page.on("console", lambda message: seen.blocked.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.add_init_script(SPY)
    return seen
