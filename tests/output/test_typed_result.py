"""output_type=: the final_result tool, its check, retries under max_output_retries, and the result."""

from __future__ import annotations

from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, Status, ToolCall, ToolRegistry, run_agent
from runner._log.state import fold
from runner._text import plural
from runner.events import OutputRejected, RunFinished, ToolFinished
from runner.store import RunStore
from tests.loop.helpers import Calls, weather_registry
from tests.output.helpers import INVOICE_SCHEMA, Invoice, InvoiceData, InvoiceDict, SpecModel, final


@pytest.mark.parametrize(("output_type", "expected"), [
    (Invoice, Invoice(total=12.5, currency="EUR")),
    (InvoiceData, InvoiceData(12.5, "EUR")),
    (InvoiceDict, {"total": 12.5, "currency": "EUR"}),
    (INVOICE_SCHEMA, {"total": 12.5, "currency": "EUR"}),
], ids=["pydantic", "dataclass", "typeddict", "schema"])
def test_each_kind_of_type_comes_back_validated(output_type: Any, expected: Any) -> None:
    model = SpecModel([final("c1", total=12.5, currency="EUR")])
    result = run_agent("bill", model, weather_registry(), output_type=output_type)
    assert (result.status, result.output, result.steps) == (Status.DONE, expected, 1)
    assert type(result.output) is type(expected)
    assert result.answer == '{"total": 12.5, "currency": "EUR"}'
    offered = {spec["name"]: spec for spec in model.specs[0]}
    assert sorted(offered) == ["c_to_f", "final_result", "get_weather"]
    assert sorted(offered["final_result"]["parameters"]["properties"]) == ["currency", "total"]
    assert offered["final_result"]["parameters"]["required"] == ["total", "currency"]


def test_a_run_without_output_type_is_offered_no_final_result() -> None:
    model = SpecModel(["plain answer"])
    result = run_agent("hi", model, weather_registry())
    assert (result.status, result.answer, result.output) == (Status.DONE, "plain answer", None)
    assert [spec["name"] for spec in model.specs[0]] == ["get_weather", "c_to_f"]


def test_invalid_arguments_are_shown_naming_the_field_and_retried() -> None:
    model = ScriptedModel([final("c1", total=-1, currency="EUR"), final("c2", total=3, currency="EUR")])
    result = run_agent("bill", model, ToolRegistry(), output_type=Invoice)
    assert (result.status, result.output) == (Status.DONE, Invoice(total=3, currency="EUR"))
    shown = model.seen[1][-1]
    assert shown["role"] == "tool"
    assert shown["tool_call_id"] == "c1"
    assert shown["content"].startswith("ERROR: argument 'total' must be >= 0")


def test_pydantic_own_rules_are_checked_after_the_schema() -> None:
    from pydantic import BaseModel, field_validator

    class Code(BaseModel):
        code: str

        @field_validator("code")
        @classmethod
        def upper(cls, value: str) -> str:
            if value != value.upper():
                raise ValueError("must be upper case")
            return value

    model = ScriptedModel([final("c1", code="eur"), final("c2", code="EUR")])
    result = run_agent("code", model, ToolRegistry(), output_type=Code)
    assert result.output == Code(code="EUR")
    assert model.seen[1][-1]["content"].startswith("ERROR: argument 'code' is invalid: Value error, must be upper case")


def test_a_schema_dict_is_checked_with_the_registry_full_json_schema() -> None:
    model = ScriptedModel([final("c1", total=1, currency="E"), final("c2", total=1, currency="EUR")])
    result = run_agent("bill", model, ToolRegistry(), output_type=INVOICE_SCHEMA)
    assert result.output == {"total": 1, "currency": "EUR"}
    assert "currency" in model.seen[1][-1]["content"]
    assert "minLength" in model.seen[1][-1]["content"]


def test_plain_text_is_shown_naming_final_result_and_retried() -> None:
    model = ScriptedModel(["the total is 12", final("c1", total=12, currency="EUR")])
    result = run_agent("bill", model, ToolRegistry(), output_type=Invoice)
    assert (result.status, result.steps) == (Status.DONE, 2)
    told = model.seen[1][-1]
    assert told["role"] == "user"
    assert "final_result" in told["content"]
    assert told["content"].startswith("ERROR:")


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_past_max_output_retries_the_run_ends_invalid_output_after_n_plus_1_failures(retries: int) -> None:
    bad = [final(f"c{i}", total="x", currency="EUR") if i % 2 else "plain" for i in range(retries + 1)]
    model = ScriptedModel([*bad, final("never", total=1, currency="EUR")])
    result = run_agent("bill", model, ToolRegistry(), output_type=Invoice, max_output_retries=retries, max_steps=20)
    assert result.status == Status.INVALID_OUTPUT
    assert (model.calls, result.steps, result.output, result.answer) == (retries + 1, retries + 1, None, None)
    assert result.error == f"{plural(retries + 1, 'failed attempt')} at the typed result (max_output_retries={retries})"


