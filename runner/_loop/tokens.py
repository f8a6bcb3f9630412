"""The token estimate, and the cut of a long observation.

The estimate is about 4 characters a token over the JSON of the tool specs and of
the whole message list, as if the prompt were re-serialised at every step. It is
kept incrementally instead: the JSON of a list is ``[`` + items joined by ``, `` +
``]``, so its length is known from the lengths of its items, and one step costs the
size of the new messages rather than the size of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, Final

from .. import _jsontext
from ..messages import Message, ToolSpec

CHARS_PER_TOKEN: Final = 4

__all__ = [
    "TokenMeter", "cut_observation", "tokens_for_chars", "json_len", "naive_prompt_tokens",
    "context_chars_of",
]


def tokens_for_chars(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def json_len(value: Any) -> int:
    """``len(json.dumps(value))``."""
    return len(_jsontext.standard(value))


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
            size = len(_jsontext.standard(item))
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


def cut_observation(text: str, max_chars: int | None) -> str:
    """Keep the head of a long observation and say how much was dropped."""
    if max_chars is None or len(text) <= max_chars:
        return text
    dropped = len(text) - max_chars
    return f"{text[:max_chars]}... [cut: {dropped} more characters]"
