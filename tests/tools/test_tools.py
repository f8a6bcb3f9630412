"""ToolRegistry: the allow-list, the specs shown to the model, and execute's observations."""

from __future__ import annotations

import pytest

from runner import ToolRegistry
from tests.loop.helpers import Calls, weather_registry


def test_specs_never_include_the_function() -> None:
    specs = weather_registry().specs()
    assert specs[0] == {"name": "get_weather", "description": "Current temperature in a city.",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                       "required": ["city"]}}
    assert [sorted(s) for s in specs] == [["description", "name", "parameters"]] * 2


def test_execute_happy_path_is_the_json_of_the_result() -> None:
    calls = Calls()
    assert weather_registry(calls).execute("get_weather", {"city": "Oslo"}) == '{"celsius": -3}'
    assert calls.log == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("name", ["__class__", "register", "execute", "", "_tools", "specs"])
def test_attribute_names_are_unknown_tools(name: str) -> None:
    assert weather_registry().execute(name, {}) == (
        f"ERROR: unknown tool {name!r}. Available tools: ['c_to_f', 'get_weather']")


def test_execute_checks_in_order_name_args_function() -> None:
    registry = weather_registry()
    assert registry.execute("get_forecast", {"bad": 1}).startswith("ERROR: unknown tool 'get_forecast'")
    assert registry.execute("get_weather", {"bad": 1}) == (
        "ERROR: missing required argument 'city'. get_weather expects {\"city\": {\"type\": \"string\"}}")
    assert registry.execute("get_weather", {"city": "Atlantis"}) == "ERROR: get_weather failed: KeyError: 'Atlantis'"


def test_nan_result_is_not_valid_json_and_becomes_an_error() -> None:
    registry = ToolRegistry()
    registry.register("nan", "d", {"type": "object"}, lambda: float("nan"))
    assert registry.execute("nan", {}) == (
        "ERROR: nan returned a value that is not JSON-serialisable: ValueError: Out of range float values are "
        "not JSON compliant")


def test_register_rejects_duplicates_and_non_callables() -> None:
    registry = weather_registry()
    with pytest.raises(ValueError, match=r"^tool 'get_weather' is already registered$"):
        registry.register("get_weather", "d", {"type": "object"}, lambda: 1)
    with pytest.raises(ValueError, match=r"^tool 'x': fn must be callable$"):
        registry.register("x", "d", {"type": "object"}, "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^tool name must be a non-empty string$"):
        registry.register("", "d", {"type": "object"}, lambda: 1)
    with pytest.raises(ValueError, match=r"^tool 'x': timeout_s must be positive, got 0$"):
        registry.register("x", "d", {"type": "object"}, lambda: 1, timeout_s=0)


def test_registry_options_are_kept_on_the_tool() -> None:
    registry = ToolRegistry()
    tool = registry.register("w", "d", {"type": "object"}, lambda: 1, timeout_s=2.5, side_effects=True,
                             needs_approval=True)
    assert (tool.timeout_s, tool.side_effects, tool.needs_approval) == (2.5, True, True)
    assert registry.get("w") is tool
    assert "w" in registry
    assert registry.get(3) is None


def test_idempotent_is_a_trait_logged_only_when_set_for_registered_and_decorated_tools() -> None:
    registry = ToolRegistry()
    registry.register("put", "d", {"type": "object"}, lambda: 1, side_effects=True, idempotent=True)
    registry.register("pay", "d", {"type": "object"}, lambda: 1, side_effects=True)

    @registry.tool(side_effects=True, idempotent=True)
    def tag(name: str) -> str:
        """Tag a thing."""
        return name

    assert registry.traits() == {
        "put": {"side_effects": True, "needs_approval": False, "idempotency_key": None, "idempotent": True},
        "pay": {"side_effects": True, "needs_approval": False, "idempotency_key": None},
        "tag": {"side_effects": True, "needs_approval": False, "idempotency_key": None, "idempotent": True}}
    assert [registry.get(name).idempotent for name in ("put", "pay", "tag")] == [True, False, True]  # type: ignore[union-attr]