def test_other_calls_in_the_reply_run_first_then_the_output_is_taken() -> None:
    calls = Calls()
    both = ModelReply("", [ToolCall("w", "get_weather", {"city": "Oslo"}),
                           ToolCall("f", "final_result", {"total": 1, "currency": "NOK"})])
    result = run_agent("bill", ScriptedModel([both]), weather_registry(calls), output_type=Invoice,
                       max_parallel_tools=1)
    assert calls.names() == ["get_weather"]
    assert (result.status, result.output, result.tool_calls) == (Status.DONE, Invoice(total=1, currency="NOK"), 1)
    assert [m["role"] for m in result.messages[-2:]] == ["tool", "tool"]


def test_a_non_object_type_is_wrapped_in_result() -> None:
    model = SpecModel([final("c1", result=[1, 2, 3])])
    result = run_agent("count", model, ToolRegistry(), output_type=list[int])
    assert result.output == [1, 2, 3]
    parameters = model.specs[0][-1]["parameters"]
    assert parameters["required"] == ["result"]
    assert parameters["properties"]["result"]["type"] == "array"


def test_a_registry_with_its_own_final_result_is_refused() -> None:
    registry = ToolRegistry()
    registry.register("final_result", "mine", {"type": "object", "properties": {}}, lambda: 1)
    with pytest.raises(ValueError, match="registry has a tool named 'final_result'"):
        run_agent("x", ScriptedModel([]), registry, output_type=Invoice)


@pytest.mark.parametrize("bad", ["nonsense", 3, {"type": "object", "properties": {"x": {"type": "strin"}}}])
def test_an_unusable_output_type_is_a_one_line_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="output") as caught:
        run_agent("x", ScriptedModel([]), ToolRegistry(), output_type=bad)
    assert "\n" not in str(caught.value)


def test_the_output_and_each_failed_attempt_are_facts_in_the_log(store: RunStore) -> None:
    model = ScriptedModel(["plain", final("c1", total="x", currency="EUR"), final("c2", total=2, currency="EUR")])
    result = run_agent("bill", model, ToolRegistry(), output_type=Invoice, store=store)
    run = store.get_run(result.run_id)
    assert run.output == {"total": 2.0, "currency": "EUR"}
    rejected = [fact for fact in run.facts if isinstance(fact, OutputRejected)]
    assert [(fact.step, fact.call_id) for fact in rejected] == [(1, None), (2, "c1")]
    accepted = [fact for fact in run.facts if isinstance(fact, ToolFinished) and fact.call_id == "c2"]
    assert [(fact.refused, fact.ran, fact.ok) for fact in accepted] == [(None, True, True)]
    finished = [fact for fact in run.facts if isinstance(fact, RunFinished)]
    assert finished[-1].output == {"total": 2.0, "currency": "EUR"}
    state = fold(run.facts, run.run_id)
    assert (state.output_failures, state.output, state.output_schema is not None) == (2, run.output, True)
    assert state.output_schema is not None
    assert state.output_schema["ref"] is None


def test_an_accepted_final_result_is_neither_a_tool_call_run_nor_a_refused_one(store: RunStore) -> None:
    result = run_agent("bill", ScriptedModel([final("c1", total=2, currency="EUR")]), ToolRegistry(),
                       output_type=Invoice, store=store)
    assert result.tool_calls == 0
    assert store.refused_calls([result.run_id]) == {result.run_id: 0}


@pytest.mark.parametrize(("args", "told"), [
    ("str", "ERROR: arguments must be a JSON object, got a string"),
    ([1], "ERROR: arguments must be a JSON object, got an array"),
    ({"total": 1, "currency": "EUR", "extra": 1}, "ERROR: unexpected argument 'extra'"),
    ({"currency": "EUR"}, "ERROR: missing required argument 'total'"),
])
def test_final_result_arguments_of_any_shape_are_refused_with_what_is_wrong(args: Any, told: str) -> None:
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "final_result", args)])])
    result = run_agent("bill", model, ToolRegistry(), output_type=Invoice, max_output_retries=0)
    assert (result.status, result.output) == (Status.INVALID_OUTPUT, None)
    assert result.messages[-1]["content"].startswith(told)


def test_a_wrapped_result_names_the_item_that_is_wrong() -> None:
    model = ScriptedModel([final("c1", result=[1, "x"]), final("c2", result=[1, 2])])
    result = run_agent("count", model, ToolRegistry(), output_type=list[int])
    assert result.output == [1, 2]
    assert model.seen[1][-1]["content"].startswith("ERROR: argument 'result[1]' must be of type integer")
