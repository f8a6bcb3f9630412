"""validate_args and the schema check at register: exact sentences, never an exception."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner import ToolRegistry, validate_args

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RICH = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}, "name": {"type": "string"}},
                  "required": ["lat"]},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "note": {"type": ["string", "null"]},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
    },
}


@pytest.mark.parametrize(("args", "expected"), [
    ({"city": "Paris"}, None),
    ([], "arguments must be a JSON object, got an array"),
    (None, "arguments must be a JSON object, got null"),
    ({}, "missing required argument 'city'"),
    ({"city": "Paris", "unit": "c"}, "unexpected argument 'unit'"),
    ({"city": 3}, "argument 'city' must be of type string"),
])
def test_weather_schema_sentences(args: Any, expected: str | None) -> None:
    assert validate_args(args, WEATHER) == expected


@pytest.mark.parametrize(("args", "expected"), [
    ({"tags": ["a", "b"], "where": {"lat": 1.5}, "unit": "f", "note": None, "count": 2, "flag": False}, None),
    ({"tags": ["a", 2]}, "argument 'tags[1]' must be of type string"),
    ({"tags": "a"}, "argument 'tags' must be of type array"),
    ({"where": {}}, "missing required argument 'where.lat'"),
    ({"where": {"lat": 1, "x": 2}}, "unexpected argument 'where.x'"),
    ({"where": {"lat": "1"}}, "argument 'where.lat' must be of type number"),
    ({"unit": "k"}, 'argument \'unit\' must be one of ["c", "f"]'),
    ({"note": 3}, "argument 'note' must be of type string or null"),
    ({"count": 1.5}, "argument 'count' must be of type integer"),
    ({"count": True}, "argument 'count' must be of type integer"),
    ({"flag": 0}, "argument 'flag' must be of type boolean"),
])
def test_beyond_the_minimum_arrays_objects_enum_null(args: Any, expected: str | None) -> None:
    assert validate_args(args, RICH) == expected


@pytest.mark.parametrize("value", [True, False])
def test_bool_is_never_a_number_or_integer(value: bool) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}}
    assert validate_args({"n": value}, schema) == "argument 'n' must be of type number"
    assert validate_args({"i": value}, schema) == "argument 'i' must be of type integer"


def test_a_schema_without_properties_takes_no_arguments() -> None:
    assert validate_args({}, {"type": "object"}) is None
    assert validate_args({"x": 1}, {"type": "object"}) == "unexpected argument 'x'"


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "properties": {"p": {"type": "tuple"}}},
     "tool 't': parameters.p: unsupported type 'tuple'"),
    ({"type": "object", "properties": {"p": {"type": "array", "items": {"type": "set"}}}},
     "tool 't': parameters.p[]: unsupported type 'set'"),
    ({"type": "object", "properties": {"p": {"type": "string", "patern": "^a"}}},  # a typo, never ignored
     "tool 't': parameters.p: unsupported schema keyword 'patern'"),
    ({"type": "object", "required": ["city"]}, "tool 't': parameters: required argument 'city' is not in 'properties'"),
    ({"type": "object", "properties": {"p": {}}}, "tool 't': parameters.p: missing 'type' (one of string, integer, "
                                                   "number, boolean, null, array, object)"),
    ({"type": "string"}, "tool 't': parameters must have type 'object'"),
    ({"type": "object", "additionalProperties": True},
     "tool 't': parameters: unsupported 'additionalProperties' other than false (unknown arguments are always "
     "rejected)"),
])
def test_unsupported_schemas_fail_at_register(schema: dict[str, Any], message: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        registry.register("t", "d", schema, lambda **kw: None)
    assert len(registry) == 0


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


@given(json_like)
def test_validate_args_never_raises_on_arbitrary_json(args: Any) -> None:
    for schema in (WEATHER, RICH, {"type": "object"}):
        result = validate_args(args, schema)
        assert result is None or isinstance(result, str)


@given(json_like)
def test_execute_never_raises_and_always_returns_text(args: Any) -> None:
    registry = ToolRegistry()
    registry.register("rich", "d", RICH, lambda **kw: sorted(kw))
    out = registry.execute("rich", args)
    assert isinstance(out, str)
    if validate_args(args, RICH) is None:
        assert out.startswith("[")
    else:
        assert out.startswith("ERROR: ")


@given(st.booleans())
def test_bool_never_passes_as_number_property(value: bool) -> None:
    assert validate_args({"celsius": value}, {"type": "object", "properties": {"celsius": {"type": "number"}}}) \
        == "argument 'celsius' must be of type number"
