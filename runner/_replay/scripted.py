"""The scripted models: replies written in advance (``ScriptedModel``), or a recording's (``ReplayModel``).

``ScriptedModel`` is what tests and the demo run on. ``ReplayModel`` plays back a
fixture's replies and compares what it is shown with what the recorded model was
shown; the replay driver asks it for an ``Answer`` (a reply, a recorded stop, or a
divergence), and a run given it as a plain model gets the reply or an exception.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .._log.statuses import Status
from ..errors import ReplayDivergence, ScriptError, ScriptExhausted
from ..messages import Cost, Message, ModelReply, ToolCall, ToolSpec, Usage
from .divergence import compare_calls, compare_messages, compare_specs, unrecorded_run
from .fixture import Fixture, fixture_from_run, load_fixture

if TYPE_CHECKING:
    from ..store import RunStore


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
        """``ReplayModel.from_fixture``."""
        return ReplayModel.from_fixture(path, strict)

    @classmethod
    def from_run(cls, store: RunStore, run_id: str, strict: bool = True) -> ReplayModel:
        """``ReplayModel.from_run``."""
        return ReplayModel.from_run(store, run_id, strict)

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


class RecordedStop(NamedTuple):
    """Hold the status and reason a recorded run stopped with at a model call that gave no reply.

    The model raised there, or a deadline or a cancel hit while it thought.
    """

    status: Status
    reason: str


# What the recording says at a model call: the recorded reply, its stop, or how the replay differs.
Answer = ModelReply | RecordedStop | ReplayDivergence


class ReplayModel(ScriptedModel):
    """A scripted model built from a recording; strict by default.

    Strict, it answers with the first difference between what it is shown and what
    the recorded model was shown. Lenient mode (``strict=False``) plays back without
    stopping at differences but still collects them in ``differences``.
    """

    def __init__(self, fixture: Fixture, strict: bool = True) -> None:
        super().__init__([])
        self.fixture = fixture
        self.strict = strict
        self.replies = [fixture.reply(i) if "stop" not in block else ModelReply()
                        for i, block in enumerate(fixture.replies)]
        self.model_name = str(fixture.data.get("model") or "replay")
        self.provider_name = str(fixture.data.get("provider") or "replay")
        self.differences: list[ReplayDivergence] = []
        self.step = 0  # the step number of the model call being worked on

    @classmethod
    def from_fixture(cls, path: str | Path, strict: bool = True) -> ReplayModel:
        """Play back a fixture file's replies (strict: also check what the loop shows)."""
        return ReplayModel(load_fixture(path), strict=strict)

    @classmethod
    def from_run(cls, store: RunStore, run_id: str, strict: bool = True) -> ReplayModel:
        """Play back a stored run's replies (``run_id`` may be a unique prefix)."""
        return ReplayModel(fixture_from_run(store.find_run(run_id), store), strict=strict)

    def with_output_schema(self, schema: dict[str, Any], name: str) -> ReplayModel:
        """Itself: the recording's replies already hold the structured output (``output_mode="native"``)."""
        return self

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        """The recorded reply, when called as a plain model; a divergence is raised.

        A plain run cannot stop where the recording stopped: that is ``ScriptError``
        (``replay`` reproduces such a stop).
        """
        answer = self.answer(messages, tool_specs)
        match answer:
            case ModelReply():
                return answer
            case RecordedStop(status, reason):
                raise ScriptError(f"the recording has no reply for model call {self.calls}: it stopped there "
                                  f"with {status} ({reason})")
            case ReplayDivergence():
                raise answer

    def answer(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec], step: int | None = None) -> Answer:
        """What the recording says at this model call, given what the loop shows; never raises.

        ``step`` is the number the loop gave this step (the replay driver knows it); a
        difference is named at it, so a fork's divergence carries its log's step number.
        """
        self.calls += 1
        self._shown.append((messages, len(messages)))
        made, blocks = self.calls, self.fixture.replies
        self.step = step if step is not None else self.fixture.first_step + made - 1
        at = self.step
        if made > len(blocks):
            return ReplayDivergence(
                at, None, "replies",
                f"at step {at} the loop asked the model again, but the recording ended after "
                f"{len(blocks)} model calls")
        if made == 1:  # the specs are fixed for a run: compared once, before the messages
            found = self._differs(compare_specs(at, self.fixture.tool_specs, tool_specs))
            if found is not None:
                return found
        found = self._differs(compare_messages(at, self.fixture.messages_before(made), messages))
        if found is not None:
            return found
        block = blocks[made - 1]
        if "stop" in block:
            return RecordedStop(Status(block["stop"]["status"]), block["stop"]["reason"])
        found = self._differs(compare_calls(at, block, last=made == len(blocks)))
        return found if found is not None else self.replies[made - 1]

    def recorded_cost(self, usage: Usage | None) -> Cost | None:
        """The recorded cost of the reply just served (a replay counts a cost budget as the run did)."""
        if self.calls == 0 or self.calls > len(self.fixture.replies):
            return None
        return self.fixture.cost(self.calls - 1)

    def observation(self, call: ToolCall) -> str | None:
        """The recorded observation of ``call`` in the reply being worked on, if the recording handled it."""
        blocks = self.fixture.replies
        if self.calls == 0 or self.calls > len(blocks):
            return None
        handled = blocks[self.calls - 1].get("observations", [])
        return next((str(o["content"]) for o in handled if (o["call_id"], o["name"]) == (call.id, call.name)), None)

    def unrecorded(self, call: ToolCall) -> ReplayDivergence | None:
        """The divergence of running ``call``, unless the recording handled it in the reply being worked on."""
        if self.calls == 0 or self.calls > len(self.fixture.replies) or self.observation(call) is not None:
            return None
        difference = unrecorded_run(self.step, str(call.name), call.id)
        self.differences.append(difference)
        return difference

    def _differs(self, difference: ReplayDivergence | None) -> ReplayDivergence | None:
        """Note a difference; it ends a strict replay (returned), a lenient one goes on (None)."""
        if difference is None:
            return None
        self.differences.append(difference)
        return difference if self.strict else None
