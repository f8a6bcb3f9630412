"""What a run returns, and the actions the loop asks its driver to perform.

``AgentCore.run`` yields an ``Action`` (call the model, call a tool, run calls together, commit, say
whether to stop here); a driver performs it and sends back an ``Outcome``. Kept
apart from the loop so that the loop's module holds decisions only.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._log.statuses import Status
from .._tools.registry import Tool
from ..errors import AgentStopped
from ..messages import AnyModel, Message, ToolCall, ToolSpec

# Caller-given run ids land in terminals, file names and trace ids: no spaces, no control characters.
_RUN_ID = re.compile(r"[\x21-\x7e]{1,64}")


@dataclass(frozen=True, slots=True)
class AgentResult:
    """Say how a run ended.

    ``answer`` is the final text for ``done``, else None.
    ``tool_calls`` counts the calls that ran; a call run again after a crash counts once.
    ``exception`` keeps what a model raised (``model_error``), or the divergence a replay ended the run with.
    ``cost_usd`` is what the run's model calls cost, None while any call's cost is unknown;
    ``cost_known_usd`` adds up the calls whose cost is known (then a floor).
    """

    status: Status
    answer: str | None
    steps: int
    tokens: int
    messages: list[Message]
    run_id: str
    error: str | None = None
    tool_calls: int = 0
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    cost_usd: float | None = 0.0
    cost_known_usd: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == Status.DONE

    def raise_for_status(self) -> AgentResult:
        """Return self for a finished run, else raise ``AgentStopped``."""
        if self.status != Status.DONE:
            raise AgentStopped(self.status, self.error or self.status, self.run_id)
        return self


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask ``model`` for a reply: the driver calls it (and awaits it, for ``arun_agent``)."""

    model: AnyModel
    messages: list[Message]
    specs: list[ToolSpec]


@dataclass(frozen=True, slots=True)
class CallTool:
    """Ask the driver to run ``tool`` on ``args``.

    ``args`` is a copy of the call's, so a tool that edits its arguments
    cannot rewrite the assistant message already appended and logged.
    """

    tool: Tool
    call: ToolCall
    args: dict[str, Any]


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
    a ``RunTools`` outcome is about.
    """

    value: Any = None
    error: BaseException | None = None
    elapsed_s: float = 0.0
    timed_out: bool = False
    stop: Status | None = None
    reason: str | None = None
    observation: str | None = None
    call_id: str | None = None


class Stop(NamedTuple):
    """Why a run stops: the status it ends with, and the reason logged with it."""

    status: Status
    reason: str


COMMITTED = Outcome()  # what a driver sends back for ``Commit``
GO_ON = Outcome()  # what a driver sends back for a ``Checkpoint`` that is no stop

def new_run_id() -> str:
    return uuid.uuid4().hex


def checked_run_id(run_id: str | None) -> str:
    """``run_id`` if it is a valid caller-given id, a new one if None; else ``ValueError``."""
    if run_id is None:
        return new_run_id()
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be 1-64 printable ASCII characters without spaces, got {run_id!r}")
    return run_id


def model_identity(model: object) -> tuple[str, str | None]:
    name = getattr(model, "model_name", None) or getattr(model, "__name__", None) or type(model).__name__
    provider = getattr(model, "provider_name", None)
    return str(name), (str(provider) if provider else None)
