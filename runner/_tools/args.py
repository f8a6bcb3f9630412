"""What a tool function is handed: its own copy of the logged arguments, and its idempotency key.

Kept apart from the loop so that the loop's module holds decisions only.
"""

from __future__ import annotations

import json
from typing import Any

from .registry import Tool

_SCALARS = frozenset({str, int, float, bool, type(None)})


def tool_args(tool: Tool, args: dict[str, Any], run_id: str, call_id: str) -> dict[str, Any]:
    """Build the keyword arguments ``tool`` runs with.

    They are exactly the checked JSON data the log holds, in a copy,
    plus the key for the tool's ``idempotency_key`` parameter if it has one.
    """
    own = dict(args) if _SCALARS.issuperset(map(type, args.values())) else own_copy(args)
    if tool.idempotency_key is not None:
        own[tool.idempotency_key] = idempotency_key(run_id, call_id)
    return own


def own_copy(args: dict[str, Any]) -> dict[str, Any]:
    """A copy of checked JSON args that a tool may edit without touching the logged message.

    Flat args (the usual case) need only a new dict: their values cannot be changed in
    place. Nested ones are copied through JSON (they are plain JSON data already)."""
    if _SCALARS.issuperset(map(type, args.values())):
        return dict(args)
    copied: dict[str, Any] = json.loads(json.dumps(args))
    return copied


def idempotency_key(run_id: str, call_id: str) -> str:
    """The same on every attempt of one call, different for every other call."""
    return f"{run_id}:{call_id}"
