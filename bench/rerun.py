"""``runner.rerun`` of 100 stored runs against a model server that answers in 0.2 s: wall time vs the ideal.

The baselines are ``STEPS``-step runs of the shared workload (every step but the last calls ``echo``),
recorded into a temporary SQLite file (or ``--db``). The rerun goes through the real OpenAI adapter to a
local OpenAI-compatible server that waits ``--delay`` seconds before each answer and replays the same
calls, so every call is served from the recording. The ideal is what the model's waiting alone costs:
``runs x steps x delay / concurrency``; the ratio says how much the rerun adds to it (at most 1.5 is the bar).

    .venv/bin/python bench/rerun.py [--runs 100] [--steps 3] [--delay 0.2] [--concurrency 4 8]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from workload import registry, script

from runner import open_store, rerun, run_agent
from runner.adapters import openai_model


def completion(step: int, steps: int) -> dict[str, Any]:
    """What the workload's model answers at ``step``: a call of ``echo``, or at the last step the answer."""
    message: dict[str, Any] = {"role": "assistant", "content": "finished"}
    if step < steps:
        message = {"role": "assistant", "content": f"step {step - 1}", "tool_calls": [
            {"id": f"c{step - 1}", "type": "function",
             "function": {"name": "echo", "arguments": json.dumps({"n": step - 1})}}]}
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if step < steps else "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


def serve(steps: int, delay_s: float) -> ThreadingHTTPServer:
    """A fake OpenAI-compatible server on 127.0.0.1 answering after ``delay_s``, on a thread per request."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            step = 1 + sum(m["role"] == "assistant" for m in body["messages"])
            time.sleep(delay_s)
            out = json.dumps(completion(step, steps)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the model server waits before answering")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--db", help="a store URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        url = args.db or f"sqlite:///{Path(scratch) / 'rerun.db'}"
        with open_store(url) as store:
            ids = [run_agent(f"bench {n}", script(args.steps), registry(), system="s", max_steps=args.steps,
                             token_budget=10**9, max_identical_calls=args.steps, store=store).run_id
                   for n in range(args.runs)]
            server = serve(args.steps, args.delay)
            base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
            print(f"rerun of {args.runs} stored runs, {args.steps} steps each, model answers in {args.delay:.2f} s")
            print(f"{'concurrency':>11}  {'wall s':>7}  {'ideal s':>7}  {'ratio':>5}  cases")
            for concurrency in args.concurrency:
                with openai_model("bench", base_url=base_url, api_key="k", max_retries=0) as model:
                    started = time.perf_counter()
                    report = rerun(store, ids, model, concurrency=concurrency)
                    wall = time.perf_counter() - started
                ideal = args.runs * args.steps * args.delay / concurrency
                verdicts = f"{report.count('unchanged')} unchanged, {report.count('changed')} changed, " \
                           f"{report.count('regressed')} regressed"
                if len(report.cases) != args.runs or report.count("unchanged") != args.runs:
                    raise SystemExit(f"the rerun did not reproduce every run: {verdicts}")
                print(f"{concurrency:>11}  {wall:>7.2f}  {ideal:>7.2f}  {wall / ideal:>5.2f}  {verdicts}")
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
