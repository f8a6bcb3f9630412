"""A run's typed result (``output_type=``): its JSON Schema, the ``final_result`` tool, and its check.

T is a Pydantic model, a dataclass, a TypedDict (any type Pydantic's ``TypeAdapter`` takes) or a
JSON Schema dict. The model gives it by calling ``final_result`` with T's fields (a non-object T
wrapped in ``{"result": ...}``), so it works beside the run's tools with every tool-calling model;
the arguments are checked as any tool's are (the registry's JSON Schema check), then by Pydantic.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .. import _jsontext
from .._log.facts import OutputSchema
from ..messages import ToolSpec
from .schema import ArgsCheck, args_checker, check_schema
from .schema_words import path_of

FINAL_RESULT: Final = "final_result"
MODES: Final = ("tool", "native")
ACCEPTED: Final = "the final result was accepted"
WRAPPER: Final = "result"
DESCRIPTION: Final = ("Give the final result: call this once the work is done, with the result as its arguments. "
                      "It ends the run.")


class Taken(NamedTuple):
    """What checking a ``final_result`` gave: the value (an instance of T) and its JSON, or the problem."""

    value: Any
    data: Any
    problem: str | None


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How a run's typed result is asked for and checked.

    ``schema`` is ``final_result``'s parameters; ``wrapped`` that T is not an object and sits under
    ``"result"``; ``mode`` ``tool`` (the ``final_result`` tool) or ``native`` (the provider's structured
    output); ``ref`` the type's ``module:attr``; ``adapter`` Pydantic's ``TypeAdapter`` of T (None for a
    JSON Schema dict, whose value is the JSON itself).
    """

    schema: dict[str, Any]
    wrapped: bool
    mode: str = "tool"
    ref: str | None = None
    adapter: Any = field(default=None, repr=False, compare=False)
    check: ArgsCheck | None = field(default=None, repr=False, compare=False)

    def tool_spec(self) -> ToolSpec:
        return {"name": FINAL_RESULT, "description": DESCRIPTION, "parameters": self.schema}

    def declared(self) -> OutputSchema:
        """As the log records it."""
        return {"schema": self.schema, "wrapped": self.wrapped, "mode": self.mode, "ref": self.ref}

    def take(self, args: Any) -> Taken:
        """Check ``final_result``'s arguments: the value, or an ``ERROR:`` naming the field and the rule."""
        assert self.check is not None
        problem = self.check(args)
        if problem is None:
            data = args[WRAPPER] if self.wrapped else args
            if self.adapter is None:
                return Taken(data, data, None)
            taken = _validated(self.adapter, data, self.wrapped)
            if taken.problem is None:
                return taken
            problem = taken.problem
        return Taken(None, None, f"ERROR: {problem}. {FINAL_RESULT} expects {expected(self.schema)}")

    def take_text(self, content: str | None) -> Taken:
        """A reply's text as the result (``native`` mode: the provider's structured output is JSON text)."""
        try:
            args = json.loads(content or "")
        except ValueError:
            return Taken(None, None, plain_text_error(self))
        return self.take(args)

    def with_mode(self, mode: str) -> OutputSpec:
        return OutputSpec(self.schema, self.wrapped, _checked_mode(mode), self.ref, self.adapter, self.check)


def plain_text_error(spec: OutputSpec) -> str:
    """What the model reads after a reply in plain text when a typed result is due."""
    if spec.mode == "native":
        return "ERROR: the reply must be the final result as JSON matching the response format, nothing else."
    return (f"ERROR: the run must end with a call to {FINAL_RESULT} whose arguments are the result; a reply in "
            f"plain text is not accepted. {FINAL_RESULT} expects {expected(spec.schema)}")


def expected(schema: Mapping[str, Any]) -> str:
    """What ``final_result`` takes, as the model is told: keys sorted, so a fixture's schema reads the same."""
    return json.dumps(schema.get("properties", {}), sort_keys=True)


def output_spec(output_type: Any, mode: str = "tool", ref: str | None = None) -> OutputSpec:
    """The spec of ``output_type`` (a type Pydantic takes, or a JSON Schema dict); ``ValueError`` when unusable."""
    mode = _checked_mode(mode)
    if isinstance(output_type, OutputSpec):
        return output_type.with_mode(mode)
    if isinstance(output_type, Mapping):
        return _from_schema(dict(output_type), None, mode, ref, formats=True)
    if output_type is None or isinstance(output_type, (str, bytes, int, float, list)):
        raise ValueError(f"output_type must be a type (a Pydantic model, a dataclass, a TypedDict...) or a JSON "
                         f"Schema dict, got {output_type!r}")
    from pydantic import TypeAdapter

    try:
        from .functions import NoTitles

        adapter: Any = TypeAdapter(output_type)
        schema = adapter.json_schema(schema_generator=NoTitles)
    except Exception as exc:  # Pydantic's own errors are long: keep the first line
        raise ValueError(f"output_type {output_type!r}: cannot build a JSON Schema: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return _from_schema(schema, adapter, mode, ref, formats=False)


def output_from_log(declared: OutputSchema) -> OutputSpec:
    """The spec a log recorded: its schema checks the result, whose value is then the JSON itself."""
    schema = declared["schema"]
    check_schema(schema, FINAL_RESULT, formats=False)
    return OutputSpec(schema, declared["wrapped"], declared["mode"], declared.get("ref"), None,
                      args_checker(schema, formats=False))


def output_by_ref(ref: str, mode: str = "tool") -> OutputSpec:
    """The spec of the type (or JSON Schema dict) at ``module:attr``; ``ValueError`` naming what is wrong."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"output type {ref!r} must look like 'module:attr'")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import output type {ref!r}: {exc}") from None
    return output_spec(found, mode, ref)


def _from_schema(schema: dict[str, Any], adapter: Any, mode: str, ref: str | None, *, formats: bool) -> OutputSpec:
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs: dict[str, Any] = {key: schema.pop(key) for key in ("$defs", "definitions") if key in schema}
        schema = {"type": "object", "properties": {WRAPPER: schema}, "required": [WRAPPER], **defs}
    schema.pop("title", None)  # noise in the tokens the model reads
    try:
        _jsontext.strict(schema)
        check_schema(schema, FINAL_RESULT, formats=formats)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"output_type: {exc}") from None
    return OutputSpec(schema, wrapped, mode, ref, adapter, args_checker(schema, formats=formats))


def _checked_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"output_mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def _validated(adapter: Any, data: Any, wrapped: bool) -> Taken:
    """Pydantic's value of data the JSON Schema already passed, or its verdict (its own validators, say)."""
    from pydantic import ValidationError

    try:
        value = adapter.validate_json(json.dumps(data))
        return Taken(value, adapter.dump_python(value, mode="json"), None)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = path_of([WRAPPER, *first["loc"]] if wrapped else first["loc"]) or "arguments"
        return Taken(None, None, f"argument {path!r} is invalid: {first['msg']}")
    except Exception as exc:  # a validator of the user's raised something else
        return Taken(None, None, f"arguments are invalid: {type(exc).__name__}: {exc}")
