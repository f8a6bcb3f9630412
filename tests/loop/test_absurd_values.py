"""Absurd but well-typed values a caller, a model or a forged log can hand the loop: never a crash."""

from __future__ import annotations

import time
from typing import Any

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent

CENTURIES_S = 1e10  # past threading.TIMEOUT_MAX (about 9.2e9 s): a wait that long overflows the platform's clock


def slow_registry(timeout_s: float | None) -> ToolRegistry:
    registry = ToolRegistry()

    def slow() -> str:
        time.sleep(0.05)  # still running when the loop starts to wait for it
        return "ok"

    registry.register("slow", "Takes a moment.", {"type": "object", "properties": {}}, slow, timeout_s=timeout_s)
    return registry


def two_calls() -> ModelReply:
    return ModelReply("", [ToolCall("c1", "slow", {}), ToolCall("c2", "slow", {})])


def test_a_deadline_centuries_away_waits_for_a_slow_model_as_none_would() -> None:
    def model(messages: Any, specs: Any) -> ModelReply:
        time.sleep(0.05)
        return ModelReply("done")

    result = run_agent("t", model, ToolRegistry(), timeout_s=CENTURIES_S)
    assert (result.status, result.answer) == ("done", "done")


def test_a_tool_timeout_centuries_away_waits_for_calls_run_together() -> None:
    result = run_agent("t", ScriptedModel([two_calls(), "done"]), slow_registry(CENTURIES_S))
    assert result.status == "done"
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"ok"', '"ok"']


def test_a_deadline_centuries_away_waits_for_calls_run_together() -> None:
    result = run_agent("t", ScriptedModel([two_calls(), "done"]), slow_registry(None), timeout_s=CENTURIES_S)
    assert result.status == "done"
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"ok"', '"ok"']


def test_a_tool_timeout_centuries_away_waits_for_one_call() -> None:
    one = ModelReply("", [ToolCall("c1", "slow", {})])
    result = run_agent("t", ScriptedModel([one, "done"]), slow_registry(CENTURIES_S))
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"ok"']
