"""Every exit and error path of run_agent, each on its own, with exact values."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from runner import AgentStopped, ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, run_agent
from runner._loop.tokens import naive_prompt_tokens
from runner.events import ToolFinished
from runner.recorder import NullRecorder
from tests.loop.helpers import Calls, call, reply, weather_registry


def test_happy_path_roles_observations_and_answer() -> None:
    calls = Calls()
    model = ScriptedModel([
        reply("Let me check.", call("c1", "get_weather", city="Paris")),
        reply("", call("c2", "c_to_f", celsius=21)),
        "It is 21 C (69.8 F) in Paris.",
    ])
    result = run_agent("Weather in Paris in F?", model, weather_registry(calls), system="Be brief.")
    assert result.status == "done"
    assert result.answer == "It is 21 C (69.8 F) in Paris."
    assert result.error is None
    assert result.steps == 3
    assert result.tool_calls == 2
    assert [m["role"] for m in result.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert result.messages[0] == {"role": "system", "content": "Be brief."}
    assert result.messages[1] == {"role": "user", "content": "Weather in Paris in F?"}
    assert result.messages[2] == {"role": "assistant", "content": "Let me check.",
                                  "tool_calls": [{"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}]}
    assert result.messages[3] == {"role": "tool", "tool_call_id": "c1", "name": "get_weather",
                                  "content": '{"celsius": 21}'}
    assert result.messages[5]["content"] == "69.8"
    assert calls.log == [("get_weather", {"city": "Paris"}), ("c_to_f", {"celsius": 21})]
    assert [len(seen) for seen in model.seen] == [2, 4, 6]
    assert model.seen[1] == result.messages[:4]
    model.assert_complete()
    assert len(result.run_id) == 32


def test_each_run_gets_a_fresh_run_id_without_a_store() -> None:
    ids = {run_agent("t", ScriptedModel(["ok"]), ToolRegistry()).run_id for _ in range(5)}
    assert len(ids) == 5


def test_two_calls_in_one_reply_run_in_order_with_matching_ids() -> None:
    calls = Calls()
    model = ScriptedModel([
        reply("", call("a", "get_weather", city="Paris"), call("b", "get_weather", city="Oslo")),
        "Paris 21, Oslo -3.",
    ])
    result = run_agent("both", model, weather_registry(calls))
    assert result.status == "done"
    assert calls.names() == ["get_weather", "get_weather"]
    tool_msgs = [m for m in result.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_msgs] == [("a", '{"celsius": 21}'),
                                                                       ("b", '{"celsius": -3}')]


@pytest.mark.parametrize("name", ["get_forecast", "__class__", "register", "execute", ""])
def test_unknown_tool_becomes_an_observation_listing_sorted_tools(name: str) -> None:
    calls = Calls()
    model = ScriptedModel([reply("", call("c1", name)), "sorry"])
    result = run_agent("t", model, weather_registry(calls))
    assert result.status == "done"
    assert result.messages[3]["content"] == (
        f"ERROR: unknown tool {name!r}. Available tools: ['c_to_f', 'get_weather']")
    assert calls.log == []
    assert result.tool_calls == 0


@pytest.mark.parametrize(("args", "expected"), [
    ("not a dict", "ERROR: arguments must be a JSON object, got a string that did not parse: 'not a dict'. "
                   'get_weather expects {"city": {"type": "string"}}'),
    ({}, "ERROR: missing required argument 'city'. get_weather expects {\"city\": {\"type\": \"string\"}}"),
    ({"city": "Paris", "unit": "c"},
     "ERROR: unexpected argument 'unit'. get_weather expects {\"city\": {\"type\": \"string\"}}"),
    ({"city": 7},
     "ERROR: argument 'city' must be of type string. get_weather expects {\"city\": {\"type\": \"string\"}}"),
])
def test_bad_arguments_never_run_the_tool(args: Any, expected: str) -> None:
    calls = Calls()
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "get_weather", args)]), "ok"])
    result = run_agent("t", model, weather_registry(calls))
    assert result.messages[3]["content"] == expected
    assert calls.log == []
    assert result.status == "done"


def test_raising_tool_becomes_an_error_observation_and_the_run_goes_on() -> None:
    calls = Calls()
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Atlantis")), "no such city"])
    result = run_agent("t", model, weather_registry(calls))
    assert result.messages[3]["content"] == "ERROR: get_weather failed: KeyError: 'Atlantis'"
    assert result.status == "done"
    assert result.tool_calls == 1


def test_step_limit_calls_the_model_exactly_max_steps_times() -> None:
    model = ScriptedModel([reply("", call(f"c{i}", "get_weather", city=city))
                           for i, city in enumerate(["Paris", "Oslo", "Paris", "Oslo"])])
    result = run_agent("t", model, weather_registry(), max_steps=3)
    assert result.status == "step_limit"
    assert model.calls == 3
    assert result.steps == 3
    assert result.answer is None
    assert result.error == "made 3 model calls (max_steps=3)"
    assert [m["role"] for m in result.messages][-2:] == ["assistant", "tool"]


def _full_cost() -> int:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21"])
    return run_agent("t", model, weather_registry(), token_budget=10**9).tokens


def test_token_budget_exactly_the_full_cost_finishes() -> None:
    full = _full_cost()
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21"])
    result = run_agent("t", model, weather_registry(), token_budget=full)
    assert result.status == "done"
    assert result.tokens == full


def test_token_budget_half_the_full_cost_stops_before_calling_the_model() -> None:
    full = _full_cost()
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21"])
    result = run_agent("t", model, weather_registry(), token_budget=full // 2)
    assert result.status == "token_budget"
    assert model.calls == 1
    assert result.steps == 1
    assert result.tokens <= full // 2


def test_token_estimate_matches_naive_reserialisation_at_every_call() -> None:
    registry = weather_registry()
    model = ScriptedModel([reply("x" * i, call(f"c{i}", "c_to_f", celsius=i)) for i in range(5)] + ["end"])
    spent = run_agent("t", model, registry, max_steps=10, token_budget=10**9).tokens
    expected = 0
    for seen in model.seen:
        prompt = naive_prompt_tokens(registry.specs(), seen)
        expected += prompt
    replies = sum(-(-len(json.dumps(m)) // 4) for m in model.seen[-1] if m["role"] == "assistant")
    final = {"role": "assistant", "content": "end", "tool_calls": []}
    assert spent == expected + replies + -(-len(json.dumps(final)) // 4)


def test_usage_from_the_api_replaces_the_estimate() -> None:
    model = ScriptedModel([
        ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})], Usage(100, 7)),
        ModelReply("21", [], Usage(130, 2)),
    ])
    result = run_agent("t", model, weather_registry())
    assert result.tokens == 239


def test_tool_budget_counts_only_started_functions() -> None:
    calls = Calls()
    model = ScriptedModel([
        reply("", call("c1", "nope"), call("c2", "get_weather", city=1), call("c3", "get_weather", city="Paris")),
        reply("", call("c4", "get_weather", city="Oslo")),
    ])
    result = run_agent("t", model, weather_registry(calls), max_tool_calls=1)
    assert result.status == "tool_budget"
    assert calls.names() == ["get_weather"]
    assert result.tool_calls == 1
    assert result.error == "call c4 (get_weather) would be tool call 2 (max_tool_calls=1); not run"
    assert result.messages[-1]["role"] == "assistant"


def test_hanging_model_stops_at_the_run_deadline() -> None:
    release, returned = threading.Event(), threading.Event()

    def model(messages: Any, specs: Any) -> ModelReply:
        release.wait(30)
        returned.set()
        return ModelReply("late")

    result = run_agent("t", model, ToolRegistry(), timeout_s=0.2)
    assert not returned.is_set()  # the run ended at its deadline with the model still hanging
    release.set()
    assert result.status == "deadline"
    assert result.error == "run deadline of 0.2 s passed while waiting on the model"
    assert result.steps == 1


def test_hanging_tool_stops_at_the_run_deadline() -> None:
    release, returned = threading.Event(), threading.Event()

    def hang() -> str:
        release.wait(30)
        returned.set()
        return "late"

    registry = ToolRegistry()
    registry.register("hang", "never returns", {"type": "object"}, hang)
    model = ScriptedModel([reply("", call("c1", "hang")), "never"])
    result = run_agent("t", model, registry, timeout_s=0.2)
    assert not returned.is_set()  # the run ended at its deadline with the tool still hanging
    release.set()
    assert result.status == "deadline"
    assert result.error == "run deadline of 0.2 s passed while waiting on tool hang"
    assert result.tool_calls == 1


def test_per_tool_timeout_gives_an_observation_and_the_run_goes_on() -> None:
    release = threading.Event()
    registry = ToolRegistry()
    registry.register("slow", "slow", {"type": "object"}, lambda: release.wait(30), timeout_s=0.05)
    model = ScriptedModel([reply("", call("c1", "slow")), "gave up on slow"])
    result = run_agent("t", model, registry)
    release.set()
    assert result.status == "done"
    assert result.messages[3]["content"] == "ERROR: slow timed out after 0.05 s"
    assert result.answer == "gave up on slow"


def test_cancel_before_start_calls_nothing() -> None:
    cancel = threading.Event()
    cancel.set()
    model = ScriptedModel(["never"])
    result = run_agent("t", model, ToolRegistry(), cancel=cancel)
    assert result.status == "cancelled"
    assert model.calls == 0
    assert result.steps == 0
    assert result.error == "cancelled by the caller"
    assert [m["role"] for m in result.messages] == ["system", "user"]


def test_cancel_while_waiting_on_the_model() -> None:
    cancel, release, returned = threading.Event(), threading.Event(), threading.Event()

    def model(messages: Any, specs: Any) -> ModelReply:
        cancel.set()  # while the run waits on this call
        release.wait(30)
        returned.set()
        return ModelReply("late")

    result = run_agent("t", model, ToolRegistry(), cancel=cancel)
    assert not returned.is_set()  # the cancel ended the wait with the model still hanging
    release.set()
    assert result.status == "cancelled"
    assert result.error == "cancelled by the caller while waiting on the model"


def test_cancel_while_waiting_on_a_tool() -> None:
    cancel = threading.Event()
    release = threading.Event()
    registry = ToolRegistry()

    def hang() -> bool:
        cancel.set()  # while the run waits on this call
        return release.wait(30)

    registry.register("hang", "never returns", {"type": "object"}, hang)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "hang"))]), registry, cancel=cancel)
    release.set()
    assert result.status == "cancelled"
    assert result.error == "cancelled by the caller while waiting on tool hang"


def test_context_budget_stops_before_the_next_model_call() -> None:
    registry = ToolRegistry()
    registry.register("big", "big", {"type": "object"}, lambda: "x" * 500)
    model = ScriptedModel([reply("", call("c1", "big")), "done"])
    result = run_agent("t", model, registry, max_context_chars=300, system="s")
    assert result.status == "context_budget"
    assert model.calls == 1
    assert result.error == "context holds 506 characters (max_context_chars=300)"


def test_output_budget_stops_without_running_the_calls() -> None:
    calls = Calls()
    model = ScriptedModel([reply("y" * 50, call("c1", "get_weather", city="Paris"))])
    result = run_agent("t", model, weather_registry(calls), max_output_chars=40)
    assert result.status == "output_budget"
    assert calls.log == []
    assert result.error == "reply of 67 characters (max_output_chars=40); its calls were not run"


def test_long_observation_is_cut_with_a_marker() -> None:
    registry = ToolRegistry()
    registry.register("big", "big", {"type": "object"}, lambda: "a" * 100)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "big")), "ok"]), registry, max_result_chars=10)
    assert result.messages[3]["content"] == '"aaaaaaaaa... [cut: 92 more characters]'


def test_a_failed_call_whose_observation_is_cut_short_of_its_error_prefix_is_still_logged_failed() -> None:
    registry = ToolRegistry()

    def broken() -> None:
        raise RuntimeError("disk full")

    registry.register("broken", "broken", {"type": "object"}, broken)
    facts: list[Any] = []

    class Facts(NullRecorder):
        def record(self, event: Any) -> None:
            facts.append(event)

    result = run_agent("t", ScriptedModel([reply("", call("c1", "broken")), "ok"]), registry, max_result_chars=4,
                       recorder=Facts())
    finished = [f for f in facts if isinstance(f, ToolFinished)]
    assert [(f.observation[:7], f.ok) for f in finished] == [("ERRO...", False)]
    assert result.messages[3]["content"].startswith("ERRO... [cut: ")


def test_third_identical_consecutive_call_is_not_run() -> None:
    calls = Calls()
    model = ScriptedModel([reply("", call(f"c{i}", "get_weather", city="Paris")) for i in range(4)] + ["stop"])
    result = run_agent("t", model, weather_registry(calls), max_steps=10)
    assert calls.names() == ["get_weather", "get_weather"]
    tool_msgs = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert tool_msgs[:2] == ['{"celsius": 21}', '{"celsius": 21}']
    assert tool_msgs[2] == tool_msgs[3] == (
        "ERROR: get_weather was already called 2 times in a row with these same arguments and was not run "
        "again. Change course: use different arguments or another tool, or give your final answer.")
    assert result.tool_calls == 2
    assert result.status == "done"


def test_a_different_call_resets_the_repeat_guard() -> None:
    calls = Calls()
    seq = ["Paris", "Paris", "Oslo", "Paris", "Paris"]
    model = ScriptedModel([reply("", call(f"c{i}", "get_weather", city=c)) for i, c in enumerate(seq)] + ["ok"])
    run_agent("t", model, weather_registry(calls), max_steps=10)
    assert len(calls.log) == 5


def test_duplicate_call_id_stops_before_any_call_of_that_reply() -> None:
    calls = Calls()
    model = ScriptedModel([
        reply("", call("same", "get_weather", city="Paris")),
        reply("", call("fresh", "get_weather", city="Oslo"), call("same", "c_to_f", celsius=1)),
    ])
    result = run_agent("t", model, weather_registry(calls))
    assert result.status == "invalid_reply"
    assert result.error == "duplicate call id 'same'"
    assert calls.log == [("get_weather", {"city": "Paris"})]
    assert len(result.messages) == 4


def test_duplicate_call_id_within_one_reply_is_invalid() -> None:
    model = ScriptedModel([reply("", call("x", "get_weather", city="Paris"), call("x", "c_to_f", celsius=1))])
    result = run_agent("t", model, weather_registry())
    assert (result.status, result.error) == ("invalid_reply", "duplicate call id 'x'")


def test_model_returning_something_else_is_an_invalid_reply() -> None:
    result = run_agent("t", lambda m, s: "plain text", ToolRegistry())  # type: ignore[arg-type]
    assert result.status == "invalid_reply"
    assert result.error == "model returned str, expected ModelReply"


def test_cut_off_reply_is_not_a_final_answer() -> None:
    model = ScriptedModel([ModelReply("The answer is", stop_reason="length")])
    result = run_agent("t", model, ToolRegistry())
    assert result.status == "invalid_reply"
    assert result.answer is None
    assert result.error == "reply was cut off at the output token limit (stop_reason 'length')"
    assert result.messages[-1]["content"] == "The answer is"


def test_raising_model_is_a_model_error_with_the_exception() -> None:
    def model(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down")

    result = run_agent("t", model, ToolRegistry())
    assert result.status == "model_error"
    assert result.error == "ConnectionError: api down"
    assert isinstance(result.exception, ConnectionError)


def test_overcalled_scripted_model_is_a_model_error() -> None:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))])
    result = run_agent("t", model, weather_registry())
    assert result.status == "model_error"
    assert result.error == "ScriptExhausted: scripted model called 2 times but holds only 1 reply"


def test_tool_needing_approval_waits_when_nobody_answers() -> None:
    ran: list[str] = []
    registry = ToolRegistry()
    registry.register("pay", "pay", {"type": "object"}, lambda: ran.append("pay"), needs_approval=True)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "pay"))]), registry)
    assert result.status == "awaiting_approval"
    assert result.error == "call c1 (pay) needs approval"
    assert ran == []


def test_approver_denial_becomes_an_observation() -> None:
    ran: list[str] = []
    registry = ToolRegistry()
    registry.register("pay", "pay", {"type": "object"}, lambda: ran.append("pay"), needs_approval=True)
    seen: list[ToolCall] = []

    def approve(c: ToolCall) -> bool:
        seen.append(c)
        return False

    result = run_agent("t", ScriptedModel([reply("", call("c1", "pay")), "ok"]), registry, approve=approve)
    assert result.status == "done"
    assert ran == []
    assert seen == [ToolCall("c1", "pay", {})]
    assert result.messages[3]["content"] == "ERROR: the call to pay was denied by the approver; do not retry it"


def test_raise_for_status() -> None:
    done = run_agent("t", ScriptedModel(["fine"]), ToolRegistry())
    assert done.raise_for_status() is done
    stopped = run_agent("t", ScriptedModel(["x"]), ToolRegistry(), max_steps=0)
    with pytest.raises(AgentStopped) as info:
        stopped.raise_for_status()
    assert info.value.status == "step_limit"
    assert info.value.reason == "made 0 model calls (max_steps=0)"
    assert str(info.value) == f"run {stopped.run_id} stopped with step_limit: made 0 model calls (max_steps=0)"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_steps": -1}, "max_steps must be a non-negative integer, got -1"),
    ({"timeout_s": 0}, "timeout_s must be positive or None, got 0"),
    ({"token_budget": True}, "token_budget must be a non-negative integer, got True"),
    # None is no value for the limits that always apply (it raised TypeError deep in the loop)
    ({"max_steps": None}, "max_steps must be a non-negative integer, got None"),
    ({"token_budget": None}, "token_budget must be a non-negative integer, got None"),
    ({"max_identical_calls": None}, "max_identical_calls must be a non-negative integer, got None"),
    ({"timeout_s": "5"}, "timeout_s must be positive or None, got '5'"),
    ({"max_tool_calls": 1.5}, "max_tool_calls must be a non-negative integer or None, got 1.5"),
])
def test_bad_limits_raise_at_call_time(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        run_agent("t", ScriptedModel([]), ToolRegistry(), **kwargs)


def test_non_json_tool_result_is_an_error_observation() -> None:
    registry = ToolRegistry()
    registry.register("s", "set", {"type": "object"}, lambda: {1, 2})
    result = run_agent("t", ScriptedModel([reply("", call("c1", "s")), "ok"]), registry)
    assert result.messages[3]["content"] == (
        "ERROR: s returned a value that is not JSON-serialisable: TypeError: Object of type set is not JSON "
        "serializable")


def test_a_circular_tool_result_is_an_error_observation_and_the_run_goes_on() -> None:
    def looped() -> dict[str, Any]:
        value: dict[str, Any] = {}
        value["self"] = value
        return value

    registry = ToolRegistry()
    registry.register("loop", "A value that holds itself.", {"type": "object"}, looped)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "loop")), "ok"]), registry)
    assert (result.status, result.answer) == ("done", "ok")
    assert result.messages[3]["content"] == (
        "ERROR: loop returned a value that is not JSON-serialisable: ValueError: Circular reference detected")


def test_a_tool_that_edits_its_arguments_cannot_rewrite_the_history() -> None:
    registry = ToolRegistry()

    def grow(items: list[str]) -> int:
        items.append("x" * 100)
        return len(items)

    registry.register("grow", "d", {"type": "object", "properties": {"items": {"type": "array"}}}, grow)
    model = ScriptedModel([reply("", call("c1", "grow", items=["a"])), "ok"])
    result = run_agent("t", model, registry)
    assistant = result.messages[2]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["args"] == {"items": ["a"]}
    assert result.messages[3]["content"] == "2"
    assert model.replies[0].tool_calls[0].args == {"items": ["a"]}


def test_a_refused_call_breaks_a_run_of_identical_calls() -> None:
    calls = Calls()
    model = ScriptedModel([
        reply("", call("c1", "get_weather", city="Paris")), reply("", call("c2", "get_weather", city="Paris")),
        reply("", call("c3", "nope")), reply("", call("c4", "get_weather", city="Paris")), "done"])
    result = run_agent("t", model, weather_registry(calls), max_steps=10)
    assert calls.names() == ["get_weather"] * 3
    assert result.messages[-2]["content"] == '{"celsius": 21}'


def test_a_reply_with_malformed_usage_is_an_invalid_reply() -> None:
    model = ScriptedModel([ModelReply("hi", [], Usage(12, None))])  # type: ignore[arg-type]
    result = run_agent("t", model, ToolRegistry())
    assert result.status == "invalid_reply"
    assert result.error == ("reply usage must be Usage(input_tokens, output_tokens) of non-negative ints, "
                            "got Usage(input_tokens=12, output_tokens=None)")


def test_an_approver_that_raises_closes_the_run_then_propagates() -> None:
    from runner.events import RunFinished
    from runner.recorder import NullRecorder

    finished: list[Any] = []

    class Spy(NullRecorder):
        def record(self, event: Any) -> None:
            if isinstance(event, RunFinished):
                finished.append(event)

    registry = ToolRegistry()
    registry.register("pay", "pay", {"type": "object"}, lambda: 1, needs_approval=True)

    def approve(c: ToolCall) -> bool:
        raise RuntimeError("approval service down")

    with pytest.raises(RuntimeError, match="approval service down"):
        run_agent("t", ScriptedModel([reply("", call("c1", "pay"))]), registry, approve=approve, recorder=Spy())
    assert [(r.status, r.error) for r in finished] == [
        ("cancelled", "aborted by RuntimeError: approval service down")]


def test_ctrl_c_in_the_model_closes_the_run_then_propagates() -> None:
    from runner.events import RunFinished
    from runner.recorder import NullRecorder

    finished: list[Any] = []

    class Spy(NullRecorder):
        def record(self, event: Any) -> None:
            if isinstance(event, RunFinished):
                finished.append(event)

    def model(messages: Any, specs: Any) -> ModelReply:
        raise KeyboardInterrupt

    for timeout_s in (None, 5.0):  # the model called inline, then on a worker thread
        with pytest.raises(KeyboardInterrupt):
            run_agent("t", model, ToolRegistry(), recorder=Spy(), timeout_s=timeout_s)
    assert [(r.status, r.error) for r in finished] == [("cancelled", "aborted by KeyboardInterrupt")] * 2


def test_a_cut_off_reply_does_not_run_its_calls() -> None:
    calls = Calls()
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})], stop_reason="length")])
    result = run_agent("t", model, weather_registry(calls))
    assert (result.status, calls.log) == ("invalid_reply", [])
    assert result.error == "reply was cut off at the output token limit (stop_reason 'length'); its calls were not run"


@pytest.mark.parametrize("run_id", ["", "a b", "job-\x1b[2J", "x" * 129, "été", "a/b", "..", ".", ".x",
                                    "x/../victim", "a\\b", "q?x", "h#x", "$(id>x)", "a%2Fb"])
def test_a_run_id_must_be_letters_digits_dots_underscores_and_dashes(run_id: str) -> None:
    with pytest.raises(ValueError, match=r"^run_id must be 1 to 128 of the characters A-Z a-z 0-9 \. _ - and not "
                                         r"start with '\.', got "):
        run_agent("t", ScriptedModel(["ok"]), ToolRegistry(), run_id=run_id)


@pytest.mark.parametrize("run_id", ["a", "x" * 128, "job-2024.01_retry", "-x", "_", "a..b"])
def test_a_run_id_of_the_allowed_characters_is_taken_as_given(run_id: str) -> None:
    assert run_agent("t", ScriptedModel(["ok"]), ToolRegistry(), run_id=run_id).run_id == run_id
