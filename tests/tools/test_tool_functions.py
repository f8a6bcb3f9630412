"""@registry.tool: a typed function becomes a tool; its hints are the schema, its docstring the descriptions."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, arun_agent, run_agent


def weather_tools() -> tuple[ToolRegistry, list[tuple[str, float, str | None]]]:
    registry = ToolRegistry()
    ran: list[tuple[str, float, str | None]] = []

    @registry.tool
    def forecast(city: str, days: float, unit: Literal["c", "f"] = "c", note: str | None = None) -> dict[str, Any]:
        """Forecast for a city.

        Looks a few days ahead.

        Args:
            city: The city, as its English name.
            days: How far ahead, in days
                (fractions allowed).
            unit: Celsius or Fahrenheit.
        """
        ran.append((city, days, note))
        return {"city": city, "days": days, "unit": unit}

    return registry, ran


def test_a_typed_function_with_a_google_docstring_gets_the_right_schema() -> None:
    registry, _ = weather_tools()
    assert registry.specs() == [{
        "name": "forecast",
        "description": "Forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, as its English name."},
                "days": {"type": "number", "description": "How far ahead, in days (fractions allowed)."},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "Celsius or Fahrenheit."},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    }]


@pytest.mark.parametrize(("args", "expected"), [
    ({"days": 2}, "ERROR: missing required argument 'city'"),
    ({"city": "Oslo", "days": "2"}, "ERROR: argument 'days' must be of type number"),
    ({"city": "Oslo", "days": True}, "ERROR: argument 'days' must be of type number"),
    ({"city": "Oslo", "days": 2, "unit": "k"}, "ERROR: argument 'unit' must be one of [\"c\", \"f\"]"),
    ({"city": "Oslo", "days": 2, "note": 3}, "ERROR: argument 'note' must be of type string or null"),
    ({"city": "Oslo", "days": 2, "hours": 3}, "ERROR: unexpected argument 'hours'"),
])
def test_bad_calls_to_a_decorated_tool_are_error_observations(args: dict[str, Any], expected: str) -> None:
    registry, ran = weather_tools()
    assert registry.execute("forecast", args).startswith(expected + ". forecast expects {")
    assert ran == []


def test_good_calls_to_a_decorated_tool_run_with_defaults_filled() -> None:
    registry, ran = weather_tools()
    assert registry.execute("forecast", {"city": "Oslo", "days": 2}) == '{"city": "Oslo", "days": 2.0, "unit": "c"}'
    assert registry.execute("forecast", {"city": "Rome", "days": 1.5, "note": "x"}) == (
        '{"city": "Rome", "days": 1.5, "unit": "c"}')
    assert ran == [("Oslo", 2.0, None), ("Rome", 1.5, "x")]


class Order(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1, description="How many.")]


def order_tools() -> tuple[ToolRegistry, list[Any]]:
    registry = ToolRegistry()
    received: list[Any] = []

    @registry.tool(side_effects=True, needs_approval=True, timeout_s=3, name="place_order",
                   idempotency_key="key")
    def place(order: Order, key: str) -> str:
        """Place an order."""
        received.append((order, key))
        return f"placed {order.quantity} x {order.sku}"

    return registry, received


def test_a_pydantic_model_parameter_arrives_as_an_instance() -> None:
    registry, received = order_tools()
    tool = registry.get("place_order")
    assert tool is not None
    assert tool.fn(order={"sku": "A1", "quantity": 2}, key="k1") == "placed 2 x A1"
    assert received == [(Order(sku="A1", quantity=2), "k1")]
    assert isinstance(received[0][0], Order)


def test_decorator_options_reach_the_tool_and_the_key_is_not_in_the_schema() -> None:
    registry, _ = order_tools()
    tool = registry.get("place_order")
    assert tool is not None
    assert (tool.name, tool.timeout_s, tool.side_effects, tool.needs_approval, tool.idempotency_key) == (
        "place_order", 3, True, True, "key")
    assert tool.parameters["properties"] == {"order": {"$ref": "#/$defs/Order"}}
    assert tool.parameters["required"] == ["order"]
    assert tool.parameters["$defs"]["Order"]["properties"]["quantity"] == {
        "type": "integer", "minimum": 1, "description": "How many."}


@pytest.mark.parametrize(("args", "expected"), [
    ({"order": {"sku": "A1", "quantity": 0}}, "ERROR: argument 'order.quantity' must be >= 1"),
    ({"order": {"sku": "A1"}}, "ERROR: missing required argument 'order.quantity'"),
    ({"order": {"sku": "A1", "quantity": 1, "x": 1}}, "ERROR: unexpected argument 'order.x'"),
    ({"order": "A1"}, "ERROR: argument 'order' must be of type object"),
    ({"order": {"sku": "A1", "quantity": 1}, "key": "forged"}, "ERROR: unexpected argument 'key'"),
])
def test_a_constraint_violation_in_a_model_parameter_is_an_error_observation(args: dict[str, Any],
                                                                              expected: str) -> None:
    registry, received = order_tools()
    assert registry.check("place_order", args) == (
        expected + ". place_order expects " + json.dumps({"order": {"$ref": "#/$defs/Order"}}))
    assert received == []


class Sku(BaseModel):
    code: str

    @field_validator("code")
    @classmethod
    def known(cls, code: str) -> str:
        if code != "A1":
            raise ValueError(f"unknown sku {code}")
        return code


def test_a_pydantic_validator_beyond_json_schema_is_an_error_observation_and_the_tool_does_not_run() -> None:
    registry = ToolRegistry()
    ran: list[Sku] = []

    @registry.tool
    def stock(sku: Sku) -> int:
        """Units in stock."""
        ran.append(sku)
        return 7

    assert registry.execute("stock", {"sku": {"code": "B2"}}).startswith(
        "ERROR: argument 'sku.code' is invalid: Value error, unknown sku B2. stock expects {")
    assert registry.execute("stock", {"sku": {"code": "A1"}}) == "7"
    assert ran == [Sku(code="A1")]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


def test_a_union_of_models_blames_no_branch_when_the_value_could_be_either() -> None:
    registry = ToolRegistry()

    @registry.tool
    def adopt(pet: Annotated[Cat | Dog, Field(discriminator="kind")]) -> str:
        """Adopt a pet."""
        return type(pet).__name__

    assert registry.execute("adopt", {"pet": {"kind": "dog", "good": True}}) == '"Dog"'
    as_cat = registry.check("adopt", {"pet": {"kind": "cat", "good": True}})
    assert as_cat is not None
    assert as_cat.startswith(
        'ERROR: argument \'pet\' must match exactly one of: {"$ref": "#/$defs/Cat"}; {"$ref": "#/$defs/Dog"}. ')
    as_number = registry.check("adopt", {"pet": 3})
    assert as_number is not None
    assert as_number.startswith("ERROR: argument 'pet' must be of type object. ")


def test_a_decorated_tool_runs_in_the_loop_and_returns_the_original_function() -> None:
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int = 1) -> int:
        """Add two integers."""
        return a + b

    assert add(2, 3) == 5  # the decorator hands back the function itself
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "add", {"a": 2}), ToolCall("c2", "add", {"a": "x"})]),
                           "done"])
    result = run_agent("add", model, registry)
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == [
        "3", "ERROR: argument 'a' must be of type integer. add expects " + json.dumps(
            {"a": {"type": "integer"}, "b": {"default": 1, "type": "integer"}})]


def test_a_decorated_coroutine_stays_a_coroutine_in_the_async_loop() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def double(n: int) -> int:
        """Double a number."""
        await asyncio.sleep(0)
        return 2 * n

    tool = registry.get("double")
    assert tool is not None
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "double", {"n": 21})]), "done"])
    result = asyncio.run(arun_agent("double", model, registry))
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["42"]


def test_annotated_field_descriptions_win_over_the_docstring() -> None:
    registry = ToolRegistry()

    @registry.tool(description="Look a word up.")
    def lookup(word: Annotated[str, Field(description="From Field.", min_length=2)]) -> str:
        """Ignored summary.

        Args:
            word: From the docstring.
        """
        return word

    assert registry.specs()[0]["description"] == "Look a word up."
    assert registry.specs()[0]["parameters"]["properties"] == {
        "word": {"type": "string", "minLength": 2, "description": "From Field."}}
    assert registry.execute("lookup", {"word": "a"}).startswith(
        "ERROR: argument 'word' must be at least 2 characters long. lookup expects")


def untyped(x):  # type: ignore[no-untyped-def]
    return x


def positional(x: int, /) -> int:
    return x


def documents_a_ghost(x: int) -> int:
    """Do it.

    Args:
        y: Not a parameter.
    """
    return x


def takes_any(x: Any) -> Any:
    return x


@pytest.mark.parametrize(("fn", "message"), [
    (untyped, "tool 'untyped': parameter 'x' has no type annotation"),
    (positional, "tool 'positional': parameter 'x' is positional-only; tools are called with keyword arguments"),
    (documents_a_ghost, "tool 'documents_a_ghost': the docstring documents 'y', which is not a parameter"),
    (takes_any, "tool 'takes_any': parameters.x: missing 'type' (one of string, integer, number, boolean, null, "
                "array, object)"),
])
def test_mistakes_in_a_decorated_function_fail_at_register_in_one_line(fn: Any, message: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        registry.tool(fn)
    assert len(registry) == 0


def test_the_idempotency_key_must_be_a_parameter_of_the_decorated_function() -> None:
    registry = ToolRegistry()

    def f(x: int) -> int:
        return x

    with pytest.raises(ValueError, match=r"^tool 'f': fn takes no keyword argument 'key' \(its idempotency_key\)$"):
        registry.tool(idempotency_key="key")(f)


def test_readme_tools_example_runs_and_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Tools"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme_tools"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "['city']"
    assert lines[1].startswith("ERROR: argument 'unit' must be one of [\"c\", \"f\"]. get_weather expects {")
    assert lines[2].startswith("ERROR: argument 'order.quantity' must be >= 1. place_order expects {")
