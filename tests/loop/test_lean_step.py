"""The plain loop's per-step work: each reply's args serialised once, flat args never deep-copied."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, _jsontext, run_agent


def _registry(seen: list[dict[str, Any]]) -> ToolRegistry:
    def echo(**args: Any) -> dict[str, Any]:
        seen.append(args)
        args["n"] = -1  # a tool that edits its arguments
        return {"n": 1}

    reg = ToolRegistry()
    reg.register("echo", "Echo.", {"type": "object", "properties": {"n": {"type": "integer"}}}, echo)
    return reg


def test_a_plain_step_serialises_three_values(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]
    real = json.JSONEncoder.iterencode  # every standard encoder's way to serialise a dict or a list

    def counting(self: json.JSONEncoder, value: Any, _one_shot: bool = False) -> Any:
        calls[0] += 1
        return real(self, value, _one_shot)

    def counted(encode: Any) -> Any:
        def counting_encode(value: Any) -> str:
            calls[0] += 1
            return encode(value)  # type: ignore[no-any-return]
        return counting_encode

    for name in ("standard", "sorted_keys", "strict", "compact"):  # the encoders kept in runner._jsontext
        monkeypatch.setattr(_jsontext, name, counted(getattr(_jsontext, name)))

    model = ScriptedModel([ModelReply("", [ToolCall(f"c{i}", "echo", {"n": i})]) for i in range(10)] + ["done"])
    registry = _registry([])
    monkeypatch.setattr(json.JSONEncoder, "iterencode", counting)
    before = calls[0]
    result = run_agent("t", model, registry, max_steps=20, token_budget=10**9)
    assert result.status == "done"
    # Per tool step: the args (token meter), the repeat guard's sorted key, the tool's result.
    # Per run: the tool specs once (token meter).
    assert calls[0] - before == 10 * 3 + 1


def test_a_tool_editing_its_flat_args_leaves_the_appended_message_as_the_model_sent_it() -> None:
    seen: list[dict[str, Any]] = []
    result = run_agent("t", ScriptedModel([ModelReply("", [ToolCall("c1", "echo", {"n": 5})]), "done"]),
                       _registry(seen))
    appended = result.messages[2]
    assert appended["role"] == "assistant"
    assert appended["tool_calls"] == [{"id": "c1", "name": "echo", "args": {"n": 5}}]
    assert seen == [{"n": -1}]
