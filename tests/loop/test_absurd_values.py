"""Absurd but well-typed values a caller, a model or a forged log can hand the loop: never a crash."""

from __future__ import annotations

import math
import re
import sys
import time
from typing import Any

import pytest

from runner import Limits, ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, run_agent
from runner.events import EventDecodeError, ModelCalled, decode
from runner.store import RunStore

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


@pytest.mark.parametrize("name", ["timeout_s", "max_cost_usd"])
@pytest.mark.parametrize(("value", "shown"), [(math.inf, "inf"), (10**400, "an int too large for a float")])
def test_a_duration_or_amount_that_is_not_a_finite_float_is_refused(name: str, value: float, shown: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be finite or None, got {shown}$"):
        Limits(**{name: value})  # type: ignore[arg-type]


def test_a_forged_log_with_a_cost_too_large_for_a_float_is_malformed() -> None:
    with pytest.raises(EventDecodeError, match="cost_usd must be a non-negative number, got 1000000"):
        decode("model_call", {"prompt_tokens": 1, "reply": None, "cost_usd": 10**400})


@pytest.mark.parametrize("value", [math.inf, 10**400])
def test_a_tool_timeout_that_is_not_a_finite_float_is_refused_at_register(value: float) -> None:
    with pytest.raises(ValueError, match=r"^tool 'x': timeout_s must be finite \(None: no timeout\)$"):
        ToolRegistry().register("x", "x", {"type": "object"}, lambda: 1, timeout_s=value)


def test_a_tool_timeout_that_is_not_a_number_is_refused_at_register() -> None:
    with pytest.raises(ValueError, match=r"^tool 'x': timeout_s must be positive, got '5'$"):
        ToolRegistry().register("x", "x", {"type": "object"}, lambda: 1, timeout_s="5")  # type: ignore[arg-type]


PRICED = {"scripted": {"input_mtok": 1.0, "output_mtok": 1.0}}


@pytest.mark.parametrize(("usage", "shown"), [
    (Usage(10, 10, cache_read_tokens="x"), "cached tokens in non-negative ints, got cache_read_tokens='x'"),  # type: ignore[arg-type]
    (Usage(10, 10, cache_write_tokens=-5), "cached tokens in non-negative ints, got cache_write_tokens=-5"),
    (Usage(10**400, 10), "at most 2**53 tokens, got input_tokens=an int past 2**53"),
    (Usage(10, 2**53 + 1), "at most 2**53 tokens, got output_tokens=an int past 2**53"),
])
def test_a_reply_reporting_impossible_usage_is_an_invalid_reply_logged_readable(
        store: RunStore, usage: Usage, shown: str) -> None:
    result = run_agent("t", ScriptedModel([ModelReply("done", [], usage)]), ToolRegistry(), store=store,
                       prices=PRICED)
    assert result.status == "invalid_reply"
    assert result.error == f"reply usage must count {shown}"
    called = [f for f in store.get_run(result.run_id).facts if isinstance(f, ModelCalled)]
    assert [(f.cost_usd, f.reply) for f in called] == [(None, None)]


def test_a_cost_past_the_largest_float_is_logged_as_the_largest_and_stops_a_budget(store: RunStore) -> None:
    absurd = {"scripted": {"input_mtok": 1e300, "output_mtok": 1e300}}
    reply = ModelReply("", [ToolCall("c1", "slow", {})], Usage(10**15, 10**15))
    result = run_agent("t", ScriptedModel([reply, "done"]), slow_registry(None), store=store, prices=absurd,
                       max_cost_usd=1.0)
    assert result.status == "cost_limit"
    called = [f for f in store.get_run(result.run_id).facts if isinstance(f, ModelCalled)]
    assert [(f.cost_usd, f.prompt_cost_usd, f.completion_cost_usd) for f in called] == [
        (sys.float_info.max, sys.float_info.max, sys.float_info.max)]


YEAR_S = 365 * 24 * 3600


@pytest.mark.parametrize("name", ["latency_s", "first_chunk_s"])
@pytest.mark.parametrize(("value", "shown"), [(-1.0, "-1.0"), (math.nan, "nan"), (math.inf, "inf"), (1e300, "1e+300"),
                                              (10**400, "an int too large for a float"), ("1", "'1'"),
                                              (True, "True"), (YEAR_S + 1, str(YEAR_S + 1))])
def test_a_forged_log_with_a_model_calls_time_out_of_range_is_malformed(name: str, value: object, shown: str) -> None:
    """Span times are the call's time less its latency: a forged one must not overflow them."""
    wrong = f"model_call event is malformed: {name} must be a number of seconds from 0 to a year, got {shown}"
    with pytest.raises(EventDecodeError, match=f"^{re.escape(wrong)}$"):
        decode("model_call", {"prompt_tokens": 1, "reply": None, name: value})


def test_a_model_calls_time_up_to_a_year_is_read_back() -> None:
    called = decode("model_call", {"prompt_tokens": 1, "reply": None, "latency_s": YEAR_S, "first_chunk_s": 0})
    assert isinstance(called, ModelCalled)
    assert (called.latency_s, called.first_chunk_s) == (YEAR_S, 0)
