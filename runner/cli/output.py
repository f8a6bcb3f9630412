"""``--output-schema FILE.json`` and ``--output-type MODULE:ATTR``: a run's typed result from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .._text import CONTROLS
from .._tools.output import OutputSpec, output_by_ref, output_spec
from .options import CliUsageError

F = TypeVar("F", bound=Callable[..., Any])


def output_options(fn: F) -> F:
    """The two ways to ask for a typed result (at most one of them)."""
    fn = click.option("--output-type", "output_type_ref", metavar="MODULE:ATTR",
                      help="End with a typed result: a Pydantic model, dataclass or TypedDict (or a JSON Schema "
                           "dict) imported from MODULE:ATTR; printed as JSON.")(fn)
    fn = click.option("--output-schema", "output_schema_file", metavar="FILE.json",
                      type=click.Path(dir_okay=False, path_type=Path),
                      help="End with a typed result matching this JSON Schema (a final_result tool call, "
                           "validated and retried); printed as JSON.")(fn)
    return fn


def output_given(schema_file: Path | None, type_ref: str | None) -> OutputSpec | None:
    """The typed result the options ask for; ``CliUsageError`` (one line) for a file or type that will not do."""
    if schema_file is not None and type_ref is not None:
        raise CliUsageError("give --output-schema or --output-type, not both")
    try:
        if type_ref is not None:
            return output_by_ref(type_ref)
        if schema_file is None:
            return None
        try:
            schema = json.loads(schema_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CliUsageError(f"--output-schema {schema_file}: cannot read a JSON document: {exc}") from None
        if not isinstance(schema, dict):
            raise CliUsageError(f"--output-schema {schema_file}: a JSON Schema is an object, "
                                f"not {type(schema).__name__}")
        return output_spec(schema)
    except (ValueError, RecursionError) as exc:
        raise CliUsageError(" ".join(str(exc).split())) from None


def shown_output(answer: str | None) -> str:
    """A done run's typed result as printed: its JSON, indented, any terminal control in it escaped.

    JSON escapes C0 controls itself; the C1 controls and bidi overrides it leaves as they are become
    ``\\uXXXX`` escapes, so the text printed is still the same JSON value and cannot move the cursor.
    """
    text = json.dumps(json.loads(answer or "null"), indent=2, ensure_ascii=False)
    return CONTROLS.sub(lambda found: f"\\u{ord(found[0]):04x}", text)
