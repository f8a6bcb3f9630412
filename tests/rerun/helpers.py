"""Shared by the rerun tests: a fake OpenAI-compatible server that answers by task and step, and recorded baselines.

The baselines are recorded through the real OpenAI adapter against one ``TaskServer`` (``BEFORE``); the
reruns run against another that behaves differently (``AFTER``), so every request crosses real HTTP.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any, NamedTuple

from runner import RerunReport, RunStore, open_store, run_agent
from runner._rerun.stored import stored_report
from runner.adapters import OpenAIModel, openai_model
from tests.cli.helpers import completion
from tests.helpers import Answer, LocalServer
from tests.rerun import rerun_tools

TOOLS = "tests.rerun.rerun_tools:tools"
Script = Callable[[int], dict[str, Any]]
"""A task's script: the completion a server sends at a step (1 for the first model call)."""


class Request(NamedTuple):
    """A chat completion request as a ``TaskServer`` saw it: the run's task, the step, the tool results so far."""

    task: str
    step: int
    results: list[str]
    tools: list[str]


class TaskServer(LocalServer):
    """A fake OpenAI-compatible server on 127.0.0.1 that answers each request by its task's script, at its step.

    The task is the request's first user message; the step counts its assistant messages. A request for a
    task in ``hold`` waits until ``release`` is set (then answers); ``delay_s`` delays every answer.
    """

    def __init__(self, scripts: Mapping[str, Script], *, delay_s: float = 0.0, hold: frozenset[str] = frozenset()):
        self.scripts, self.delay_s, self.hold = dict(scripts), delay_s, hold
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        super().__init__(self.answer)
        self.url = f"{self.address}/v1"

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> Answer | None:
        data = json.loads(body)
        messages = data["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        seen = Request(task, 1 + sum(m["role"] == "assistant" for m in messages),
                       [m["content"] for m in messages if m["role"] == "tool"],
                       [tool["function"]["name"] for tool in data.get("tools", [])])
        with self.lock:
            self.requests.append(seen)
        if task in self.hold:
            self.release.wait(60)
        if self.delay_s:
            time.sleep(self.delay_s)
        script = self.scripts.get(task)
        if script is None:
            return Answer(400, "application/json", b'{"error": {"message": "no script for this task"}}')
        return Answer(200, "application/json", json.dumps(script(seen.step)).encode())

    def asked(self, task: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.task == task]

    def __enter__(self) -> TaskServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.stop()


def steps(*replies: dict[str, Any]) -> Script:
    """A script of fixed replies, one per step (a step past the last gets the last)."""
    return lambda step: replies[min(step, len(replies)) - 1]


WEATHER = "What is the weather in Paris?"
DRIFT = "Convert 21 C to Fahrenheit."
LOOP = "Weather in Oslo, then stop."
EMAIL = "Email the forecast to ann."
FORECAST = {"to": "ann", "body": "Sunny, 21 C."}

BEFORE: dict[str, Script] = {
    WEATHER: steps(completion("", [("w1", "get_weather", {"city": "Paris"})]), completion("It is 21 C in Paris.")),
    DRIFT: steps(completion("", [("d1", "c_to_f", {"celsius": 21})]), completion("21 C is 69.8 F.")),
    LOOP: steps(completion("", [("l1", "get_weather", {"city": "Oslo"})]), completion("It is 4 C in Oslo.")),
    EMAIL: steps(completion("", [("e1", "send_email", FORECAST)]), completion("Sent.")),
}
"""How the baselines' model behaved."""

AFTER: dict[str, Script] = {
    WEATHER: BEFORE[WEATHER],
    DRIFT: steps(completion("", [("d1", "c_to_f", {"celsius": 22})]), completion("22 C is 71.6 F.")),
    LOOP: lambda step: completion("", [(f"l{step}", "get_weather", {"city": f"Oslo {step}"})]),
    EMAIL: steps(completion("", [("e1", "send_email", FORECAST), ("e2", "send_email", {**FORECAST, "to": "bob"})]),
                 completion("Sent to ann and bob.")),
}
"""How the new model behaves: the same on WEATHER; drifted arguments and answer on DRIFT; never done on LOOP;
on EMAIL the recorded call again and a new one to another address."""

MAX_STEPS = 3


def fake_model(server: TaskServer | Any) -> OpenAIModel:
    """The real OpenAI adapter on ``server``, with no retries (a fake's refusal is final)."""
    return openai_model("fake", base_url=server.url, api_key="k", max_retries=0, timeout=30)


def record_baselines(store: RunStore, tasks: tuple[str, ...],
                     scripts: Mapping[str, Script] = BEFORE) -> dict[str, str]:
    """A run of each task through the OpenAI adapter on a ``scripts`` server: their ids, by task."""
    ids = {}
    with TaskServer(scripts) as server, fake_model(server) as model:
        for task in tasks:
            result = run_agent(task, model, rerun_tools.tools(), store=store, max_steps=MAX_STEPS,
                               tools_ref=TOOLS, labels={"suite": "rerun"})
            assert result.status == "done", result.error
            ids[task] = result.run_id
    rerun_tools.RAN.clear()
    return ids


ALL = (WEATHER, DRIFT, LOOP, EMAIL)


@contextmanager
def recorded(url: str, tasks: tuple[str, ...] = ALL) -> Iterator[tuple[RunStore, dict[str, str]]]:
    """An open store at ``url`` holding the baselines of ``tasks``, and their ids by task."""
    with open_store(url) as store:
        yield store, record_baselines(store, tasks)


def recorded_at(url: str, tasks: tuple[str, ...] = ALL) -> dict[str, str]:
    """The ids, by task, of the baselines of ``tasks`` recorded in the store at ``url`` (then closed)."""
    with recorded(url, tasks) as (_, ids):
        return ids


def assert_rebuilt(store: RunStore, report: RerunReport) -> None:
    """The report read back from the store is the one ``rerun`` returned, but for what the store does not hold.

    That is how long the whole rerun took, and the runs given that were skipped.
    """
    found = stored_report(store, report.rerun_id)
    assert found is not None
    assert dataclasses.replace(found, elapsed_s=0.0) == dataclasses.replace(report, elapsed_s=0.0, skipped=())
