"""Check what JSON Schema 2020-12 has beyond the common subset, through the ``jsonschema`` library.

It is imported only when a schema needs it, since ``jsonschema`` takes about 0.2 s to import.
The schema is the tool author's but the arguments are the model's, so every check is bounded:
an evaluation budget, linear-time patterns, hashed ``uniqueItems``, no network for ``format``.
Patterns the linear-time engine cannot run, ``patternProperties``, and non-local or
unresolved ``$ref`` are refused at ``register``; docs/tools.md lists the rules.
"""

from __future__ import annotations

import ipaddress
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import date, datetime, time
from functools import lru_cache
from typing import Any, NamedTuple

from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators
from jsonschema.exceptions import SchemaError, relevance
from pydantic_core import SchemaError as RegexError
from pydantic_core import SchemaValidator, core_schema

from .._text import describe_exception
from .schema_errors import sentence
from .schema_pattern import rust_pattern
from .schema_words import CHECKED_FORMATS, IN_PLACE_LISTS, IN_PLACE_ONES, resolve_pointer, walk_schemas

BUDGET = 20_000  # keyword evaluations per call: far past what a few KB of real arguments need (~1 s at worst)
TOO_COMPLEX = "arguments are too complex to check against this tool's schema"
TOO_DEEP = "arguments nest too deeply to check"
# A $dynamicRef starts where a $ref to the same address would (its dynamic step, with no remote
# schema allowed, can only land on another $dynamicAnchor of the same name): both must resolve.
REF_KEYS = ("$ref", "$dynamicRef")


def check_full(schema: Mapping[str, Any], where: str) -> None:
    """Raise ``ValueError`` if ``schema`` is not valid 2020-12 or could not be checked safely."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = ".".join(str(part) for part in exc.absolute_path)
        raise ValueError(f"{where}: invalid JSON Schema{' at ' + at if at else ''}: {_one_line(exc.message)}") from None
    anchors = {node.get(key): node for node in walk_schemas(schema) if isinstance(node, Mapping)
               for key in ("$anchor", "$dynamicAnchor") if isinstance(node.get(key), str)}
    for node in walk_schemas(schema):
        for key in REF_KEYS:
            if isinstance(node, Mapping) and isinstance(node.get(key), str) \
                    and _target(schema, anchors, node[key]) is None:
                raise ValueError(f"{where}: {key!r} {node[key]!r} does not resolve")
    cycle = _ref_cycle(schema, anchors)
    if cycle is not None:
        raise ValueError(f"{where}: {cycle.key!r} cycle through {cycle.address!r} never reaches into the arguments")


def compile_pattern(pattern: Any, where: str) -> None:
    """Raise ``ValueError`` if ``pattern`` cannot run on the linear-time engine."""
    if not isinstance(pattern, str):
        raise ValueError(f"{where}: 'pattern' must be a string")
    try:
        _matcher(pattern)
    except RegexError as exc:
        raise ValueError(f"{where}: pattern {pattern!r} is not supported: {_regex_reason(str(exc))}") from None


def full_problem(args: dict[str, Any], schema: Mapping[str, Any], *, formats: bool) -> str | None:
    """One sentence for the first thing wrong with ``args`` beyond the seed checks, else None; never raises."""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True), formats)
    except Exception as exc:  # a schema that was never registered (validate_args is public)
        return f"the schema could not be used: {describe_exception(exc)}"
    _budget.left = BUDGET
    try:
        errors = list(validator.iter_errors(args))
        # The most relevant top-level error; sentence() descends into anyOf/oneOf only where the value's type
        # picks one branch (best_match would descend into any branch and blame the wrong one).
        return sentence(max(errors, key=relevance), validator.schema) if errors else None
    except _TooComplex:
        return TOO_COMPLEX
    except RecursionError:
        return TOO_DEEP
    except Exception as exc:
        return f"arguments could not be checked: {describe_exception(exc)}"


class _TooComplex(Exception):
    pass


_budget = threading.local()


def _spend() -> None:
    left = getattr(_budget, "left", BUDGET) - 1
    _budget.left = left
    if left < 0:
        raise _TooComplex


def _budgeted(keyword: Callable[..., Any]) -> Callable[..., Iterator[ValidationError]]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        _spend()
        errors = keyword(validator, value, instance, schema)
        if errors is not None:
            yield from errors

    return run


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not _matcher(pattern).isinstance_python(instance):
        yield ValidationError(f"{instance[:80]!r} does not match {pattern!r}")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``uniqueItems`` in linear time (``jsonschema`` falls back to comparing every pair)."""
    if unique and isinstance(instance, list):
        seen: set[Any] = set()
        for item in instance:
            key = _json_key(item)
            if key in seen:
                yield ValidationError(f"{_one_line(json.dumps(item), 80)} appears twice")
                return
            seen.add(key)


