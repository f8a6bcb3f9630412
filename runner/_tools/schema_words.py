"""The vocabulary of JSON Schema 2020-12 as the schema walk needs it, with no import of ``jsonschema``.

Kept apart so that registering a tool with a seed-subset schema (and ``import runner``)
never pays for loading the validator library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

# The seed subset: enforced by our own walk, with its exact sentences.
SEED_KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "additionalProperties"})
# Keywords that only document a schema (``discriminator`` is OpenAPI's, which Pydantic emits).
ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                         "writeOnly", "contentMediaType", "contentEncoding", "discriminator"})
# Everything else 2020-12 defines (core, applicator, validation, unevaluated, format, content).
ASSERTIONS = frozenset({
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$ref", "$dynamicRef", "$defs", "definitions", "$vocabulary",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "contains",
    "patternProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "const", "multipleOf",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "dependentRequired",
    "format", "contentSchema",
})
FULL_KEYWORDS = SEED_KEYWORDS | ANNOTATIONS | ASSERTIONS

# Where subschemas live: a dict of them, one, or a list of them.
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_ONES = ("items", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
               "unevaluatedItems", "unevaluatedProperties", "contentSchema")
SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
# Positions whose schema describes a value of its own, so it must say what it accepts.
VALUE_POSITIONS = frozenset({"properties", "patternProperties", "items", "prefixItems"})
# Subschemas applied to the same value as their parent (a cycle through only these never ends).
IN_PLACE_ONES = ("not", "if", "then", "else")
IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")

# Formats enforced with the standard library only: none of them touches the network.
CHECKED_FORMATS = ("date", "date-time", "email", "ipv4", "ipv6", "regex", "time", "uuid")


def resolve_pointer(root: Any, ref: str) -> Any:
    """The subschema a local ``#/...`` JSON Pointer names, or None (anchors are left to ``jsonschema``)."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def walk_schemas(schema: Any) -> list[Any]:
    """Every subschema of ``schema`` (itself included), in document order."""
    found: list[Any] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, Mapping):
            continue
        children: list[Any] = []
        for key in SCHEMA_MAPS:
            if isinstance(node.get(key), Mapping):
                children.extend(node[key].values())
        children.extend(node[key] for key in SCHEMA_ONES if key in node)
        for key in SCHEMA_LISTS:
            if isinstance(node.get(key), list):
                children.extend(node[key])
        stack.extend(reversed(children))
    return found


def is_json_type(value: Any, name: str) -> bool:
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


def path_of(parts: Iterable[Any]) -> str:
    """``guests[0].name`` for the parts ``guests``, 0, ``name``."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path
