"""Budgets and the token estimate.

The estimate is about 4 characters a token over the JSON of the tool specs and of
the whole message list, as if the prompt were re-serialised at every step. It is
kept incrementally instead: the JSON of a list is ``[`` + items joined by ``, `` +
``]``, so its length is known from the lengths of its items, and one step costs the
size of the new messages rather than the size of the history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import Field, asdict, dataclass, field, fields
from json.encoder import encode_basestring_ascii
from typing import Any, Final, NamedTuple

from .. import _jsontext as jsontext
from ..messages import Message, ToolSpec

CHARS_PER_TOKEN: Final = 4

__all__ = [
    "Limits", "LimitRule", "limit_names", "limit_rules", "TokenMeter", "NaiveTokenMeter", "cut_observation",
    "tokens_for_chars", "json_len", "naive_prompt_tokens", "context_chars_of",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """Every budget a run is held to; None means unlimited.

    The one list of limits and their defaults: the limit keywords of ``run_agent`` and the
    others, the fixture's limits and a pool's submitted limits all come from these fields.
    ``max_identical_calls`` is the repeat guard: that many identical consecutive calls
    run, the next identical one is refused with an observation telling the model to
    change course.
    """

    max_steps: int = 8
    token_budget: int = 4000
    max_tool_calls: int | None = None
    timeout_s: float | None = None
    max_context_chars: int | None = None
    max_output_chars: int | None = None
    max_result_chars: int | None = None
    max_identical_calls: int = field(default=2, metadata={"minimum": 1})

    def __post_init__(self) -> None:
        for rule in limit_rules():
            rule.check(getattr(self, rule.name))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, recorded: Mapping[str, Any]) -> Limits:
        """The limits a log or a fixture recorded: a missing one takes its default, an unknown one is ignored."""
        return cls(**{name: recorded[name] for name in limit_names() if name in recorded})


class LimitRule(NamedTuple):
    """What values one limit takes, read from its field in ``Limits``.

    A count is a non-negative integer (at least ``minimum``), a duration (``seconds``) a
    positive number; ``optional`` limits also take None, for unlimited.
    """

    name: str
    seconds: bool
    optional: bool
    minimum: int

    def check(self, value: object) -> None:
        """Raise ``ValueError`` (naming the limit) unless ``value`` is one this limit takes."""
        if value is None and self.optional:
            return
        unlimited = " or None" if self.optional else ""
        if self.seconds:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{self.name} must be positive{unlimited}, got {value!r}")
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{self.name} must be a non-negative integer{unlimited}, got {value!r}")
        if value < self.minimum:
            raise ValueError(f"{self.name} must be at least {self.minimum}")


def _rule(limit: Field[Any]) -> LimitRule:
    kind = str(limit.type)  # the annotation's text (``from __future__ import annotations``)
    if kind not in ("int", "int | None", "float | None"):
        raise TypeError(f"Limits.{limit.name}: a limit is int, int | None or float | None, not {kind}")
    return LimitRule(limit.name, kind.startswith("float"), kind.endswith("| None"), limit.metadata.get("minimum", 0))


_RULES: Final = tuple(_rule(limit) for limit in fields(Limits))
_NAMES: Final = tuple(rule.name for rule in _RULES)


def limit_rules() -> tuple[LimitRule, ...]:
    """The rule of every limit, in the order of ``Limits``' fields."""
    return _RULES


def limit_names() -> tuple[str, ...]:
    """The name of every limit, in the order of ``Limits``' fields (each is also a keyword of ``run_agent``)."""
    return _NAMES


