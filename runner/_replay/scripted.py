"""``ScriptedModel``: a model that plays back replies written in advance.

It is what tests and the demo run on, and what replay builds from a stored run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ScriptError, ScriptExhausted
from ..messages import Message, ModelReply, ToolSpec

if TYPE_CHECKING:
    from ..store import RunStore
    from .replayer import ReplayModel


class ScriptedModel:
    """Returns ``replies`` in order; a plain string is a final answer.

    ``seen`` holds a deep copy of the message list shown at each call. The copy is
    made when ``seen`` is read, from the list and its length at the call: the loop
    only appends and never edits a message once appended (tools get copies of their
    arguments), so recording stays O(1) per call however long the run.
    """

    model_name = "scripted"
    provider_name = "scripted"

    def __init__(self, replies: Iterable[ModelReply | str]) -> None:
        self.replies = [r if isinstance(r, ModelReply) else ModelReply(content=r) for r in replies]
        self.calls = 0
        self._shown: list[tuple[Sequence[Message], int]] = []

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        self.calls += 1
        self._shown.append((messages, len(messages)))
        if self.calls > len(self.replies):
            raise ScriptExhausted(self.calls, len(self.replies))
        return self.replies[self.calls - 1]

    @classmethod
    def from_fixture(cls, path: str | Path, strict: bool = True) -> ReplayModel:
        """Play back a fixture file's replies (strict: also check what the loop shows)."""
        from .replayer import scripted_from_fixture

        return scripted_from_fixture(path, strict)

    @classmethod
    def from_run(cls, store: RunStore, run_id: str, strict: bool = True) -> ReplayModel:
        """Play back a stored run's replies (``run_id`` may be a unique prefix)."""
        from .replayer import scripted_from_run

        return scripted_from_run(store, run_id, strict)

    @property
    def seen(self) -> list[list[Message]]:
        return [copy.deepcopy(list(messages[:count])) for messages, count in self._shown]

    @property
    def remaining(self) -> int:
        return max(len(self.replies) - self.calls, 0)

    def assert_complete(self) -> None:
        """Raise ``ScriptError`` unless every reply was used exactly once."""
        if self.calls != len(self.replies):
            raise ScriptError(
                f"scripted model was called {self.calls} time{'s' * (self.calls != 1)} for "
                f"{len(self.replies)} {'reply' if len(self.replies) == 1 else 'replies'}"
            )
