"""Shared by the CLI tests: a store of known runs, an invoker, table parsing, a fake OpenAI server,
the installed script, runs stopped awaiting approval for the resume tests, and processes read as they print."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import IO, Any, NamedTuple

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import update

from runner import Limits, ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner.cli import cli
from runner.events import Event, MessageAppended, ModelCalled, ModelDelta, RunStarted, StepStarted, ToolStarted
from runner.store import RunStore, open_store, rollups
from runner.store.tables import runs
from tests.cli import resume_tools
from tests.helpers import Answer, LocalServer, default_sigint
from tests.loop.helpers import call, reply, weather_registry

T0 = datetime(2025, 1, 1, tzinfo=UTC)
LONG = "x" * 500

# Ids chosen so two runs share their first 8 characters (4444dddd...).
R1 = "1111aaaa" + "0" * 24
R2 = "2222bbbb" + "0" * 24
R3 = "3333cccc" + "0" * 24
R4 = "4444dddd" + "0" * 24
R5 = "4444dddd" + "9" * 24


def registry() -> ToolRegistry:
    """The weather tools plus ``echo_long``, whose observation is 500+ characters."""
    tools = weather_registry()
    tools.register("echo_long", "A long result.", {"type": "object", "properties": {}}, lambda: LONG)
    return tools


def record(store: RunStore, run_id: str, task: str, script: list[Any], started: datetime,
           labels: dict[str, str] | None = None, **options: Any) -> None:
    run_agent(task, ScriptedModel(script), registry(), run_id=run_id, store=store, labels=labels, **options)
    with store.engine.begin() as conn:  # a start moved by hand: the stats' rollups are worked out again
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(started_at=started))
        rollups.refill(conn)


def fill(url: str) -> None:
    """Five runs of known statuses, tools, labels and start times (R5 started 10 minutes ago)."""
    with open_store(url) as store:
        record(store, R1, "Weather in Paris?", [reply("", call("c1", "get_weather", city="Paris")), "It is 21C."],
               T0 + timedelta(hours=1), {"env": "prod", "team": "a"})
        record(store, R2, "Say HELLO", ["hello"], T0 + timedelta(hours=2), {"env": "dev"})
        record(store, R3, "Broken run", [], T0 + timedelta(hours=3), {"env": "prod", "team": "b"})
        record(store, R4, "Convert 21C, then more", [reply("", call("c1", "c_to_f", celsius=21))],
               T0 + timedelta(hours=4), max_steps=1)
        record(store, R5, "Long output and a bad tool",
               [reply("Checking.", call("c1", "echo_long"), call("c2", "get_forecast", city="Oslo")), "ok"],
               datetime.now(UTC) - timedelta(minutes=10))


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


ROW = re.compile(r"\s{2,}")
NOTES = ("… ", "tools: ")  # lines printed under the runs table


def rows(output: str) -> list[list[str]]:
    """The cells of each row of a table printed by the CLI (after its header rule; not the notes under it)."""
    if output == "no runs match\n":
        return []
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"}) + 1
    return [ROW.split(line.strip()) for line in lines[start:] if line.strip() and not line.startswith(NOTES)]


def one_error_line(result: Result) -> str:
    """The single stderr line of a failed command (asserting it is one line, no traceback)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    return lines[0]


def completion(content: str = "", calls: list[tuple[str, str, dict[str, Any]]] | None = None,
               usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """An OpenAI chat completion body; ``usage`` is the prompt and completion tokens it reports."""
    tool_calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                  for i, n, a in calls or []]
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def sse_of(body: dict[str, Any], usage: bool) -> bytes:
    """A chat completion as the server-sent events of its stream: its text, each call, its end, its usage.

    What a server sends for a request with ``"stream": true`` (``usage``: it asked for the usage,
    ``stream_options.include_usage``, which comes in a last chunk of its own).
    """
    choice = body["choices"][0]
    message = choice["message"]
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for field in ("content", "refusal"):
        if message.get(field):
            chunks += [chunk({field: word}) for word in re.findall(r"\S+\s*|\s+", message[field])]
    for i, tool_call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": i, **tool_call}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if usage and body.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": body["usage"]})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


