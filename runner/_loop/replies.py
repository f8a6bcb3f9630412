"""Check that a model's reply is acceptable before the loop acts on any of it.

A reply comes from code the runner does not control, so every check works on hostile values
without raising: no ``repr`` of a non-string, no recursion over arguments of any depth.
Arguments must be JSON data as a server would send it, at most ``MAX_ARGS_DEPTH`` levels deep.
That way the log stores exactly what the tool receives.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any, Final, NamedTuple

from .._log.limits import Limits
from .._log.statuses import Status
from .._text import describe_exception
from ..messages import CUT_OFF_STOP_REASONS, REFUSAL_STOP_REASONS, ModelReply, ToolCall, Usage
from . import observations
from .actions import Outcome, Stop

# Deep enough for any real tool's arguments, shallow enough that copying, encoding
# and logging them stay far from Python's recursion limit.
MAX_ARGS_DEPTH: Final = 100

_SCALARS = frozenset({str, int, float, bool, type(None)})


class FailedCall(NamedTuple):
    """A model call that gave the loop nothing to act on.

    ``error`` and ``error_type`` are what its ``model_call`` fact logs; ``shown`` is the reply
    it logs (an invalid one that can still be logged, for replay); ``stop`` ends the run.
    """

    error: str
    error_type: str
    shown: ModelReply | None
    stop: Stop


def failed_call(outcome: Outcome, seen_ids: Collection[str], limits: Limits) -> FailedCall | None:
    """Why a model call's outcome cannot be acted on, or None for a valid reply. Never raises."""
    if outcome.stop:  # the driver stopped the call: in its own words when it gives them
        if outcome.reason:
            return FailedCall(outcome.reason, outcome.stop, None, Stop(outcome.stop, outcome.reason))
        reason = observations.stop_reason(outcome.stop, limits, "the model")
        return FailedCall(outcome.stop, outcome.stop, None, Stop(outcome.stop, reason))
    error = outcome.error
    if error is not None:
        text = describe_exception(error)
        return FailedCall(text, type(error).__name__, None, Stop(Status.MODEL_ERROR, text))
    reply = outcome.value
    problem = reply_problem(reply, seen_ids)
    if problem:
        shown = reply if loggable(reply) else None
        return FailedCall(problem, Status.INVALID_REPLY, shown, Stop(Status.INVALID_REPLY, problem))
    return None


def reply_problem(reply: object, seen_ids: Collection[str]) -> str | None:
    """Why ``reply`` cannot be acted on (one sentence), or None. Never raises."""
    if not isinstance(reply, ModelReply):
        return f"model returned {type(reply).__name__}, expected ModelReply"
    if not isinstance(reply.content, str):
        return f"reply content must be a string, got {type(reply.content).__name__}"
    if not isinstance(reply.tool_calls, (list, tuple)):
        return f"reply tool_calls must be a list, got {type(reply.tool_calls).__name__}"
    problem = _usage_problem(reply.usage)
    if problem:
        return problem
    if reply.stop_reason is not None and type(reply.stop_reason) is not str:
        return f"reply stop_reason must be a string or None, got {type(reply.stop_reason).__name__}"
    ids: set[str] = set()
    for call in reply.tool_calls:
        if not isinstance(call, ToolCall):
            return f"tool call must be a ToolCall, got {type(call).__name__}"
        if type(call.id) is not str or not call.id:
            return f"tool call {call.name!r} has no id" if type(call.name) is str else "tool call has no id"
        if type(call.name) is not str:
            return f"tool call {call.id!r} has a name that is not a string"
        if call.id in ids or call.id in seen_ids:
            return f"duplicate call id {call.id!r}"
        ids.add(call.id)
        problem = json_problem(call.args)
        if problem:
            return f"tool call {call.id!r} has {problem}"
    return None


def json_problem(value: Any, max_depth: int = MAX_ARGS_DEPTH) -> str | None:
    """Why ``value`` is not JSON data of at most ``max_depth`` levels, or None.

    Plain types only (a ``dict`` subclass can override the very methods that
    encoding and copying call), walked with an explicit stack so depth costs
    memory, never recursion.
    """
    if type(value) is dict and _flat(value):
        return None  # the usual arguments: named strings, integers, booleans and nulls
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth > max_depth:
                return f"arguments nested deeper than {max_depth} levels"
            if kind is dict:
                for key in item:
                    if type(key) is not str:
                        return f"arguments that are not JSON: a key that is not a string: {_scalar(key)}"
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
        elif kind is float and not math.isfinite(item):
            return f"arguments that are not JSON: a number that is not finite: {item!r}"
        elif kind not in _SCALARS:
            return f"arguments that are not JSON: a value of type {kind.__name__}"
    return None


_STR = frozenset({str})
_FLAT_VALUES = frozenset({str, int, bool, type(None)})


def _flat(args: dict[Any, Any]) -> bool:
    """Whether a dict is JSON data one level deep without a float (which must be finite)."""
    return _STR.issuperset(map(type, args)) and _FLAT_VALUES.issuperset(map(type, args.values()))


MAX_TOKENS = 2**53  # past this a JSON reader (the console's JavaScript) loses the count, and a price overflows


def _counts(usage: object) -> bool:
    """Whether a reply's usage is absent or four non-negative ints, none past ``MAX_TOKENS``."""
    return usage is None or (isinstance(usage, Usage) and all(
        type(n) is int and 0 <= n <= MAX_TOKENS for n in (usage.input_tokens, usage.output_tokens,
                                                           usage.cache_read_tokens, usage.cache_write_tokens)))


def _usage_problem(usage: object) -> str | None:
    """Why a reply's usage cannot be costed and logged (one sentence), or None."""
    if _counts(usage):
        return None
    if not isinstance(usage, Usage):
        return ("reply usage must be Usage(input_tokens, output_tokens) of non-negative ints, "
                f"got {type(usage).__name__}")
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = getattr(usage, name)
        if type(value) is int and value > MAX_TOKENS:
            return f"reply usage must count at most 2**53 tokens, got {name}=an int past 2**53"
        if name.startswith("cache") and not (type(value) is int and value >= 0):
            return f"reply usage must count cached tokens in non-negative ints, got {name}={_scalar(value)}"
    return ("reply usage must be Usage(input_tokens, output_tokens) of non-negative ints, got "
            f"Usage(input_tokens={_scalar(usage.input_tokens)}, output_tokens={_scalar(usage.output_tokens)})")


def loggable(reply: object) -> bool:
    """Say whether an invalid reply can still be logged as data a fixture holds as it is.

    Then replay replays that very reply.
    One that cannot, such as one with an empty call id, is logged as the stop it caused.
    Its error text says what was wrong.
    """
    if not isinstance(reply, ModelReply) or type(reply.content) is not str or type(reply.tool_calls) is not list:
        return False
    if not _counts(reply.usage):
        return False
    return (reply.stop_reason is None or type(reply.stop_reason) is str) and all(
        isinstance(c, ToolCall) and type(c.id) is str and c.id != "" and type(c.name) is str
        and json_problem(c.args) is None for c in reply.tool_calls)


def _scalar(value: object) -> str:
    """``repr`` for the plain types whose repr cannot raise, else the type's name."""
    return repr(value) if type(value) in _SCALARS else type(value).__name__


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
