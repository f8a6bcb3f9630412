"""Whether a model's reply can be acted on: the loop's checks on what a model returns.

A model's mistake never raises: each problem is one sentence that ends the run as
``invalid_reply`` (the harness cannot repair a reply it cannot read).
"""

from __future__ import annotations

import json
from collections.abc import Set

from .messages import CUT_OFF_STOP_REASONS, REFUSAL_STOP_REASONS, ModelReply, ToolCall, Usage


def reply_problem(reply: object, seen_ids: Set[str]) -> str | None:
    """Why ``reply`` is not a usable ``ModelReply``, or None. ``seen_ids``: call ids used earlier."""
    if not isinstance(reply, ModelReply):
        return f"model returned {type(reply).__name__}, expected ModelReply"
    if not isinstance(reply.content, str):
        return f"reply content must be a string, got {type(reply.content).__name__}"
    if not isinstance(reply.tool_calls, (list, tuple)):
        return f"reply tool_calls must be a list, got {type(reply.tool_calls).__name__}"
    usage = reply.usage
    if usage is not None and not (isinstance(usage, Usage) and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for n in (usage.input_tokens, usage.output_tokens))):
        return f"reply usage must be Usage(input_tokens, output_tokens) of non-negative ints, got {usage!r}"
    ids: set[str] = set()
    for call in reply.tool_calls:
        if not isinstance(call, ToolCall):
            return f"tool call must be a ToolCall, got {type(call).__name__}"
        if not isinstance(call.id, str) or not call.id:
            return f"tool call {call.name!r} has no id"
        if not isinstance(call.name, str):
            return f"tool call {call.id!r} has a name that is not a string"
        if call.id in ids or call.id in seen_ids:
            return f"duplicate call id {call.id!r}"
        ids.add(call.id)
        try:
            json.dumps(call.args, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return f"tool call {call.id!r} has arguments that are not JSON"
    return None


def loggable(reply: object) -> bool:
    """Whether an invalid reply can still be logged as data (so replay can replay it)."""
    if not isinstance(reply, ModelReply) or not isinstance(reply.content, str):
        return False
    if not isinstance(reply.tool_calls, list) or not all(isinstance(c, ToolCall) for c in reply.tool_calls):
        return False
    try:
        json.dumps([[c.id, c.name, c.args] for c in reply.tool_calls], allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def unfinished_reply(reply: ModelReply) -> str | None:
    """Why a reply must not be acted on: cut off (its last call may be cut too), or a refusal."""
    if reply.stop_reason in CUT_OFF_STOP_REASONS:
        calls = "; its calls were not run" if reply.tool_calls else ""
        return f"reply was cut off at the output token limit (stop_reason {reply.stop_reason!r}){calls}"
    if reply.stop_reason in REFUSAL_STOP_REASONS and not reply.tool_calls:
        return f"model refused (stop_reason {reply.stop_reason!r}): {reply.content[:200]}"
    return None


def output_chars(reply: ModelReply) -> int:
    """What ``max_output_chars`` measures: the text plus each call's arguments as JSON."""
    return len(reply.content) + sum(len(json.dumps(c.args)) for c in reply.tool_calls)
