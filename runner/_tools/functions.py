"""A typed Python function described as a tool: its hints are the schema, its docstring the descriptions.

Pydantic builds the JSON Schema from the type hints (``Literal`` -> ``enum``, ``X | None`` ->
``anyOf``, a ``BaseModel`` -> ``$defs``/``$ref``, ``Field(ge=1)`` -> ``minimum``) and, per call,
turns the model's JSON into the values the function declared (a model parameter arrives as
an instance). Imported only when ``@registry.tool`` is used: Pydantic costs ~0.15 s to import.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from .schema_words import path_of

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$")
_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Described:
    """What ``register`` needs: the schema shown to the model, and the callable the loop runs."""

    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    check: Callable[[Mapping[str, Any]], str | None]


def describe(fn: Callable[..., Any], name: str, key: str | None) -> Described:
    """Build a tool from ``fn``; raises ``ValueError`` (without the tool's name) on any mistake."""
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ValueError(f"cannot read the signature: {exc}") from None
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    params = [p for p in signature.parameters.values()
              if p.name != key and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for documented in arg_docs:
        if documented.lstrip("*") not in signature.parameters:
            raise ValueError(f"the docstring documents {documented!r}, which is not a parameter")
    fields: dict[str, Any] = {}
    for index, param in enumerate(params):
        if param.kind is param.POSITIONAL_ONLY:
            raise ValueError(f"parameter {param.name!r} is positional-only; tools are called with keyword arguments")
        if param.name not in hints:
            raise ValueError(f"parameter {param.name!r} has no type annotation")
        info: dict[str, Any] = {"alias": param.name}
        if param.name in arg_docs and not _has_description(hints[param.name]):
            info["description"] = arg_docs[param.name]
        default = ... if param.default is param.empty else param.default
        # Field names are positional so any parameter name works (``model_x``, ``_x``, ``json``...).
        fields[f"p{index}"] = (Annotated[hints[param.name], Field(**info)], default)
    try:
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema(schema_generator=NoTitles)
    except Exception as exc:  # Pydantic's own errors are long: keep the first line
        raise ValueError(f"cannot build a schema from the type hints: {str(exc).splitlines()[0]}") from None
    schema.pop("title", None)
    names = {f"p{i}": p.name for i, p in enumerate(params)}
    return Described(summary, schema, _caller(fn, model, names), functools.partial(_check, model))


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (lines joined), and each parameter's text from a Google-style ``Args:``."""
    summary = " ".join(line.strip() for line in doc.split("\n\n", 1)[0].splitlines()).strip()
    args: dict[str, str] = {}
    lines = doc.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if _SECTION.match(line.strip())), None)
    if start is None:
        return summary, args
    indent: int | None = None
    current: str | None = None
    for line in lines[start:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent or (depth == 0 and line.strip().endswith(":")):
            break  # the next section
        entry = _ENTRY.match(line.strip())
        if depth == indent and entry:
            current = entry.group(1)
            args[current] = entry.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return summary, args


class NoTitles(GenerateJsonSchema):
    """Pydantic titles every field after its name ("City"): noise in the tokens the model reads."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _has_description(hint: Any) -> bool:
    return any(isinstance(meta, FieldInfo) and meta.description for meta in getattr(hint, "__metadata__", ()))


def _check(model: type[BaseModel], args: Mapping[str, Any]) -> str | None:
    """Pydantic's verdict on arguments the JSON Schema already passed (its own validators, say)."""
    try:
        model.model_validate_json(json.dumps(dict(args)))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = path_of(first["loc"]) or "arguments"
        return f"argument {path!r} is invalid: {first['msg']}"
    except Exception as exc:  # a validator of the user's raised something else
        return f"arguments are invalid: {type(exc).__name__}: {exc}"
    return None


def _caller(fn: Callable[..., Any], model: type[BaseModel], names: dict[str, str]) -> Callable[..., Any]:
    """What the loop calls with the JSON arguments: Pydantic's values go to ``fn`` (and the key as given)."""
    aliases = set(names.values())

    def convert(kwargs: dict[str, Any]) -> dict[str, Any]:
        passed = {k: v for k, v in kwargs.items() if k not in aliases}  # the idempotency key, never in the schema
        data = model.model_validate_json(json.dumps({k: v for k, v in kwargs.items() if k in aliases}))
        return {names[field]: getattr(data, field) for field in names} | passed

    if inspect.iscoroutinefunction(fn):
        async def call_async(**kwargs: Any) -> Any:
            return await fn(**convert(kwargs))

        return functools.update_wrapper(call_async, fn)

    def call(**kwargs: Any) -> Any:
        return fn(**convert(kwargs))

    return functools.update_wrapper(call, fn)
