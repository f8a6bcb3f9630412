"""Check tool schemas (JSON Schema 2020-12) once at ``register`` and arguments on every call.

Our own walk covers the common subset (type, properties, required, items, enum) fast,
with the exact sentences models have always been told.
Everything beyond it goes to ``jsonschema`` in ``schema_full``, imported only when a schema needs it.
What cannot be enforced, such as an unknown keyword or a remote ``$ref``, is refused at ``register``.
Objects are closed unless they open themselves; the top level is always closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .schema_words import (
    ANNOTATIONS,
    CHECKED_FORMATS,
    FULL_KEYWORDS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_ONES,
    SEED_KEYWORDS,
    VALUE_POSITIONS,
    is_json_type,
    resolve_pointer,
)

SCALAR_TYPES = ("string", "integer", "number", "boolean", "null")
SUPPORTED_TYPES = (*SCALAR_TYPES, "array", "object")
# A schema position that holds a value must say what it accepts: one of these keywords.
CONSTRAINING = frozenset({"type", "enum", "const", "$ref", "$dynamicRef", "anyOf", "oneOf", "allOf", "not"})
COMPOSING = frozenset({"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas"})
OPENING = frozenset({"unevaluatedProperties"})
DRAFT_2020_12 = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")
MAX_REF_HOPS = 64


def check_schema(schema: Any, where: str = "parameters", *, formats: bool = True) -> None:
    """Raise ``ValueError`` naming the first part of ``schema`` we cannot enforce.

    ``formats=False`` is for schemas Pydantic generated: Pydantic itself enforces their
    ``format`` (its own ``date-time``, ``uri``...), so they need no checker here.
    """
    try:
        _check_node(schema, where, value=True, formats=formats, root=True, dict_only=True)
        if uses_full(schema):
            from .schema_full import check_full

            check_full(schema, where)
    except RecursionError:
        raise ValueError(f"{where}: the schema nests too deeply") from None


def uses_full(schema: Any) -> bool:
    """Whether any keyword beyond the seed subset appears (then ``jsonschema`` validates too)."""
    if not isinstance(schema, Mapping):
        return not isinstance(schema, bool)
    for key, sub in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in SEED_KEYWORDS:
            return True
        if key == "additionalProperties" and sub is not False:
            return True
        children = sub.values() if key == "properties" and isinstance(sub, Mapping) else [sub] if key == "items" else []
        if any(uses_full(child) for child in children):
            return True
    return False


def _check_node(schema: Any, where: str, *, value: bool, formats: bool, root: bool = False,
                dict_only: bool = False) -> None:
    if isinstance(schema, bool) and not dict_only:
        return  # true/false are schemas too (additionalProperties: false, items: false...)
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a JSON Schema object (a dict), got {type(schema).__name__}")
    for key in schema:
        if key not in FULL_KEYWORDS:
            raise ValueError(f"{where}: unsupported schema keyword {key!r}")
    if "patternProperties" in schema:
        raise ValueError(f"{where}: unsupported schema keyword 'patternProperties' (its regexes would run "
                         "unbounded; use 'additionalProperties' with 'propertyNames' and a 'pattern')")
    if "pattern" in schema:
        from .schema_full import compile_pattern

        compile_pattern(schema["pattern"], where)
    if root and "$schema" in schema and schema["$schema"] not in DRAFT_2020_12:
        raise ValueError(f"{where}: only JSON Schema 2020-12 is supported, got '$schema' {schema['$schema']!r}")
    types = _declared_types(schema, where, value=value)
    _check_values(schema, where)
    if "format" in schema and formats and schema["format"] not in CHECKED_FORMATS:
        raise ValueError(f"{where}: unsupported format {schema['format']!r} (checked: {', '.join(CHECKED_FORMATS)})")
    if root and schema.get("additionalProperties", False) is not False:
        raise ValueError(f"{where}: unsupported 'additionalProperties' other than false "
                         "(unknown arguments are always rejected)")
    for key in ("$ref", "$dynamicRef"):
        ref = schema.get(key)
        if key in schema and not (isinstance(ref, str) and ref.startswith("#")):
            raise ValueError(f"{where}: only local {key!r} (starting with '#') is supported, got {ref!r}")
    if any(k in schema for k in ("properties", "required")) and types and "object" not in types:
        raise ValueError(f"{where}: 'properties'/'required' need type 'object'")
    if "items" in schema and types and "array" not in types:
        raise ValueError(f"{where}: 'items' needs type 'array'")
    _check_required(schema, where)
    _check_children(schema, where, formats)


def _check_values(schema: Mapping[str, Any], where: str) -> None:
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, list) or not enum:
            raise ValueError(f"{where}: 'enum' must be a non-empty list")
        _check_json(enum, where, "enum")
    if "const" in schema:
        _check_json(schema["const"], where, "const")


def _check_json(value: Any, where: str, key: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {key!r} values must be JSON: {exc}") from None


def _check_required(schema: Mapping[str, Any], where: str) -> None:
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{where}: 'required' must be a list of property names")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise ValueError(f"{where}: 'properties' must be a dict")
    if _is_open(schema) or any(k in schema for k in COMPOSING):
        return  # a required key may be declared by a pattern or by a composed schema
    for name in required:
        if name not in props:
            raise ValueError(f"{where}: required argument {name!r} is not in 'properties'")


def _check_children(schema: Mapping[str, Any], where: str, formats: bool) -> None:
    for key in SCHEMA_MAPS:
        if key in schema:
            children = schema[key]
            if not isinstance(children, Mapping):
                raise ValueError(f"{where}: {key!r} must be a dict")
            for name, sub in children.items():
                if key == "properties" and (not isinstance(name, str) or not name):
                    raise ValueError(f"{where}: property names must be non-empty strings")
                here = f"{where}.{name}" if key == "properties" else f"{where}.{key}.{name}"
                _check_node(sub, here, value=key in VALUE_POSITIONS, formats=formats,
                            dict_only=key == "properties")
    for key in SCHEMA_ONES:
        if key in schema:
            here = f"{where}[]" if key == "items" else f"{where}.{key}"
            _check_node(schema[key], here, value=key in VALUE_POSITIONS, formats=formats)
    for key in SCHEMA_LISTS:
        if key in schema:
            if not isinstance(schema[key], list):
                raise ValueError(f"{where}: {key!r} must be a list of schemas")
            for index, sub in enumerate(schema[key]):
                _check_node(sub, f"{where}.{key}[{index}]", value=key in VALUE_POSITIONS, formats=formats)


def _declared_types(schema: Mapping[str, Any], where: str, *, value: bool) -> tuple[str, ...]:
    declared = schema.get("type")
    if declared is None:
        if value and not any(k in schema for k in CONSTRAINING):
            raise ValueError(f"{where}: missing 'type' (one of {', '.join(SUPPORTED_TYPES)})")
        return ()
    names = declared if isinstance(declared, list) else [declared]
    if not names:
        raise ValueError(f"{where}: 'type' must not be empty")
    for name in names:
        if name not in SUPPORTED_TYPES:
            raise ValueError(f"{where}: unsupported type {name!r}")
    return tuple(names)


def _is_open(schema: Mapping[str, Any]) -> bool:
    return any(k in schema for k in OPENING) or schema.get("additionalProperties", False) is not False


def validate_args(args: Any, schema: Mapping[str, Any]) -> str | None:
    """None when ``args`` satisfy ``schema``, else one sentence the model can act on.

    Checks, in order: args is an object; every required key is present; no key
    outside ``properties``; each value has its declared type (recursively); then
    every other keyword of the schema. Never raises, whatever ``args`` holds.
    """
    return check_args(args, schema, formats=True)


def check_args(args: Any, schema: Mapping[str, Any], *, formats: bool, full: bool | None = None) -> str | None:
    """:func:`validate_args`, with ``format`` checking optional (see :func:`check_schema`).

    ``full`` is ``uses_full(schema)`` when the caller already knows it (None: work it out)."""
    if not isinstance(args, dict):
        if isinstance(args, str):
            return f"arguments must be a JSON object, got a string that did not parse: {_short(args)}"
        return f"arguments must be a JSON object, got {_json_type(args)}"
    try:
        problem = _Walk(schema).object(args, schema, prefix="")
        if problem is None and (uses_full(schema) if full is None else full):
            from .schema_full import full_problem

            return full_problem(args, schema, formats=formats)
    except RecursionError:
        return "arguments nest too deeply to check"
    return problem


ArgsCheck = Callable[[Any], "str | None"]

# What a property of a flat schema may say beyond its ``type``: nothing the walk checks.
_FLAT_TYPES = frozenset({*SCALAR_TYPES, "array"})
# The Python type whose values are always of a JSON type (a number must also be finite: none).
_EXACT: dict[str, type] = {"string": str, "integer": int, "boolean": bool, "null": type(None), "array": list}


def args_checker(schema: Mapping[str, Any], *, formats: bool) -> ArgsCheck:
    """Build ``check_args`` for one registered schema, with what depends on the schema alone worked out once.

    A flat schema, an object of named scalars with one ``type`` each, gets a simple loop over the arguments.
    It gives exactly the walk's sentences in the walk's order. Any other schema gets the walk itself.
    """
    full = uses_full(schema)
    flat = None if full else _flat_types(schema)
    if flat is None:
        return lambda args: check_args(args, schema, formats=formats, full=full)
    required = tuple(schema.get("required", ()))

    def check(args: Any) -> str | None:
        if not isinstance(args, dict):
            return check_args(args, schema, formats=formats, full=False)
        for name in required:
            if name not in args:
                return f"missing required argument {name!r}"
        for key in args:
            if not isinstance(key, str) or key not in flat:
                return f"unexpected argument {str(key)!r}"
        for key, item in args.items():
            want = flat[key]
            if type(item) is not _EXACT.get(want) and not is_json_type(item, want):
                return f"argument {key!r} must be of type {want}"
        return None

    return check


def _flat_types(schema: Mapping[str, Any]) -> dict[str, str] | None:
    """Map each property to its type when ``schema`` is a closed object of one-type properties, else return None."""
    if any(key not in ANNOTATIONS and key not in ("type", "properties", "required", "additionalProperties")
           for key in schema) or schema.get("type", "object") != "object" or _is_open(schema):
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, Mapping) or not isinstance(required, list):
        return None
    flat: dict[str, str] = {}
    for name, sub in props.items():
        if not isinstance(name, str) or not isinstance(sub, Mapping):
            return None
        kind = sub.get("type")
        if not isinstance(kind, str) or kind not in _FLAT_TYPES:  # a list of types is the walk's
            return None
        if any(key != "type" and key not in ANNOTATIONS for key in sub):
            return None
        flat[name] = kind
    return flat


class _Walk:
    """The seed checks, following local ``$ref`` so a referenced model gets the same sentences."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def object(self, value: dict[Any, Any], schema: Mapping[str, Any], prefix: str) -> str | None:
        props = schema.get("properties", {})
        props = props if isinstance(props, Mapping) else {}
        for name in schema.get("required", ()):
            if name not in value:
                return f"missing required argument {prefix + name!r}"
        closed = not (_is_open(schema) or any(k in schema for k in COMPOSING))
        for key in value:
            if not isinstance(key, str) or (key not in props and closed):
                return f"unexpected argument {prefix + str(key)!r}"
        for key, item in value.items():
            if key in props:
                problem = self.value(item, props[key], prefix + key)
                if problem:
                    return problem
        return None

    def value(self, value: Any, schema: Any, path: str, hops: int = 0) -> str | None:
        if not isinstance(schema, Mapping):
            return None  # true/false: left to the full check
        types = schema.get("type")
        names: list[str] = [] if types is None else (types if isinstance(types, list) else [types])
        if names and not any(is_json_type(value, t) for t in names):
            return f"argument {path!r} must be of type {' or '.join(names)}"
        if "enum" in schema and not any(_same_json(value, option) for option in schema["enum"]):
            return f"argument {path!r} must be one of {json.dumps(schema['enum'])}"
        ref = schema.get("$ref")
        if isinstance(ref, str) and hops < MAX_REF_HOPS:
            target = resolve_pointer(self.root, ref)
            if target is not None:
                problem = self.value(value, target, path, hops + 1)
                if problem:
                    return problem
        if isinstance(value, dict) and ("properties" in schema or "object" in names):
            return self.object(value, schema, prefix=path + ".")
        items = schema.get("items")
        if isinstance(value, list) and isinstance(items, Mapping):
            for index, item in enumerate(value):
                problem = self.value(item, items, f"{path}[{index}]")
                if problem:
                    return problem
        return None


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
        if is_json_type(value, name):
            return phrase
    return type(value).__name__


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
