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
