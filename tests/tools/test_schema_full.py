"""Full JSON Schema 2020-12 for hand-written schemas: accepted, enforced, and never able to hang or crash a run."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
from pydantic import Field
from pydantic_core import SchemaValidator, core_schema

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent, validate_args
from runner._tools import schema_full
from runner._tools.schema_pattern import rust_pattern

BOOKING = {
    "type": "object",
    "$defs": {
        "guest": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1},
                                                   "email": {"type": "string", "format": "email"}},
                  "required": ["name"], "additionalProperties": False},
    },
    "properties": {
        "guests": {"type": "array", "items": {"$ref": "#/$defs/guest"}, "minItems": 1, "maxItems": 4},
        "room": {"type": "string", "pattern": "^[A-Z][0-9]{3}$"},
        "nights": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "const": "open"}]},
        "day": {"type": "string", "format": "date"},
        "extras": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
    "required": ["guests", "room"],
    "additionalProperties": False,
}
GOOD = {"guests": [{"name": "Ada", "email": "ada@example.org"}], "room": "B204", "nights": 2, "day": "2026-05-01",
        "extras": {"breakfast": True}}


def test_a_hand_written_full_schema_is_accepted_and_shown_unchanged() -> None:
    registry = ToolRegistry()
    registry.register("book", "Book a room.", BOOKING, lambda **kw: sorted(kw))
    assert registry.specs()[0]["parameters"] == BOOKING
    assert registry.execute("book", GOOD) == '["day", "extras", "guests", "nights", "room"]'
    assert validate_args({**GOOD, "nights": "open"}, BOOKING) is None


@pytest.mark.parametrize(("change", "expected"), [
    ({"guests": []}, "argument 'guests' must have at least 1 item"),
    ({"guests": [{"name": "a"}] * 5}, "argument 'guests' must have at most 4 items"),
    ({"guests": [{}]}, "missing required argument 'guests[0].name'"),
    ({"guests": [{"name": "a", "age": 3}]}, "unexpected argument 'guests[0].age'"),
    ({"guests": [{"name": ""}]}, "argument 'guests[0].name' must be at least 1 character long"),
    ({"guests": [{"name": "a", "email": "nope"}]}, "argument 'guests[0].email' must be a valid email"),
    ({"room": "b204"}, "argument 'room' must match the pattern '^[A-Z][0-9]{3}$'"),
    ({"nights": 0}, "argument 'nights' must be >= 1"),
    ({"nights": "two"}, "argument 'nights' must be \"open\""),
    ({"nights": None}, "argument 'nights' must be of type integer or string"),
    ({"day": "2026-13-01"}, "argument 'day' must be a valid date"),
    ({"extras": {"spa": "yes"}}, "argument 'extras.spa' must be of type boolean"),
    ({"room": 7}, "argument 'room' must be of type string"),
])
def test_a_hand_written_full_schema_is_enforced_with_one_sentence(change: dict[str, Any], expected: str) -> None:
    assert validate_args({**GOOD, **change}, BOOKING) == expected


def test_bad_arguments_against_a_full_schema_are_error_observations_in_a_run() -> None:
    registry = ToolRegistry()
    registry.register("book", "Book a room.", BOOKING, lambda **kw: "booked")
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "book", {**GOOD, "room": "x"}),
                                           ToolCall("c2", "book", GOOD)]), "ok"])
    result = run_agent("book", model, registry)
    observations = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert observations[0].startswith("ERROR: argument 'room' must match the pattern '^[A-Z][0-9]{3}$'. book expects {")
    assert observations[1] == '"booked"'
    assert result.status == "done"


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}},
     "tool 't': parameters: '$ref' '#/$defs/missing' does not resolve"),
    ({"type": "object", "properties": {"p": {"$ref": "https://example.org/s.json"}}},
     "tool 't': parameters.p: only local '$ref' (starting with '#') is supported, got 'https://example.org/s.json'"),
    ({"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
      "properties": {"p": {"$ref": "#/$defs/a"}}},
     "tool 't': parameters: '$ref' cycle through '#/$defs/a' never reaches into the arguments"),
    ({"type": "object", "properties": {"p": {"type": "string", "pattern": "(?=a)b"}}},
     "tool 't': parameters.p: pattern '(?=a)b' is not supported: look-around, including look-ahead and "
     "look-behind, is not supported"),
    ({"type": "object", "properties": {"p": {"type": "string", "pattern": "(a{1000}){1000}"}}},
     "tool 't': parameters.p: pattern '(a{1000}){1000}' is not supported: Compiled regex exceeds size limit of "
     "10485760 bytes."),
    ({"type": "object", "properties": {"p": {"type": "string", "format": "hostname"}}},
     "tool 't': parameters.p: unsupported format 'hostname' (checked: date, date-time, email, ipv4, ipv6, regex, "
     "time, uuid)"),
    ({"type": "object", "properties": {"p": {"type": "string", "minLength": -1}}},
     "tool 't': parameters: invalid JSON Schema at properties.p.minLength: -1 is less than the minimum of 0"),
    ({"type": "object", "properties": {"p": {"type": "object", "patternProperties": {"^a": {"type": "string"}}}}},
     "tool 't': parameters.p: unsupported schema keyword 'patternProperties' (its regexes would run unbounded; use "
     "'additionalProperties' with 'propertyNames' and a 'pattern')"),
    ({"type": "object", "properties": {"p": {"$dynamicRef": "#nowhere"}}},
     "tool 't': parameters: '$dynamicRef' '#nowhere' does not resolve"),
    ({"type": "object", "properties": {"p": {"$dynamicRef": "#/$defs/missing"}}},
     "tool 't': parameters: '$dynamicRef' '#/$defs/missing' does not resolve"),
    ({"type": "object", "$defs": {"a": {"$dynamicAnchor": "a", "$dynamicRef": "#a"}},
      "properties": {"p": {"$ref": "#/$defs/a"}}},
     "tool 't': parameters: '$dynamicRef' cycle through '#a' never reaches into the arguments"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
     "tool 't': parameters: only JSON Schema 2020-12 is supported, got '$schema' "
     "'http://json-schema.org/draft-07/schema#'"),
])
def test_invalid_or_unsafe_full_schemas_fail_at_register_in_one_line(schema: dict[str, Any], message: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        registry.register("t", "d", schema, lambda **kw: None)
    assert len(registry) == 0


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[object]:
    """The calls to ``schema_full``'s function ``name`` from here on, one entry each (the work, counted)."""
    calls: list[object] = []
    real = getattr(schema_full, name)

    def counting(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(schema_full, name, counting)
    return calls


def test_a_redos_prone_pattern_checks_in_linear_time() -> None:
    """A backtracking engine would take some 2**5000 steps on this: pytest-timeout's bound is the check."""
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": "^(a+)+$"}}}
    registry = ToolRegistry()
    registry.register("t", "d", schema, lambda p: p)
    assert validate_args({"p": "a" * 5000 + "!"}, schema) == "argument 'p' must match the pattern '^(a+)+$'"


def test_arguments_nested_past_the_recursion_limit_are_refused_not_a_crash() -> None:
    schema = {"type": "object", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
              "properties": {"tree": {"$ref": "#/$defs/n"}}}
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert validate_args({"tree": deep}, schema) == "arguments nest too deeply to check"


def test_an_exponential_schema_runs_out_of_budget_instead_of_hanging(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some 2**40 keyword evaluations would be needed; the check stops at its budget's end, counted."""
    branch = {"type": "array", "items": {"$ref": "#/$defs/n"}}
    schema = {"type": "object", "$defs": {"n": {"anyOf": [branch, branch, {"type": "integer", "minimum": 1}]}},
              "properties": {"tree": {"$ref": "#/$defs/n"}}}
    deep: Any = 0
    for _ in range(40):
        deep = [deep]
    spent = counted(monkeypatch, "_spend")
    assert validate_args({"tree": deep}, schema) == "arguments are too complex to check against this tool's schema"
    assert len(spent) == schema_full.BUDGET + 1  # the evaluation that found the budget spent stopped the check


def test_additional_properties_may_be_opened_below_the_top_level_only() -> None:
    schema = {"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": True}}}
    assert validate_args({"meta": {"anything": [1, {"x": None}]}}, schema) is None
    assert validate_args({"other": 1}, schema) == "unexpected argument 'other'"


