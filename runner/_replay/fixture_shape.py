"""Check the shape of a replay fixture in one place, when it is loaded.

People edit fixtures by hand, so replay must never meet a field of the wrong type deep in the loop.
Every field replay reads is checked here, and the first problem is named by its path.
Fields replay does not read are checked only for their type when present.
Unknown keys are ignored, so a newer exporter's additions do not break an older reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from .._jsontext import finite
from .._log.limits import LimitRule, limit_rules
from .._log.statuses import STATUSES, Status
from ..errors import FixtureError

Check = Callable[[Any, str], None]

FORMAT: Final = "durable-agent-runner/fixture"
VERSION: Final = 1

STOP_STATUSES: Final = tuple(s for s in STATUSES if s != Status.DONE)
# Every fixture has these two limits; one added since may be missing (the run's default then).
FIRST_LIMITS: Final = ("max_steps", "token_budget")


class ShapeError(FixtureError):
    """A fixture field is missing or has the wrong type; ``field`` is its path."""

    def __init__(self, field: str, problem: str, source: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.source = source
        where = f"fixture {source!r}: field" if source is not None else "fixture field"
        super().__init__(f"{where} {field!r} {problem}")

    def at(self, source: str) -> ShapeError:
        """The same problem, naming the file it was found in."""
        return ShapeError(self.field, self.problem, source)


def json_type(value: Any) -> str:
    """The JSON name of a value's type, as a fixture's author would call it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _wrong(path: str, expected: str, value: Any) -> ShapeError:
    return ShapeError(path, f"must be {expected}, got {json_type(value)}")


def string(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise _wrong(path, "a string", value)


def boolean(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _wrong(path, "true or false", value)


def nonempty_string(value: Any, path: str) -> None:
    string(value, path)
    if not value:
        raise ShapeError(path, "must not be empty")


def count(value: Any, path: str) -> None:
    """A non-negative integer (a JSON ``true`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(path, "a non-negative integer", value)
    if value < 0:
        raise ShapeError(path, f"must be a non-negative integer, got {value}")


def non_negative(value: Any, path: str) -> None:
    """A finite number at least 0 (an amount of USD)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value):
        raise _wrong(path, "a number", value)
    if value < 0:
        raise ShapeError(path, f"must not be negative, got {value}")


def positive_count(value: Any, path: str) -> None:
    count(value, path)
    if value < 1:
        raise ShapeError(path, f"must be at least 1, got {value}")


def seconds(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(path, "a positive number", value)
    if not value > 0:
        raise ShapeError(path, f"must be a positive number, got {value}")


def anything(value: Any, path: str) -> None:
    """Any JSON value (tool arguments: the loop itself refuses what is not an object)."""


def version(value: Any, path: str) -> None:
    if isinstance(value, bool) or value != VERSION:
        raise ShapeError(path, f"must be {VERSION} (the version this runner reads), got {value!r}")


def one_of(*allowed: str) -> Check:
    def check(value: Any, path: str) -> None:
        string(value, path)
        if value not in allowed:
            raise ShapeError(path, f"must be one of {', '.join(allowed)}; got {value!r}")

    return check


def nullable(inner: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if value is not None:
            inner(value, path)

    return check


def array(item: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _wrong(path, "an array", value)
        for index, element in enumerate(value):
            item(element, f"{path}[{index}]")

    return check


def obj(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _wrong(path, "an object", value)
        prefix = f"{path}." if path else ""
        for key, inner in required.items():
            if key not in value:
                raise ShapeError(prefix + key, "is missing")
            inner(value[key], prefix + key)
        for key, inner in (optional or {}).items():
            if key in value:
                inner(value[key], prefix + key)

    return check


USAGE: Final = obj({"input_tokens": count, "output_tokens": count},
                   {"cache_read_tokens": count, "cache_write_tokens": count})
CALL: Final = obj({"id": nonempty_string, "name": string, "args": anything})
OBSERVATION: Final = obj({"call_id": string, "name": string, "content": string})
STOP: Final = obj({"status": one_of(*STOP_STATUSES), "reason": string})
REPLY: Final = obj(
    {"content": string, "tool_calls": array(CALL), "observations": array(OBSERVATION)},
    {"usage": nullable(USAGE), "stop_reason": nullable(string), "rejected": string, "step": count,
     "cost_usd": non_negative, "price_source": string, "told": string},
)
def reply_block(value: Any, path: str) -> None:
    """A recorded reply, or a recorded stop (the model raised, or the run stopped while waiting on it)."""
    if isinstance(value, dict) and "stop" in value:
        obj({"stop": STOP}, {"step": count})(value, path)
    else:
        REPLY(value, path)


def at_least(minimum: int) -> Check:
    def check(value: Any, path: str) -> None:
        count(value, path)
        if value < minimum:
            raise ShapeError(path, f"must be at least {minimum}, got {value}")

    return check


def limit_check(rule: LimitRule) -> Check:
    """The check of one limit's value, from the rule ``Limits`` gives it."""
    check = seconds if rule.seconds else at_least(rule.minimum) if rule.minimum else count
    return nullable(check) if rule.optional else check


LIMITS: Final = obj({rule.name: limit_check(rule) for rule in limit_rules() if rule.name in FIRST_LIMITS},
                    {rule.name: limit_check(rule) for rule in limit_rules() if rule.name not in FIRST_LIMITS})
SPEC: Final = obj({"name": string, "description": string, "parameters": obj({})})
OUTCOME: Final = obj(
    {"status": one_of(*STATUSES), "answer": nullable(string), "error": nullable(string)},
    {"stopped_before_call": nullable(string), "steps": count, "tokens": count, "tool_calls": count,
     "output": anything},
)
OUTPUT_SCHEMA: Final = obj({"schema": obj({}), "wrapped": boolean, "mode": one_of("tool", "native")},
                           {"ref": nullable(string)})
MESSAGE: Final = obj({"role": one_of("system", "user", "assistant", "tool"), "content": string},
                     {"tool_calls": array(CALL), "tool_call_id": string, "name": string})
DECISION_VALUE: Final = "True, False or a reason"


def decision(value: Any, path: str) -> None:
    if not isinstance(value, (bool, str)):
        raise _wrong(path, DECISION_VALUE, value)


def decisions(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _wrong(path, "an object", value)
    for key, item in value.items():
        decision(item, f"{path}.{key}")


RESUME: Final = obj(
    {"after_replies": count, "status": string, "limits": LIMITS, "decisions": decisions, "reason": string},
    {"error": nullable(string), "stopped_before_call": nullable(string), "in_doubt": array(string),
     "in_model_call": anything},
)


def children(value: Any, path: str) -> None:
    """The fixtures of a run's sub-agent calls' child runs, by call id: each checked as a whole fixture is."""
    if not isinstance(value, dict):
        raise _wrong(path, "an object", value)
    for call_id, child in value.items():
        TOP(child, f"{path}.{call_id}")


TOP: Final = obj(
    {"format": one_of(FORMAT), "version": version, "task": string, "system": string, "limits": LIMITS,
     "tool_specs": array(SPEC), "replies": array(reply_block), "outcome": OUTCOME},
    {"model": nullable(string), "provider": nullable(string), "run_id": nullable(string),
     "history": array(MESSAGE), "forked_at_step": nullable(positive_count), "resumes": array(RESUME),
     "output_schema": OUTPUT_SCHEMA, "children": children},
)


def check_fixture(data: Any) -> None:
    """Raise ``ShapeError`` naming the first field that replay could not use."""
    if not isinstance(data, dict):
        raise FixtureError(f"a fixture is a JSON object, got {json_type(data)}")
    TOP(data, "")
