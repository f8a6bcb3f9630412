"""The JSON Schema subset tools declare, checked once at ``register`` and per call.

Only what can be enforced is accepted: a schema keyword we would silently ignore
(``pattern``, ``minimum``...) would let a model send arguments the tool author
believed impossible, so it fails at ``register`` instead of in the middle of a run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

SCALAR_TYPES = ("string", "integer", "number", "boolean", "null")
SUPPORTED_TYPES = (*SCALAR_TYPES, "array", "object")
# Keywords that only document a schema: accepted anywhere, never enforced.
ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "additionalProperties"})


def check_schema(schema: Any, where: str = "parameters") -> None:
    """Raise ``ValueError`` naming the first part of ``schema`` we cannot enforce."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a JSON Schema object (a dict), got {type(schema).__name__}")
    for key in schema:
        if key not in KEYWORDS and key not in ANNOTATIONS:
            raise ValueError(f"{where}: unsupported schema keyword {key!r}")
    types = _declared_types(schema, where)
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, list) or not enum:
            raise ValueError(f"{where}: 'enum' must be a non-empty list")
        try:
            json.dumps(enum, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: 'enum' values must be JSON: {exc}") from None
    if schema.get("additionalProperties", False) is not False:
        raise ValueError(
            f"{where}: unsupported 'additionalProperties' other than false "
            "(unknown arguments are always rejected)"
        )
    has_object_keywords = any(k in schema for k in ("properties", "required"))
    if has_object_keywords and types and "object" not in types:
        raise ValueError(f"{where}: 'properties'/'required' need type 'object'")
    if "properties" in schema:
        props = schema["properties"]
        if not isinstance(props, Mapping):
            raise ValueError(f"{where}: 'properties' must be a dict")
        for name, sub in props.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}: property names must be non-empty strings")
            check_schema(sub, f"{where}.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{where}: 'required' must be a list of property names")
    declared = schema.get("properties", {})
    for name in required:
        if name not in declared:
            raise ValueError(f"{where}: required argument {name!r} is not in 'properties'")
    if "items" in schema:
        if types and "array" not in types:
            raise ValueError(f"{where}: 'items' needs type 'array'")
        check_schema(schema["items"], f"{where}[]")


def _declared_types(schema: Mapping[str, Any], where: str) -> tuple[str, ...]:
    declared = schema.get("type")
    if declared is None:
        if "enum" in schema:
            return ()
        raise ValueError(f"{where}: missing 'type' (one of {', '.join(SUPPORTED_TYPES)})")
    names = declared if isinstance(declared, list) else [declared]
    if not names:
        raise ValueError(f"{where}: 'type' must not be empty")
    for name in names:
        if name not in SUPPORTED_TYPES:
            raise ValueError(f"{where}: unsupported type {name!r}")
    return tuple(names)


def validate_args(args: Any, schema: Mapping[str, Any]) -> str | None:
    """None when ``args`` satisfy ``schema``, else one sentence the model can act on.

    Checks, in order: args is an object; every required key is present; no key
    outside ``properties``; each value has its declared type (recursively).
    Never raises, whatever ``args`` holds.
    """
    if not isinstance(args, dict):
        if isinstance(args, str):
            return f"arguments must be a JSON object, got a string that did not parse: {_short(args)}"
        return f"arguments must be a JSON object, got {_json_type(args)}"
    return _check_object(args, schema, prefix="")


def _check_object(value: dict[Any, Any], schema: Mapping[str, Any], prefix: str) -> str | None:
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            return f"missing required argument {prefix + name!r}"
    for key in value:
        if not isinstance(key, str) or key not in props:
            return f"unexpected argument {prefix + str(key)!r}"
    for key, item in value.items():
        problem = _check_value(item, props[key], prefix + key)
        if problem:
            return problem
    return None


def _check_value(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    types = schema.get("type")
    names: list[str] = [] if types is None else (types if isinstance(types, list) else [types])
    if names and not any(_is_type(value, t) for t in names):
        return f"argument {path!r} must be of type {' or '.join(names)}"
    if "enum" in schema and not any(_same_json(value, option) for option in schema["enum"]):
        return f"argument {path!r} must be one of {json.dumps(schema['enum'])}"
    if isinstance(value, dict) and ("properties" in schema or "object" in names):
        return _check_object(value, schema, prefix=path + ".")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problem = _check_value(item, schema["items"], f"{path}[{index}]")
            if problem:
                return problem
    return None


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if name == "null":
        return value is None
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return False


def _same_json(value: Any, option: Any) -> bool:
    """Equality as JSON sees it: ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value is option
    try:
        return bool(value == option)
    except Exception:  # arbitrary objects may have hostile __eq__
        return False


_ARTICLES = {"boolean": "a boolean", "integer": "an integer", "number": "a number",
             "string": "a string", "null": "null", "array": "an array"}


def _json_type(value: Any) -> str:
    for name, phrase in _ARTICLES.items():
        if _is_type(value, name):
            return phrase
    return type(value).__name__


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