def test_unique_items_is_checked_in_linear_time_with_json_equality(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    many = [{"i": i, "tags": [i, str(i)]} for i in range(20_000)]
    keyed = counted(monkeypatch, "_json_key")
    assert validate_args({"xs": many}, schema) is None
    assert len(keyed) == 5 * len(many)  # one key per value (the item, i, tags and its two), no pair compared
    assert validate_args({"xs": [*many, {"tags": [7, "7"], "i": 7}]}, schema) == (
        "argument 'xs' must not contain duplicate items")
    assert validate_args({"xs": [1, 1.0]}, schema) == "argument 'xs' must not contain duplicate items"
    assert validate_args({"xs": [1, True, {"a": 1}, {"a": True}]}, schema) is None


def test_a_self_referencing_schema_object_is_refused_not_a_crash() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["me"] = schema
    assert validate_args({"me": {}}, schema) == "arguments nest too deeply to check"
    with pytest.raises(ValueError, match=r"^tool 't': parameters: the schema nests too deeply$"):
        ToolRegistry().register("t", "d", schema, lambda **kw: None)


def test_a_dynamic_ref_that_resolves_is_enforced_through_its_anchor() -> None:
    items = {"anyOf": [{"type": "integer"}, {"$dynamicRef": "#node"}]}
    schema = {"type": "object", "$defs": {"tree": {"$dynamicAnchor": "node", "type": "array", "items": items}},
              "properties": {"t": {"$dynamicRef": "#node"}}}
    registry = ToolRegistry()
    registry.register("t", "d", schema, lambda t: len(t))
    assert registry.execute("t", {"t": [1, [2, [3]]]}) == "2"
    assert validate_args({"t": [1, ["x"]]}, schema) is not None
    assert validate_args({"t": "x"}, schema) == "argument 't' must be of type array"


EMAIL = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}, "required": ["to"]}


