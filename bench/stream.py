"""Streaming through the OpenAI adapter against a local server that streams 500 pieces a reply.

    .venv/bin/python bench/stream.py [--runs 20] [--seconds 2] [--old DIR]

The server is a child process (its writing takes none of this process's GIL).
1. Time to the first piece of text: through ``stream_agent`` (no store, then a SQLite store) and
   ``astream_agent``, against the raw SDK's own time to its first chunk on the same client and
   server, the two taken in turn; p50 over ``--runs`` (target: at most raw + 5 ms). Once with the
   pieces all at once, once 1 ms apart.
2. Commits of a streamed reply that lasts ``--seconds``: the ``model_delta`` facts a SQLite store
   holds for it, with ``delta_interval_s=0.2`` (target: at most D / 0.2 + 3, D the reply's measured length).
3. A run without streaming: microseconds a step with ``stream`` off, one instant call a step (plain,
   logged, traced; ``bench/latency.py``'s figure). The drivers branch only when streaming is on, so this is
   the path runs took before streaming; ``--old DIR`` measures the ``runner/`` in DIR beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
from latency import old_overhead, overhead

from runner import DEFAULT_SYSTEM, ToolRegistry, open_store, run_agent
from runner.adapters import AsyncOpenAIModel, OpenAIModel
from runner.events import ModelCalled, ModelDelta
from runner.streaming import RunEnded, TextDelta, astream_agent, stream_agent

PIECES = 500
PACES = (0.0, 0.001)  # part 1: the pieces all at once (the worst case: parsing keeps the reader busy), 1 ms apart
ASK: list[Any] = [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": "write"}]  # as the run's


def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    data = f"data: {json.dumps(body)}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def serve() -> None:
    """Serve on 127.0.0.1 in this process, printing the port: each reply ``PIECES`` pieces, chunked.

    The request's model name says how far apart the pieces go (``bench-0.004``: 4 ms). The server
    runs in a process of its own, so its writing does not take the measured process's GIL.
    """
    pieces = [chunk({"role": "assistant", "content": "w0 "}), *(chunk({"content": f"w{i} "})
                                                                  for i in range(1, PIECES))]
    tail = b"".join([chunk({}, "stop"), chunk(None, usage={"prompt_tokens": 10, "completion_tokens": PIECES,
                                                           "total_tokens": PIECES + 10}),
                     b"e\r\ndata: [DONE]\n\n\r\n", b"0\r\n\r\n"])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()  # each piece goes out at once, as a real server's do (no Nagle delay)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            pace_s = float(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["model"].split("-")[1])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                if pace_s:
                    time.sleep(pace_s)
            self.wfile.write(tail)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the bench closes it, or ends: a server never outlives its bench


class Server:
    """``serve`` in a child process; ``base_url`` is where it listens."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.base_url = f"http://127.0.0.1:{int(self.process.stdout.readline())}/v1"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def paced(pace_s: float) -> str:
    """The model name that asks the server for pieces ``pace_s`` apart."""
    return f"bench-{pace_s:g}"


def raw_first(client: openai.OpenAI, name: str) -> float:
    """The raw SDK: seconds from the request to its first chunk with text (the stream read to its end)."""
    started, first = time.perf_counter(), None
    for part in client.chat.completions.create(model=name, messages=ASK, stream=True,
                                               stream_options={"include_usage": True}):
        if first is None and part.choices and part.choices[0].delta.content:
            first = time.perf_counter() - started
    assert first is not None
    return first


def adapter_first(model: OpenAIModel) -> float:
    """The adapter alone (``OpenAIModel.stream``, no run): seconds from the call to its first piece."""
    started, first = time.perf_counter(), None
    for item in model.stream(ASK, []):
        if first is None and isinstance(item, str):
            first = time.perf_counter() - started
    assert first is not None
    return first


def runner_first(model: OpenAIModel, **options: Any) -> float:
    """``stream_agent``: seconds from the call to its first ``TextDelta`` (the run read to its end)."""
    started, first = time.perf_counter(), None
    for event in stream_agent("write", model, ToolRegistry(), **options):
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter() - started
        if isinstance(event, RunEnded):
            assert event.result.status == "done", event.result
    assert first is not None
    return first


async def araw_first(client: openai.AsyncOpenAI, name: str) -> float:
    started, first = time.perf_counter(), None
    async for part in await client.chat.completions.create(model=name, messages=ASK, stream=True,
                                                           stream_options={"include_usage": True}):
        if first is None and part.choices and part.choices[0].delta.content:
            first = time.perf_counter() - started
    assert first is not None
    return first


async def arunner_first(model: AsyncOpenAIModel) -> float:
    started, first = time.perf_counter(), None
    async for event in astream_agent("write", model, ToolRegistry()):
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter() - started
    assert first is not None
    return first


