"""The one codec between the facts and ``events.data``: ``encode``, ``decode``, ``decode_all``, ``span_key``.

The store writes the facts with ``encode``, and every reader gets them back with ``decode``.
Each kind's JSON keeps the log's shape, since the ``events`` table is a supported interface.
Fields added later are written only when set, so old rows decode and old readers see nothing new.
A tool message refers to its call's ``tool_finished`` (``content_from``) rather than repeat a result
that may be megabytes; ``decode_all`` folds it back. Its public path is ``runner.events``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Final

from .._jsontext import finite
from ..errors import StoreError
from ..messages import check_mcp_refs, check_traits, parse_reply, reply_data
from .facts import (
    KINDS,
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    ModelDelta,
    OutputRejected,
    RunFinished,
    RunQueued,
    RunRequeued,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolReturnedLate,
    ToolStarted,
    kind_of,
)
from .statuses import Status

if TYPE_CHECKING:
    from .records import StoredEvent

# Kinds whose step is the row's ``step`` column only (the log's original shape).
_STEP_IN_COLUMN: Final = frozenset({MessageAppended, ToolStarted, ToolFinished, ApprovalRequested,
                                    ApprovalDecided, RunStarted, RunFinished, RunResumed, RunQueued,
                                    RunRequeued, ToolReturnedLate, CancelRequested, OutputRejected, ModelDelta})
# Fields written only when they differ from their default (added after the first release).
_OPTIONAL: Final = frozenset({"parent_run_id", "origin", "forked_at_step", "service_name", "attempt", "refused",
                              "decisions", "model", "provider", "tools_ref", "session_id", "tool_traits",
                              "mcp_servers", "by", "cost_usd", "price_source", "prompt_cost_usd", "completion_cost_usd",
                              "output_schema", "output", "output_type", "parent_call_id", "child_run_id",
                              "child_tokens", "child_cost_usd", "first_chunk_s", "parent_span_id",
                              "linked_span"})
_NAMES: Final[dict[type[Any], tuple[str, ...]]] = {cls: tuple(f.name for f in fields(cls)) for cls in KINDS.values()}


def _shape(hint: Any) -> tuple[tuple[type, ...], bool] | None:
    """The JSON types a field of type ``hint`` may hold, and whether its items must be objects; None: not checked."""
    if hint in (str, int, bool, dict, list):
        return (hint,), False
    if hint is float:
        return (int, float), False
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        found = [_shape(arg) for arg in args if arg is not type(None)]
        if len(found) == 1 and found[0] is not None:
            return (*found[0][0], type(None)), found[0][1]
        return None
    if origin is dict:
        return (dict,), False
    if origin is list:  # a list of objects (tool specs, MCP servers): each item checked too
        return (list,), bool(args) and (typing.is_typeddict(args[0]) or typing.get_origin(args[0]) is dict)
    return None


# Per kind, the fields whose JSON type is checked on decode (the spans and views are made of them):
# by name, the types allowed (a set too, for the exact types JSON gives) and whether a list holds objects.
_SHAPES: Final[dict[type[Any], dict[str, tuple[frozenset[type], tuple[type, ...], bool]]]] = {
    cls: {name: (frozenset(shape[0]), shape[0], shape[1]) for name, hint in typing.get_type_hints(cls).items()
          if name != "run_id" and (shape := _shape(hint)) is not None}
    for cls in KINDS.values()}
_DEFAULTS: Final[dict[str, Any]] = {"attempt": 1, "decisions": {}, "cost_usd": None, "price_source": None,
                                    "prompt_cost_usd": None, "completion_cost_usd": None, "output_schema": None,
                                    "output": None, "output_type": None, "child_run_id": None, "child_tokens": 0,
                                    "child_cost_usd": 0.0, "first_chunk_s": None}


_YEAR_S: Final = 365 * 24 * 3600  # the longest model call a log may hold (span times are taken from it)
_SPAN_ID: Final = re.compile(r"[0-9a-f]{16}")
_LINK: Final = re.compile(r"[0-9a-f]{32}:[0-9a-f]{16}")

# A tool message stored without its content names where the content is: its call's last ``tool_finished``.
CONTENT_FROM: Final = "content_from"
_TOOL_FINISHED: Final = "tool_finished"


class EventDecodeError(StoreError):
    """A stored event that is not one of this runner's facts (a foreign or damaged row)."""



_ALWAYS, _UNLESS_DEFAULT, _UNLESS_NONE = 0, 1, 2
_NO_DEFAULT = object()


def _field_rule(cls: type[Any], name: str) -> int:
    if cls is RunStarted:
        return _UNLESS_NONE if name in _OPTIONAL - {"provider"} else _ALWAYS
    return _UNLESS_DEFAULT if name in _OPTIONAL else _ALWAYS