@pytest.mark.parametrize("address", [
    "ada@example.org", "joe.bloggs@example.com", "te~st@example.com", '"joe bloggs"@example.com',
    '"joe..bloggs"@example.com', "joe.bloggs@[127.0.0.1]", "joe.bloggs@[IPv6:::1]", "postmaster@localhost",
])
def test_a_valid_email_address_is_accepted(address: str) -> None:
    assert validate_args({"to": address}, EMAIL) is None


@pytest.mark.parametrize("address", [
    "ada@example.org\r\nBcc: eve@example.org", "ada@example.org\n", "ada\r@example.org", "ada@exa\x00mple.org",
    '"ada\r\n"@example.org', "ada example@example.org", ".ada@example.org", "ada..b@example.org", "ada@",
    "@example.org", "ada@-example.org", "ada@exa_mple.org", "ada@[127.0.0.300]", "ada@[IPv6:::12345]", "nope",
])
def test_an_email_address_with_a_line_break_or_outside_the_grammar_is_refused(address: str) -> None:
    assert validate_args({"to": address}, EMAIL) == "argument 'to' must be a valid email"
    registry = ToolRegistry()
    registry.register("send", "Send mail.", EMAIL, lambda to: "sent")
    assert registry.execute("send", {"to": address}).startswith("ERROR: argument 'to' must be a valid email")


@pytest.mark.parametrize(("pattern", "value", "matches"), [
    (r"^\d{4}$", "2026", True),
    (r"^\d{4}$", "\u0662\u0660\u0662\u0666", False),  # Arabic-Indic digits are not ECMA-262's \d
    (r"^[\d-]+$", "\u0661-\u0662", False),
    (r"^\D$", "\u0661", True),
    (r"^\w+$", "caf\u00e9", False),
    (r"^[\w.]+$", "a_b.c", True),
    (r"^\W$", "\u00e9", True),
    (r"^\s$", "\u0085", False),  # NEL is Unicode white space, not ECMA-262's
    (r"^\s$", "\ufeff", True),
    (r"^\S$", "\u0085", True),
    (r"\bid\b", "\u00e9id\u00e9", True),  # an ASCII word boundary
    (r"^.+$", "line\r", False),  # . stops at CR, LF, U+2028 and U+2029
    (r"^.+$", "line\u2028", False),
    (r"^[.]$", "\n", False),
])
def test_a_pattern_means_what_ecma_262_says(pattern: str, value: str, matches: bool) -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}
    ToolRegistry().register("t", "d", schema, lambda p: p)
    assert (validate_args({"p": value}, schema) is None) is matches
    names = {"type": "object", "properties": {"p": {"type": "object", "propertyNames": {"pattern": pattern},
                                                    "additionalProperties": {"type": "integer"}}}}
    assert (validate_args({"p": {value: 1}}, names) is None) is matches


def test_a_pattern_from_type_hints_means_what_ecma_262_says() -> None:
    registry = ToolRegistry()

    @registry.tool
    def pin(code: Annotated[str, Field(pattern=r"^\d{4}$")]) -> str:
        """Check a PIN."""
        return code

    assert registry.execute("pin", {"code": "2026"}) == '"2026"'
    assert registry.execute("pin", {"code": "\u0662\u0660\u0662\u0666"}).startswith(
        "ERROR: argument 'code' must match the pattern '^\\\\d{4}$'")


@pytest.mark.parametrize(("pattern", "value", "matches"), [
    (r"^[[]$", "[", True),  # literal in ECMA-262, nested classes and set operations in Rust's syntax
    (r"^[a&&b]$", "&", True),
    (r"^[a~~b]$", "~", True),
    (r"^[!--]$", ",", True),  # the range from ! to -
    (r"^[\d-z]$", "-", True),  # \d cannot start a range: a digit, '-' or 'z'
    (r"^[\d-z]$", "y", False),
    (r"^[^\d]$", "\u0661", True),
    (r"^[\S]$", "\u0085", True),
    (r"^[\b]$", "\b", True),  # backspace, inside a class
    (r"^[^]$", "\n", True),  # any character
    (r"^[]$", "a", False),  # no character
])
def test_a_pattern_class_reads_as_ecma_262_reads_it(pattern: str, value: str, matches: bool) -> None:
    # (Not through register: the 2020-12 meta-schema checks a 'pattern' with Python's re, which warns about
    # or refuses these.)
    rust = SchemaValidator(core_schema.str_schema(pattern=rust_pattern(pattern), regex_engine="rust-regex"))
    assert rust.isinstance_python(value) is matches