def _json_key(value: Any) -> Any:
    """A hashable key equal exactly when JSON Schema calls two values equal (1 == 1.0, True != 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _json_key(item)) for key, item in value.items()))
    return ("other", id(value))


@lru_cache(maxsize=1024)
def _matcher(pattern: str) -> SchemaValidator:
    """Build a validator that accepts the strings in which ``pattern`` finds a match.

    It uses Rust's linear-time ``regex`` engine and reads the pattern as ECMA-262 does (see ``schema_pattern``).
    """
    return SchemaValidator(core_schema.str_schema(pattern=rust_pattern(pattern), regex_engine="rust-regex"))


def _regex_reason(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("error: "):
            return line.removeprefix("error: ")
    return lines[-1].removeprefix("SchemaError: ") if lines else message


_RFC3339_TIME = r"\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})"
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]" + _RFC3339_TIME)
_TIME = re.compile(_RFC3339_TIME)


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return bool(_DATE_TIME.fullmatch(value)) and _parses(datetime.fromisoformat, value.upper().replace("Z", "+00:00"))


def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return bool(_TIME.fullmatch(value)) and _parses(time.fromisoformat, value.upper().replace("Z", "+00:00"))


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL_PART = re.compile(rf'{_ATOM}(?:\.{_ATOM})*|"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*"')
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def _is_email(value: object) -> bool:
    """RFC 5321's Mailbox: a dot-atom or quoted local part, ``@``, a domain or an address literal.

    ``jsonschema`` asks only for an ``@``, so an address with CR/LF in it (a header injection
    into whatever sends the mail) passed; no control character fits this grammar.
    """
    if not isinstance(value, str):
        return True
    local, at, domain = value.rpartition("@")
    if not at or len(local) > 64 or len(value) > 254 or not _LOCAL_PART.fullmatch(local):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return _parses(ipaddress.IPv6Address, literal[5:])
        return _parses(ipaddress.IPv4Address, literal)
    return bool(_DOMAIN.fullmatch(domain))


def _parses(parse: Callable[[str], object], value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    stock = Draft202012Validator.FORMAT_CHECKER.checkers
    for name in CHECKED_FORMATS:
        if name in stock:
            checker.checkers[name] = stock[name]
    checker.checkers["date-time"] = (_is_date_time, ())
    checker.checkers["time"] = (_is_time, ())
    checker.checkers["email"] = (_is_email, ())
    if "date" not in stock:  # pragma: no cover - every supported jsonschema has it
        checker.checkers["date"] = (lambda v: not isinstance(v, str) or _parses(date.fromisoformat, v), ())
    return checker


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    keywords = {name: _budgeted(fn) for name, fn in Draft202012Validator.VALIDATORS.items()}
    keywords["pattern"] = _budgeted(_pattern)
    keywords["uniqueItems"] = _budgeted(_unique_items)
    return validators.extend(Draft202012Validator, keywords)  # type: ignore[no-untyped-call]


@lru_cache(maxsize=256)
def _validator(canonical: str, formats: bool) -> Any:
    schema = json.loads(canonical)
    if not any(k in schema for k in ("additionalProperties", "unevaluatedProperties")):
        schema["unevaluatedProperties"] = False  # the top level is always closed: its keys are keyword arguments
    return _validator_class()(schema, format_checker=_format_checker() if formats else None)


def _target(root: Mapping[str, Any], anchors: Mapping[Any, Any], ref: str) -> Any:
    return anchors.get(ref[1:]) if ref.startswith("#") and not ref.startswith("#/") and ref != "#" \
        else resolve_pointer(root, ref)


class Ref(NamedTuple):
    """A reference in a schema: its keyword (``$ref``, ``$dynamicRef``) and the address it names."""

    key: str
    address: str


def _ref_cycle(root: Mapping[str, Any], anchors: Mapping[Any, Any]) -> Ref | None:
    """A reference on a loop of subschemas all applied to the same value, if there is one."""
    state: dict[int, int] = {}  # 1 on the current path, 2 done

    def visit(node: Any) -> Ref | None:
        if not isinstance(node, Mapping) or state.get(id(node)) == 2:
            return None
        state[id(node)] = 1
        edges: list[tuple[Any, Ref | None]] = [(node[k], None) for k in IN_PLACE_ONES if k in node]
        edges += [(sub, None) for k in IN_PLACE_LISTS if isinstance(node.get(k), list) for sub in node[k]]
        edges += [(_target(root, anchors, node[k]), Ref(k, node[k])) for k in REF_KEYS if isinstance(node.get(k), str)]
        for child, ref in edges:
            if isinstance(child, Mapping) and state.get(id(child)) == 1:
                return ref or Ref("$ref", "#")
            found = visit(child)
            if found is not None:
                return found
        state[id(node)] = 2
        return None

    for node in walk_schemas(root):
        found = visit(node)
        if found is not None:
            return found
    return None


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
