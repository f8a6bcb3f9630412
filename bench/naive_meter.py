"""``NaiveTokenMeter``: the token estimate by re-serialising the whole history at every step.

The reference the incremental ``TokenMeter`` is measured against (``bench/loop.py``) and checked
against (``tests/loop/test_limits.py``); it never runs in a run, so it lives here, not in ``runner``.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner._loop.tokens import TokenMeter, context_chars_of, naive_prompt_tokens
from runner.messages import Message, ToolSpec


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