def tokens_for_chars(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def json_len(value: Any) -> int:
    """``len(json.dumps(value))``."""
    return len(jsontext.standard(value))


def naive_prompt_tokens(specs: Sequence[ToolSpec], messages: Sequence[Message]) -> int:
    """The reference estimate, re-serialising everything: O(history) per call."""
    return tokens_for_chars(json_len(list(specs)) + json_len(list(messages)))


def context_chars_of(message: Message) -> int:
    """Characters a message adds to the context: its content plus its calls' args JSON."""
    total = len(message["content"])
    if message["role"] == "assistant":
        total += sum(json_len(call["args"]) for call in message["tool_calls"])
    return total


# ``len(json.dumps(key)) + 2`` (the quoted key and its ``": "``) for the keys messages use:
# the same handful of keys in every message, encoded once.
_KEY_CHARS: dict[str, int] = {}
_KEY_CACHE_MAX: Final = 256
_DICT: Final = frozenset({dict})


def _key_chars(key: str) -> int:
    size = _KEY_CHARS.get(key)
    if size is None:
        size = len(encode_basestring_ascii(key)) + 2
        if len(_KEY_CHARS) < _KEY_CACHE_MAX:
            _KEY_CHARS[key] = size
    return size


def _dict_len(value: Any) -> tuple[int, int]:
    """JSON length of a dict with string keys, and the part of it that ``args`` values take."""
    chars, args = 2 * len(value) or 2, 0  # braces, and ", " between items
    for key, item in value.items():
        chars += _KEY_CHARS.get(key) or _key_chars(key)
        kind = type(item)
        if kind is str:
            chars += len(encode_basestring_ascii(item))
        elif kind is list and key == "tool_calls" and _DICT.issuperset(map(type, item)):
            chars += 2 * len(item) or 2
            for call in item:
                call_chars, call_args = _dict_len(call)
                chars += call_chars
                args += call_args
        else:
            size = len(jsontext.standard(item))
            chars += size
            if key == "args":
                args += size
    return chars, args


class TokenMeter:
    """The naive estimate's figures at O(new messages) per step.

    ``json.dumps(list)`` is ``"[" + ", ".join(items) + "]"``, so the list's length
    is 2 + the items' lengths + 2 per separator; keeping the sum of item lengths
    gives exactly the same number without re-serialising the history.
    """

    __slots__ = ("_count", "_items_chars", "_specs_chars", "context_chars", "last_chars")

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self._specs_chars = json_len(list(specs))
        self._items_chars = 0
        self._count = 0
        self.context_chars = 0
        self.last_chars = 0  # the JSON length of the message added last (a reply's token estimate reuses it)

    def add(self, message: Message) -> None:
        """Count ``json_len(message)`` and ``context_chars_of(message)``, serialising only each call's args.

        ``json.dumps`` of a dict is ``{`` + ``"key": value`` pairs joined by ``, `` + ``}``
        (of a list, ``[`` + items joined by ``, `` + ``]``), so a message is measured from
        its strings' JSON (the C string encoder) and its calls' args; nothing else is
        serialised, and the figures are exactly those of ``json.dumps``.
        """
        chars, args = _dict_len(message)
        self.last_chars = chars
        self._items_chars += chars
        self._count += 1
        self.context_chars += len(message["content"]) + (args if message["role"] == "assistant" else 0)

    def prompt_tokens(self) -> int:
        list_chars = 2 + self._items_chars + 2 * max(self._count - 1, 0)
        return tokens_for_chars(self._specs_chars + list_chars)


class NaiveTokenMeter(TokenMeter):
    """The same figures by re-serialising the whole list each time (reference and benchmark only)."""

    __slots__ = ("_messages", "_specs")

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        super().__init__(specs)
        self._specs = list(specs)
        self._messages: list[Message] = []

    def add(self, message: Message) -> None:
        self._messages.append(message)
        self.context_chars += context_chars_of(message)

    def prompt_tokens(self) -> int:
        return naive_prompt_tokens(self._specs, self._messages)


def cut_observation(text: str, max_chars: int | None) -> str:
    """Keep the head of a long observation and say how much was dropped."""
    if max_chars is None or len(text) <= max_chars:
        return text
    dropped = len(text) - max_chars
    return f"{text[:max_chars]}... [cut: {dropped} more characters]"
