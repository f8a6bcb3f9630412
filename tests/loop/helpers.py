"""Tools and models shared by the loop tests."""

from __future__ import annotations

import threading
from typing import Any

from runner import ModelReply, ToolCall, ToolRegistry

WEATHER = {"Paris": 21, "Oslo": -3}


class Calls:
    """Which tool functions really ran, with their arguments."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []

    def names(self) -> list[str]:
        return [name for name, _ in self.log]


def weather_registry(calls: Calls | None = None) -> ToolRegistry:
    calls = calls if calls is not None else Calls()
    registry = ToolRegistry()

    def get_weather(city: str) -> dict[str, int]:
        calls.log.append(("get_weather", {"city": city}))
        return {"celsius": WEATHER[city]}

    def c_to_f(celsius: float) -> float:
        calls.log.append(("c_to_f", {"celsius": celsius}))
        return celsius * 9 / 5 + 32

    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      get_weather)
    registry.register("c_to_f", "Celsius to Fahrenheit.",
                      {"type": "object", "properties": {"celsius": {"type": "number"}},
                       "required": ["celsius"]},
                      c_to_f)
    return registry


def call(call_id: str, name: str, **args: Any) -> ToolCall:
    return ToolCall(call_id, name, args)


def reply(content: str = "", *calls: ToolCall) -> ModelReply:
    return ModelReply(content, list(calls))


def hanging_model(release: threading.Event) -> Any:
    def model(messages: Any, specs: Any) -> ModelReply:
        release.wait(30)
        return ModelReply("too late")

    return model


def record_unfinished_run(store: Any, run_id: str, task: str = "t") -> None:
    """A run's first commit and nothing more, as a process killed right after it leaves it."""
    from runner._log.limits import Limits
    from runner.events import RunStarted

    recorder = store.recorder()
    recorder.record(RunStarted(run_id=run_id, task=task, system="s", limits=Limits().to_dict(), tool_specs=[],
                               model="scripted"))
    recorder.sync()


class Gate:
    """Tools that note how many calls run at once, each waiting at a barrier of ``meet`` calls first.

    ``peak`` is the most calls that ever ran at once: a barrier that releases only when ``meet``
    calls wait at it proves they overlapped, with no clock involved.
    """

    def __init__(self, meet: int = 1) -> None:
        self.barrier = threading.Barrier(meet, timeout=10) if meet > 1 else None
        self.lock = threading.Lock()
        self.active = self.peak = 0
        self.ran: list[str] = []

    def enter(self, name: str) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.ran.append(name)

    def leave(self) -> None:
        with self.lock:
            self.active -= 1

    def sync_tool(self, n: int) -> str:
        self.enter(f"n{n}")
        try:
            if self.barrier is not None:
                self.barrier.wait()
            else:
                threading.Event().wait(0.01)  # long enough for another call to start, were one let in
            return f"r{n}"
        finally:
            self.leave()


def numbered(fn: Any, name: str = "work", **options: Any) -> ToolRegistry:
    """A registry of one tool ``name(n: int)`` run by ``fn``."""
    registry = ToolRegistry()
    registry.register(name, "Work on n.", {"type": "object", "properties": {"n": {"type": "integer"}},
                                           "required": ["n"]}, fn, **options)
    return registry


def fan_out(count: int, name: str = "work", first: int = 1) -> ModelReply:
    """One reply calling ``name`` ``count`` times, with n = first, first + 1, ... (call ids c<n>)."""
    return reply("", *(call(f"c{n}", name, n=n) for n in range(first, first + count)))
