"""One sentence for a ``jsonschema`` error, in the words the seed checks use.

``jsonschema``'s own messages quote the whole offending value and speak of "properties";
the model is better served by the argument's path and what a valid value looks like.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import ValidationError
from jsonschema.exceptions import relevance

from .schema_words import is_json_type, path_of, resolve_pointer

_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_COUNTS = {"minLength": ("at least", "character", " long"), "maxLength": ("at most", "character", " long"),
           "minItems": ("at least", "item", ""), "maxItems": ("at most", "item", ""),
           "minProperties": ("at least", "key", ""), "maxProperties": ("at most", "key", "")}
_UNEXPECTED = re.compile(r"\((.*) (?:was|were) unexpected\)$", re.S)


def sentence(error: ValidationError, root: Mapping[str, Any]) -> str:
    """What is wrong, as one sentence naming the argument's path (``guests[0].name``)."""
    error = _focus(error, root)
    path = path_of(error.absolute_path)
    subject = f"argument {path!r}" if path else "arguments"
    prefix = path + "." if path else ""
    kind, instance = error.validator, error.instance
    value: Any = error.validator_value
    if kind == "required" and isinstance(instance, dict):
        missing = next((name for name in value if name not in instance), None)
        if missing is not None:
            return f"missing required argument {prefix + missing!r}"
    if kind in ("additionalProperties", "unevaluatedProperties"):
        extra = _unexpected(error)
        if extra is not None:
            return f"unexpected argument {prefix + extra!r}"
    if kind == "type":
        return f"{subject} must be of type {' or '.join(value if isinstance(value, list) else [value])}"
    if kind == "enum":
        return f"{subject} must be one of {json.dumps(value)}"
    if kind == "const":
        return f"{subject} must be {json.dumps(value)}"
    if kind in _BOUNDS:
        return f"{subject} must be {_BOUNDS[str(kind)]} {json.dumps(value)}"
    if kind == "multipleOf":
        return f"{subject} must be a multiple of {json.dumps(value)}"
    if kind in _COUNTS:
        side, noun, tail = _COUNTS[str(kind)]
        return f"{subject} must {'be' if tail else 'have'} {side} {value} {noun}{'' if value == 1 else 's'}{tail}"
    if kind == "pattern":
        return f"{subject} must match the pattern {value!r}"
    if kind == "format":
        return f"{subject} must be a valid {value}"
    if kind == "uniqueItems":
        return f"{subject} must not contain duplicate items"
    if kind in ("anyOf", "oneOf"):
        return _alternatives(subject, kind, value, instance, root)
    if kind == "not":
        return f"{subject} must not match {_cut(json.dumps(value))}"
    return f"{subject} is invalid: {_cut(error.message)}"


def _focus(error: ValidationError, root: Mapping[str, Any]) -> ValidationError:
    """Descend into ``allOf``, and into the one ``anyOf``/``oneOf`` branch the value's type fits."""
    while error.context:
        if error.validator in ("anyOf", "oneOf"):
            branches: Any = error.validator_value
            fitting = [i for i, branch in enumerate(branches) if _fits(error.instance, branch, root)]
            if len(fitting) != 1:
                return error
            inside = [e for e in error.context if e.relative_schema_path and e.relative_schema_path[0] == fitting[0]]
            if not inside:
                return error
            error = max(inside, key=relevance)
        else:
            error = max(error.context, key=relevance)
    return error


def _fits(instance: Any, branch: Any, root: Mapping[str, Any]) -> bool:
    types = _types(branch, root)
    return types is None or any(is_json_type(instance, t) for t in types)


def _types(branch: Any, root: Mapping[str, Any], hops: int = 0) -> list[str] | None:
    """The JSON types a branch accepts, or None when it does not say."""
    if isinstance(branch, Mapping) and "type" not in branch and isinstance(branch.get("$ref"), str) and hops < 16:
        return _types(resolve_pointer(root, branch["$ref"]), root, hops + 1)
    if not isinstance(branch, Mapping) or "type" not in branch:
        return None
    declared = branch["type"]
    return declared if isinstance(declared, list) else [declared]


def _alternatives(subject: str, kind: Any, branches: Any, instance: Any, root: Mapping[str, Any]) -> str:
    types = [_types(branch, root) for branch in branches]
    if all(t is not None for t in types) and not any(_fits(instance, b, root) for b in branches):
        names = list(dict.fromkeys(name for t in types if t for name in t))
        return f"{subject} must be of type {' or '.join(names)}"
    shown = "; ".join(json.dumps(branch) for branch in branches)
    exactly = "exactly one" if kind == "oneOf" else "one"
    return f"{subject} must match {exactly} of: {_cut(shown, 300)}"


def _unexpected(error: ValidationError) -> str | None:
    instance = error.instance
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        declared = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        return next((str(key) for key in instance if key not in declared), None)
    found = _UNEXPECTED.search(error.message)
    if found is None:
        return None
    try:
        names = ast.literal_eval(found.group(1) + ",")
    except (ValueError, SyntaxError):
        return None
    return str(names[0]) if names else None


def _cut(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
