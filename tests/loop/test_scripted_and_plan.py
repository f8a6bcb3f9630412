"""ScriptedModel's bookkeeping and run_plan's trace."""

from __future__ import annotations

from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ScriptError, ScriptExhausted, run_plan


def test_scripted_model_records_deep_copies_and_counts() -> None:
    model = ScriptedModel(["a", ModelReply("b")])
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    assert model(messages, []) == ModelReply("a")
    messages.append({"role": "assistant", "content": "a", "tool_calls": []})
    assert model.remaining == 1
    assert model(messages, []).content == "b"
    seen = model.seen
    assert seen == [[{"role": "user", "content": "hi"}],
                    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a", "tool_calls": []}]]
    seen[0][0]["content"] = "changed"
    assert model.seen[0][0]["content"] == "hi"
    model.assert_complete()


def test_scripted_model_over_call_raises_a_typed_error() -> None:
    model = ScriptedModel(["only"])
    model([], [])
    with pytest.raises(ScriptExhausted) as info:
        model([], [])
    assert (info.value.calls, info.value.replies) == (2, 1)
    assert model.remaining == 0


def test_assert_complete_fails_with_replies_left() -> None:
    model = ScriptedModel(["a", "b"])
    model([], [])
    with pytest.raises(ScriptError, match=r"^scripted model was called 1 time for 2 replies$"):
        model.assert_complete()


def test_run_plan_returns_the_trace_and_stops_at_finish() -> None:
    tools = {"add": lambda a: a["x"] + a["y"], "boom": lambda a: 1 / 0, "noargs": lambda a: len(a)}
    trace = run_plan([("add", {"x": 1, "y": 2}), ("noargs",), ("boom", {}), ("nope", {}), ("finish",),
                      ("add", {"x": 5, "y": 5})], tools)
    assert trace == [
        ("add", {"x": 1, "y": 2}, 3),
        ("noargs", {}, 0),
        ("boom", {}, "ERROR: boom failed: ZeroDivisionError: division by zero"),
        ("nope", {}, "ERROR: unknown tool 'nope'. Available tools: ['add', 'boom', 'noargs']"),
    ]


def test_run_plan_stops_once_the_trace_holds_max_steps() -> None:
    trace = run_plan([("inc", {})] * 20, {"inc": lambda a: 1}, max_steps=4)
    assert len(trace) == 4
