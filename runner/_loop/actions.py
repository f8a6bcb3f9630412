"""The driver protocol: the actions the loop asks its driver to perform, and what the driver sends back.

``AgentCore.run`` yields an ``Action`` (call the model, call a tool, run calls together, commit, say
whether to stop here); a driver performs it and sends back an ``Outcome``, or ends the run there
with an ``EndRun``. Kept apart from the loop and from ``AgentResult``, as httpx keeps its value types
in modules named for them, so the loop's module holds decisions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .._log.statuses import Status
from .._tools.registry import Tool
from ..messages import AnyModel, Message, ToolCall, ToolSpec

if TYPE_CHECKING:
    from .children import ChildCall


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask ``model`` for a reply: the driver calls it (and awaits it, for ``arun_agent``), for step ``step``.

    With streaming on, a model that streams is consumed piece by piece (``stream``).
    """

    model: AnyModel
    messages: list[Message]
    specs: list[ToolSpec]
    step: int = 0


@dataclass(frozen=True, slots=True)
class CallTool:
    """Ask the driver to run ``tool`` on ``args``.

    ``args`` is a copy of the call's, so a tool that edits its arguments
    cannot rewrite the assistant message already appended and logged. ``child``: a sub-agent's call,
    which the driver runs as a child run (``children``) rather than with the tool's function.
    """

    tool: Tool
    call: ToolCall
    args: dict[str, Any]
    child: ChildCall | None = None


@dataclass(frozen=True, slots=True)
class RunTools:
    """Hand ``start`` over to run together with the reply's calls in flight, then report the next to end.

    The loop yields it only with a call in flight, each start already committed. The driver
    answers with the ``Outcome`` of one call (``call_id``), in whatever order they end; a
    deadline or a cancel that ends the wait is reported as ``stop`` on one call still
    running, and again for each of the others the loop asks after.
    """

    start: tuple[CallTool, ...] = ()


@dataclass(frozen=True, slots=True)
class Commit:
    """Make every fact recorded so far durable before going on: the recorder's ``sync``.

    The loop asks for it before the model is called, before tools run, after a tool with
    side effects or run together, and when the run ends (only then if the recorder is
    ``idle``: then there is nothing to commit). The sync driver calls ``sync`` (which
    blocks until a commit carrying the facts is done); the async driver awaits the
    commit instead, so the event loop's thread never waits on the store.
    """


COMMIT = Commit()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Say whether the run stops here: before its next model call (``call`` None) or before ``call``.

    The loop asks only where something can stop it (``AgentCore.checkpoints``). The sync
    and async drivers answer from the deadline and the cancel event; replay answers from
    the recording, so a recorded deadline, cancel or crash stops the replay at the same point.
    """

    call: ToolCall | None = None


BEFORE_MODEL_CALL = Checkpoint()

Action = CallModel | CallTool | RunTools | Commit | Checkpoint


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a driver reports back.

    ``stop``: the status the driver ended the action with (it gave up waiting, or a checkpoint
    is a stop); ``reason``: why, when the driver knows better than the loop (replay, reproducing a
    recorded stop). ``observation``: a tool call's observation as it is to be logged, for a call
    answered without running (replay serves a side effect's recorded one). ``call_id``: the call
    a ``RunTools`` outcome is about; ``first_chunk_s``: a streamed reply's time to its first text.
    """

    value: Any = None
    error: BaseException | None = None
    elapsed_s: float = 0.0
    timed_out: bool = False
    stop: Status | None = None
    reason: str | None = None
    observation: str | None = None
    call_id: str | None = None
    first_chunk_s: float | None = None


COMMITTED = Outcome()  # what a driver sends back for ``Commit``
GO_ON = Outcome()  # what a driver sends back for a ``Checkpoint`` that is no stop


class EndRun(Exception):
    """End the run here, in place of the action the driver was asked to perform.

    Replay ends a run this way where it diverges from its recording: ``drive`` throws it into
    the loop's generator, which logs each call handed over as not run and each call in flight
    as cut short, then closes the run with ``status`` as its own stops do.
    """

    def __init__(self, status: Status, reason: str, exception: BaseException | None = None,
                 instead_of: Action | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.exception, self.instead_of = status, reason, exception, instead_of


class Stop(NamedTuple):
    """Why a run stops: the status it ends with, and the reason logged with it."""

    status: Status
    reason: str
