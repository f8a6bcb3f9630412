"""The kept encoders write exactly what ``json.dumps`` writes, errors included, without
building an encoder per call."""

from __future__ import annotations

import json
import math
from json import encoder as stdlib_encoder
from typing import Any

import pytest

from runner import _jsontext


class Tagged(int):
    pass


class Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


VALUES: list[Any] = [
    {"role": "assistant", "content": "step 3", "tool_calls": [{"id": "c3", "name": "echo", "args": {"n": 3}}]},
    {"b": 1, "a": [1.5, -0.0, 1e300, True, False, None], "c": {"z": "", "y": "\u00e9\u4e2d\U0001f600"}},
    "lone \ud800 surrogate and \x00 nul and \"quotes\" \\ and \n newline",
    [math.nan, math.inf, -math.inf],
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    Tagged(7),
    [],
    {},
    12345678901234567890,
    [[[[{"deep": [1, 2, 3]}]]]],
]

CASES = [
    (_jsontext.standard, {}),
    (_jsontext.sorted_keys, {"sort_keys": True}),
    (_jsontext.compact, {"separators": (",", ":"), "default": repr}),
]


@pytest.mark.parametrize(("encode", "options"), CASES, ids=["standard", "sorted_keys", "compact"])
@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_each_kept_encoder_writes_the_text_json_dumps_writes(encode: Any, options: dict[str, Any], value: Any) -> None:
    assert outcome(encode, value) == outcome(lambda v: json.dumps(v, **options), value)


def outcome(encode: Any, value: Any) -> tuple[str, str]:
    """The text, or the error's type and message (mixed key types cannot be sorted)."""
    try:
        return "text", encode(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


FINITE = [v for v in VALUES if v != [math.nan, math.inf, -math.inf]]


@pytest.mark.parametrize("value", FINITE, ids=range(len(FINITE)))
def test_the_strict_encoder_writes_what_json_dumps_writes_without_nan(value: Any) -> None:
    assert _jsontext.strict(value) == json.dumps(value, allow_nan=False)


def test_the_strict_encoder_refuses_nan_with_the_standard_message() -> None:
    assert outcome(_jsontext.strict, {"x": [math.nan]}) == outcome(lambda v: json.dumps(v, allow_nan=False),
                                                                  {"x": [math.nan]})
    assert outcome(_jsontext.strict, [math.nan])[0] == "ValueError"


def test_a_value_that_is_not_json_fails_as_json_dumps_fails_and_compact_writes_its_repr() -> None:
    with pytest.raises(TypeError, match=r"^Object of type Opaque is not JSON serializable$"):
        _jsontext.standard({"x": Opaque()})
    assert _jsontext.compact({"x": Opaque(), "y": {1, 2} - {1, 2}}) == '{"x":"<opaque>","y":"set()"}'


@pytest.mark.parametrize("encode", [_jsontext.standard, _jsontext.sorted_keys, _jsontext.strict, _jsontext.compact],
                         ids=["standard", "sorted_keys", "strict", "compact"])
def test_a_circular_value_raises_the_standard_circular_reference_error(encode: Any) -> None:
    looped: dict[str, Any] = {"a": [1]}
    looped["a"].append(looped)
    with pytest.raises(ValueError, match=r"^Circular reference detected$"):
        encode(looped)
    assert encode({"after": "the error"}).replace(" ", "") == '{"after":"theerror"}'  # nothing left behind


def test_encoding_builds_no_encoder_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    original = getattr(stdlib_encoder, "c_make_encoder", None)
    assert original is not None  # CPython: the C accelerator is what the kept encoders keep

    def counting(*args: Any) -> Any:
        built.append(1)
        return original(*args)

    monkeypatch.setattr(stdlib_encoder, "c_make_encoder", counting)
    for n in range(10):
        assert _jsontext.compact({"n": n}) == f'{{"n":{n}}}'
        assert _jsontext.standard([n]) == f"[{n}]"
    assert built == []
    assert json.JSONEncoder().encode({"n": 1}) == '{"n": 1}'
    assert built == [1]  # the standard library's own encoder does build one