def row(label: str, raw: list[float], ours: list[float]) -> None:
    p50_raw, p50_ours = statistics.median(raw), statistics.median(ours)
    extra = p50_ours - p50_raw
    print(f"{label:>36} {p50_raw * 1e3:8.2f} {p50_ours * 1e3:8.2f} {extra * 1e3:8.2f}  "
          f"{'ok' if extra <= 0.005 else 'MISSED'}")


def in_turn(runs: int, raw: Callable[[], float], ours: Callable[[], float]) -> tuple[list[float], list[float]]:
    """``runs`` times each of ``raw`` and ``ours``, in turn, both orders (ABBA): what runs after what evens out."""
    raw(), ours()  # warm: the connection, first-call costs
    found: tuple[list[float], list[float]] = ([], [])
    for n in range(runs):
        for which in ((0, 1) if n % 2 else (1, 0)):
            found[which].append((raw, ours)[which]())
    return found


async def ain_turn(runs: int, raw: Callable[[], Awaitable[float]],
                   ours: Callable[[], Awaitable[float]]) -> tuple[list[float], list[float]]:
    await raw(), await ours()
    found: tuple[list[float], list[float]] = ([], [])
    for n in range(runs):
        for which in ((0, 1) if n % 2 else (1, 0)):
            found[which].append(await (raw, ours)[which]())
    return found


def first_delta(base_url: str, runs: int, pace_s: float) -> None:
    """Part 1 for pieces ``pace_s`` apart: the raw SDK and the adapter, then the runner, in turn on one client."""
    name = paced(pace_s)
    spread = f"{pace_s * 1e3:g} ms apart" if pace_s else "all at once"
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "runs.db") as store, \
            openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
        model = OpenAIModel(client, name)
        row(f"OpenAIModel.stream, {spread}",
            *in_turn(runs, lambda: raw_first(client, name), lambda: adapter_first(model)))
        for label, options in (("stream_agent, no store", {}), ("stream_agent, SQLite store", {"store": store})):
            ours = functools.partial(runner_first, model, **options)
            row(f"{label}, {spread}", *in_turn(runs, lambda: raw_first(client, name), ours))

    async def measure() -> tuple[list[float], list[float]]:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as aclient:
            amodel = AsyncOpenAIModel(aclient, name)
            return await ain_turn(runs, lambda: araw_first(aclient, name), lambda: arunner_first(amodel))

    row(f"astream_agent, no store, {spread}", *asyncio.run(measure()))


def commits(base_url: str, seconds: float) -> None:
    """Part 2: the ``model_delta`` facts of one reply lasting about ``seconds``."""
    print(f"\n2. a streamed reply of {PIECES} pieces over about {seconds:g} s, delta_interval_s=0.2, SQLite")
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "runs.db") as store, \
            openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
        result = run_agent("write", OpenAIModel(client, paced(seconds / PIECES)), ToolRegistry(), store=store,
                           stream=True, delta_interval_s=0.2)
        assert result.status == "done", result
        facts = store.get_run(result.run_id).facts
    deltas = [fact for fact in facts if isinstance(fact, ModelDelta)]
    called = next(fact for fact in facts if isinstance(fact, ModelCalled))
    assert "".join(delta.text for delta in deltas) == result.answer
    bound = called.latency_s / 0.2 + 3
    print(f"   the reply took D = {called.latency_s:.2f} s: {len(deltas)} model_delta facts, each committed on "
          f"its own but the last (with the reply); target <= D / 0.2 + 3 = {bound:.1f} -> "
          f"{'ok' if len(deltas) <= bound else 'MISSED'}")


def plain_steps(old: str | None) -> None:
    print("\n3. a run without streaming: us a step, one instant call a step (best of 3 x 200 steps)")
    now = overhead()
    before = old_overhead(old) if old is not None else None
    print(f"{'mode':>8} {'this':>8}" + (f" {'old':>8} {'this/old':>9}" if before else ""))
    for mode, us in now.items():
        row = f"{mode:>8} {us:>8.1f}"
        if before:
            row += f" {before[mode]:>8.1f} {us / before[mode]:>8.3f}x"
        print(row)


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=2.0, help="how long the streamed reply of part 2 lasts")
    parser.add_argument("--old", help="a directory holding an older runner/ to measure part 3 beside")
    args = parser.parse_args()
    server = Server()
    try:
        print(f"1. time to the first piece, p50 of {args.runs} runs in turn (ms; {PIECES} pieces a reply)")
        print(f"{'path':>36} {'raw SDK':>8} {'runner':>8} {'extra':>8}  target: extra <= 5 ms")
        for pace_s in PACES:
            first_delta(server.base_url, args.runs, pace_s)
        commits(server.base_url, args.seconds)
    finally:
        server.close()
    plain_steps(args.old)


if __name__ == "__main__":
    main()