class FakeOpenAI(LocalServer):
    """A real HTTP server on 127.0.0.1 answering /v1/chat/completions with scripted completions.

    A request that asks for a stream gets the completion as server-sent events (``sse_of``).
    With ``hang``, it records each request and never answers (until it shuts down).
    """

    def __init__(self, *bodies: dict[str, Any], hang: bool = False) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []
        self.closing = threading.Event()
        self.hang = hang
        super().__init__(self.answer)
        self.url = f"{self.address}/v1"

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> Answer | None:
        asked = json.loads(body)
        self.requests.append(asked)
        if self.hang:
            self.closing.wait(60)
            return None
        status, out = (200, self.bodies.pop(0)) if self.bodies else (400, {"error": {"message": "no more"}})
        if status == 200 and asked.get("stream"):
            usage = bool((asked.get("stream_options") or {}).get("include_usage"))
            return Answer(status, "text/event-stream", sse_of(out, usage))
        return Answer(status, "application/json", json.dumps(out).encode())

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.stop()


def installed_runner() -> str:
    """The path of the installed ``runner`` script (the test fails when it is missing)."""
    script = Path(sys.executable).parent / ("runner.exe" if os.name == "nt" else "runner")
    if not script.exists():
        pytest.fail(f"the runner entry point is not installed at {script}: pip install -e '.[dev]'")
    return str(script)


RESUME_TOOLS = "tests.cli.resume_tools:tools"
"""The ``--tools`` of the resume, fork and approval tests: ``tests/cli/resume_tools.py``."""


def at(server: FakeOpenAI) -> list[str]:
    return ["--base-url", server.url, "--api-key", "k"]


def run_id_in(result: Result) -> str:
    found = re.search(r"^run id: ([0-9a-f]{32})$", result.stdout, re.M)
    assert found is not None, result.output
    return found[1]


def lines(result: Result) -> list[str]:
    return [line.rstrip() for line in result.stdout.splitlines()]


def awaiting(url: str, *calls: tuple[str, str, dict[str, Any]]) -> str:
    """``runner run`` whose model asks for ``calls`` of tools that need approval: it stops awaiting it."""
    with FakeOpenAI(completion("", list(calls))) as server:
        result = invoke("run", "Send the money", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                        "--db", url)
    assert result.exit_code == 1, result.output
    return run_id_in(result)


def make_dead(store: RunStore, run_id: str) -> None:
    """As if the run's process had exited: its owner names a pid that is gone."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    host = str(store.get_run(run_id).owner).rsplit(":", 1)[0]
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=f"{host}:{gone}"))


def record_dead_inside_pay(url: str, run_id: str, model: str = "fake", provider: str | None = "openai", *,
                           traits: bool = False) -> None:
    """A run whose process died inside ``pay`` (a side effect): ``tool_started`` and nothing after.

    ``traits`` also logs the tools' traits, as runs recorded since they are logged do.
    """
    reply = ModelReply("", [ToolCall("p1", "pay", {"ref": "x"})])
    registry = resume_tools.tools()
    with open_store(url) as store:
        recorder = store.recorder()
        recorder.record(RunStarted(run_id=run_id, task="Pay x", system="s", limits=Limits().to_dict(),
                                   tool_specs=registry.specs(), tool_traits=registry.traits() if traits else None,
                                   model=model, provider=provider))
        recorder.record(MessageAppended(index=0, message={"role": "system", "content": "s"}))
        recorder.record(MessageAppended(index=1, message={"role": "user", "content": "Pay x"}))
        recorder.record(StepStarted(step=1))
        recorder.record(MessageAppended(step=1, index=2, message={
            "role": "assistant", "content": "", "tool_calls": [{"id": "p1", "name": "pay", "args": {"ref": "x"}}]}))
        recorder.record(ModelCalled(step=1, prompt_tokens=10, reply_tokens=5, reply=reply))
        recorder.record(ToolStarted(step=1, call_id="p1", name="pay", args={"ref": "x"}))
        recorder.sync()
        make_dead(store, run_id)


ROOT = Path(__file__).resolve().parents[2]
STREAM_CLI = [sys.executable, "-m", "tests.cli.stream_cli"]
"""``runner`` whose ``--model openai:NAME`` streams a script (``tests/cli/stream_cli.py``)."""
WAIT_S = 30.0  # a bound, not an expectation: how long a test waits for a process's output or its end


class Output:
    """A process's stdout (or stderr), read on a thread of its own as it comes, for a test to wait on."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.data = b""
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self.read, args=(stream,), daemon=True)
        self.thread.start()

    def read(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(4096):  # unbuffered: what has come, at most this much
                with self.changed:
                    self.data += chunk
                    self.changed.notify_all()

    @property
    def text(self) -> str:
        with self.changed:
            return self.data.decode("utf-8", "replace")

    def wait_for(self, needle: str, timeout_s: float = WAIT_S) -> str:
        """The output so far, once it holds ``needle`` (the test fails when it does not in time)."""
        with self.changed:
            found = self.changed.wait_for(lambda: needle.encode() in self.data, timeout_s)
            assert found, f"{needle!r} never came; output so far: {self.data!r}"
            return self.data.decode("utf-8", "replace")

    def whole(self) -> str:
        """All of it, once the process closed it."""
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        return self.text


class Streaming(NamedTuple):
    """A ``runner`` process, its stdout and stderr read as they come."""

    proc: subprocess.Popen[bytes]
    out: Output
    err: Output

    def ended(self) -> tuple[int, str, str]:
        """Its exit status, stdout and stderr, once it exits (killed when it has not within ``WAIT_S``).

        A process left running would fail a later test (its ``Popen`` warns when collected).
        """
        try:
            code = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT_S)
            raise AssertionError(f"still running after {WAIT_S} s; its stdout: {self.out.whole()!r}; "
                                 f"its stderr: {self.err.whole()!r}") from None
        return code, self.out.whole(), self.err.whole()