# Per stored class, the fields ``data`` holds and when each is left out: ``step`` lives in its
# column for most facts, ``run_id`` always does, optional fields are written only when set.
_ENCODED: Final[dict[type[Any], tuple[tuple[str, int, Any], ...]]] = {
    cls: tuple((name, _field_rule(cls, name), _DEFAULTS.get(name, _NO_DEFAULT)) for name in names
               if not ((name == "step" and cls in _STEP_IN_COLUMN) or name == "run_id"))
    for cls, names in _NAMES.items()}


def encode(event: Event, observations: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """``(kind, data)`` for the ``events`` row; ``data`` is JSON-able.

    ``observations`` are the observations of the calls whose ``tool_finished`` the log holds, by call id
    (the last one of each): a tool message that repeats its call's is written as a reference to it.
    """
    kind = kind_of(event)
    if observations and isinstance(event, MessageAppended):
        shared = _shared(event, observations)
        if shared is not None:
            return kind, shared
    data: dict[str, Any] = {}
    for name, rule, default in _ENCODED[type(event)]:
        value = getattr(event, name)
        if rule and (value is None or (rule == _UNLESS_DEFAULT and value == default)):
            continue
        data[name] = value
    if isinstance(event, ModelCalled):
        reply = event.reply
        data["reply"] = None if reply is None else reply_data(reply)
        data["usage"] = data["reply"]["usage"] if data["reply"] else None
    return kind, data


def _shared(event: MessageAppended, observations: Mapping[str, str]) -> dict[str, Any] | None:
    """A tool message's data as a reference to its call's observation; None when it is not that observation."""
    message = event.message
    if message["role"] != "tool":
        return None
    observation = observations.get(message["tool_call_id"])
    content = message["content"]
    if observation is None or (observation is not content and observation != content):
        return None
    return {"index": event.index, "message": {k: v for k, v in message.items() if k != "content"},
            CONTENT_FROM: _TOOL_FINISHED}


def fold_in(kind: str, data: Any, observations: dict[str, str]) -> Any:
    """A row's ``data`` as it was before ``encode`` shared it; ``observations`` learns each ``tool_finished``.

    Read a run's rows in order through this: a message that refers to its call's observation gets
    its content back (``EventDecodeError`` when no ``tool_finished`` of its call came before it).
    """
    if not isinstance(data, dict):
        return data
    if kind == _TOOL_FINISHED:
        call_id, observation = data.get("call_id"), data.get("observation")
        if isinstance(call_id, str) and isinstance(observation, str):
            observations[call_id] = observation
    elif CONTENT_FROM in data:
        message = data.get("message")
        call_id = message.get("tool_call_id") if isinstance(message, dict) else None
        if data[CONTENT_FROM] != _TOOL_FINISHED or not isinstance(call_id, str) or call_id not in observations:
            raise EventDecodeError(f"message refers to no logged observation of call {call_id!r}")
        assert isinstance(message, dict)
        data = {k: v for k, v in data.items() if k != CONTENT_FROM}
        data["message"] = {**message, "content": observations[call_id]}
    return data


def decode(kind: str, data: Mapping[str, Any], step: int = 0, run_id: str = "") -> Event:
    """The fact a stored row holds. ``EventDecodeError`` (one line) for a row that is not one.

    ``step`` and ``run_id`` are the row's columns (the facts that name them keep them there)."""
    cls = KINDS.get(kind)
    if cls is None:
        raise EventDecodeError(f"unknown event kind {kind!r}")
    if not isinstance(data, Mapping):
        raise EventDecodeError(f"{kind} event data is {type(data).__name__}, not an object")
    values = {name: data[name] for name in _NAMES[cls] if name in data}
    if cls in _STEP_IN_COLUMN or "step" not in values:
        values["step"] = step
    if cls in (RunStarted, RunResumed, RunQueued):
        values["run_id"] = run_id
    try:
        if cls is RunFinished:
            values["status"] = Status(values["status"])
        if cls is ModelCalled:
            values["reply"] = None if data.get("reply") is None else parse_reply(data["reply"])
            for name in ("cost_usd", "prompt_cost_usd", "completion_cost_usd"):
                _check_cost(name, values.get(name))
            for name in ("latency_s", "first_chunk_s"):
                _check_seconds(name, values.get(name))
        if cls is ToolFinished:
            _check_cost("child_cost_usd", values.get("child_cost_usd"))
        check_traits(values.get("tool_traits"))  # run_started's and run_resumed's
        check_mcp_refs(values.get("mcp_servers"))
        _check_output_schema(values.get("output_schema"))
        _check_span_id(values.get("parent_span_id"))
        _check_link(values.get("linked_span"))
        event: Event = cls(**values)  # a fact's own checks first: theirs are the messages a reader knows
        _check_types(cls, values)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise EventDecodeError(f"{kind} event is malformed: {exc}") from None
    return event


def _check_types(cls: type[Any], values: Mapping[str, Any]) -> None:
    """Each field the row holds has its fact's JSON type (a forged one must not reach the spans as another)."""
    shapes = _SHAPES[cls]
    for name, value in values.items():
        shape = shapes.get(name)
        if shape is None:
            continue
        exact, allowed, objects = shape
        kind = type(value)
        if kind not in exact and (kind is bool or not isinstance(value, allowed)):  # a bool is no number here
            raise ValueError(f"{name} must be {_named(allowed)}, got {kind.__name__}")
        if objects and kind is list and not all(isinstance(item, dict) for item in value):
            raise ValueError(f"{name} must be a list of objects")


def _named(allowed: tuple[type, ...]) -> str:
    names = {str: "a string", int: "a number", float: "a number", bool: "a bool", dict: "an object",
             list: "a list", type(None): "null"}
    return " or ".join(dict.fromkeys(names[kind] for kind in allowed))


def _check_output_schema(declared: object) -> None:
    """A logged typed result is None or ``OutputSchema``'s shape (replay and resume build a check from it)."""
    if declared is None:
        return
    if not isinstance(declared, dict) or not isinstance(declared.get("schema"), dict):
        raise ValueError("output_schema must be an object with a 'schema' object")
    if not isinstance(declared.get("wrapped"), bool) or declared.get("mode") not in ("tool", "native"):
        raise ValueError("output_schema needs 'wrapped' (a bool) and 'mode' ('tool' or 'native')")
    if not isinstance(declared.get("ref"), (str, type(None))):
        raise ValueError("output_schema's 'ref' must be a string or null")


def _check_span_id(span_id: object) -> None:
    """A logged parent span is None or 16 lowercase hex digits, as OpenTelemetry writes a span id."""
    if span_id is not None and not (isinstance(span_id, str) and _SPAN_ID.fullmatch(span_id)):
        raise ValueError(f"parent_span_id must be 16 lowercase hex digits, got {span_id!r}")


def _check_link(link: object) -> None:
    """A logged link is None or ``TRACE_ID:SPAN_ID``: 32 and 16 lowercase hex digits."""
    if link is not None and not (isinstance(link, str) and _LINK.fullmatch(link)):
        raise ValueError(f"linked_span must be 32 and 16 lowercase hex digits joined by ':', got {link!r}")


def _check_cost(name: str, cost: object) -> None:
    """A logged cost is None or a finite, non-negative number of USD (a forged one must not add up)."""
    if cost is None:
        return
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not finite(cost) or cost < 0:
        raise ValueError(f"{name} must be a non-negative number, got {cost!r}")


def _check_seconds(name: str, seconds: object) -> None:
    """A logged call's time is None or a number of seconds from 0 to a year (its span's start is taken from it)."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not finite(seconds) or not (
            0 <= seconds <= _YEAR_S):
        shown = "an int too large for a float" if isinstance(seconds, int) and not finite(seconds) else repr(seconds)
        raise ValueError(f"{name} must be a number of seconds from 0 to a year, got {shown}")


def span_key(event: Event, segment: int = 0) -> str:
    """The span a fact belongs to: ``run``, ``step:N``, ``chat:N`` or ``tool:CALL_ID``.

    A resumed run's ``segment`` (1 after the first resume...) suffixes ``@N``, so the
    spans of the part that ran after a resume never share a derived id with the
    ones before it (the same step or call can be worked on in both).
    """
    key = _base_key(event)
    return f"{key}@{segment}" if segment else key


def _base_key(event: Event) -> str:
    if isinstance(event, (StepStarted, StepFinished, ApprovalRequested)):
        return f"step:{event.step}"
    if isinstance(event, (ModelCallStarted, ModelCalled, ModelDelta)):
        return f"chat:{event.step}"
    if isinstance(event, (ToolStarted, ToolFinished, ToolReturnedLate)):
        return f"tool:{event.call_id}"
    if isinstance(event, MessageAppended):
        message = event.message
        if message["role"] == "assistant":
            return f"chat:{event.step}"
        if message["role"] == "tool":
            return f"tool:{message['tool_call_id']}"
    return "run"


def decode_all(rows: Iterable[StoredEvent], run_id: str = "") -> list[Event]:
    """Every fact of a stored run, in order; a row that is not one names the run and its place.

    A tool message stored as a reference to its call's observation comes back whole (``fold_in``).
    """
    facts: list[Event] = []
    observations: dict[str, str] = {}
    for row in rows:
        try:
            facts.append(decode(row.kind, fold_in(row.kind, row.data, observations), row.step, run_id))
        except EventDecodeError as exc:
            raise EventDecodeError(f"run {run_id} event {row.seq}: {exc}") from None
    return facts