def start_runner(command: list[str], *args: str, script: list[Any] | None = None, gate: Path | None = None,
                 pause_s: float = 0.0, merged: bool = False) -> Streaming:
    """``command ARGS`` (``STREAM_CLI`` streams ``script``, held at ``gate``: see ``tests/cli/stream_cli.py``).

    ``merged``: its stderr goes to its stdout's pipe, so the order of the two can be read.
    """
    env = {**os.environ, "STREAM_CLI_SCRIPT": json.dumps(script or []), "STREAM_CLI_PAUSE_S": str(pause_s),
           "STREAM_CLI_GATE": str(gate) if gate is not None else "", "COLUMNS": "200"}
    proc = subprocess.Popen([*command, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, bufsize=0,
                            stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                            preexec_fn=default_sigint)  # Ctrl-C reaches it even where this process ignores it
    assert proc.stdout is not None
    return Streaming(proc, Output(proc.stdout), Output(proc.stderr if proc.stderr is not None else io.BytesIO()))


def waiting_at(gate: Path) -> None:
    """Wait until the model of a ``STREAM_CLI`` run waits at ``gate``."""
    deadline = time.monotonic() + WAIT_S
    while not Path(str(gate) + ".waiting").exists():
        assert time.monotonic() < deadline, "the model never reached its gate"
        time.sleep(0.01)


def opening(run_id: str) -> list[Event]:
    """A run's first facts, up to its first step: a log to add a test's facts to."""
    return [RunStarted(run_id=run_id, task="Write", system="s", limits={}, tool_specs=[], model="fake",
                       provider="openai"),
            MessageAppended(index=0, message={"role": "system", "content": "s"}),
            MessageAppended(index=1, message={"role": "user", "content": "Write"}),
            StepStarted(step=1)]


def logged(store: RunStore, facts: list[Event], *, dead: bool = True) -> str:
    """A run whose log is ``facts`` (its process gone unless not ``dead``): its id."""
    started = facts[0]
    assert isinstance(started, RunStarted)
    recorder = store.recorder()
    for fact in facts:
        recorder.record(fact)
    recorder.sync()
    if dead:
        make_dead(store, started.run_id)
    return started.run_id


def deltas(step: int, *texts: str) -> list[Event]:
    """``model_delta`` facts of step ``step``, one per text, as a reply streamed them."""
    found: list[Event] = []
    offset = 0
    for text in texts:
        found.append(ModelDelta(step=step, text=text, offset=offset))
        offset += len(text)
    return found
