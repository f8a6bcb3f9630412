"""The facts a run is made of, as types, and the kind each is stored under.

The loop emits these facts, the store writes them, and every reader gets them back as these types,
so recording and resuming speak one vocabulary and a stored run folds back into the loop's exact state.
``ModelCallStarted`` is the one transient fact: the tracer opens the chat span on it, and the log has no row for it.
Their public path is ``runner.events``; the codec between them and ``events.data`` is ``codec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypedDict

from ..messages import (
    McpRef,
    Message,
    ModelReply,
    ToolSpec,
    ToolTraits,
    Usage,
)
from .statuses import Status


class OutputSchema(TypedDict):
    """A run's typed result as the log records it (``output_type=``, docs/output.md).

    ``schema`` is what ``final_result`` takes (T's JSON Schema; a non-object T ``wrapped`` in
    ``{"result": ...}``), ``mode`` how the model gives it (``tool`` or ``native``), ``ref`` the
    type's ``module:attr`` when the starter named one.
    """

    schema: dict[str, Any]
    wrapped: bool
    mode: str
    ref: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """A new run: what it was asked, of whom, under which limits.

    ``origin`` says how a linked run came about: ``fork`` at ``forked_at_step``, ``follow_up``, or ``subagent``
    (a sub-agent's child run, serving the parent's call ``parent_call_id``, its root under ``parent_span_id``, the
    call's span). ``session_id`` names a linked run's conversation: the id of the chain's first run. ``tool_traits``
    holds the tools registered with side effects, approval or an idempotency key, or None. ``mcp_servers``: the MCP
    servers whose tools were added beside ``tools_ref`` (``--mcp``), or None. ``output_schema``: the typed result.
    """

    run_id: str = ""
    step: int = 0
    task: str
    system: str
    limits: dict[str, Any]
    tool_specs: list[ToolSpec]
    model: str
    provider: str | None = None
    agent_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    parent_run_id: str | None = None
    origin: str | None = None
    forked_at_step: int | None = None
    service_name: str | None = None
    tools_ref: str | None = None  # where the tools came from (``module:attr``), when the starter knew
    session_id: str | None = None
    tool_traits: dict[str, ToolTraits] | None = None
    mcp_servers: list[McpRef] | None = None
    output_schema: OutputSchema | None = None
    by: str | None = None  # the person who started it (``--by``, the OS user); None in older logs and pool runs
    parent_call_id: str | None = None
    parent_span_id: str | None = None  # also the caller's span a traced run's root went under
    linked_span: str | None = None  # a fork's or follow-up's link to its parent's root: TRACE_ID:SPAN_ID (hex)

    def __post_init__(self) -> None:
        if self.by is not None and not isinstance(self.by, str):
            raise TypeError("by must be a string")
        if self.parent_call_id is not None and not isinstance(self.parent_call_id, str):
            raise TypeError("parent_call_id must be a string")


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAppended:
    step: int = 0
    index: int
    message: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted:
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallStarted:
    """Transient: the model is about to be called (never stored)."""

    step: int
    prompt_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCalled:
    """A finished model call.

    ``reply`` is None when the call raised or was abandoned.
    An ``error`` beside a reply means the loop refused that reply.
    ``cost_usd`` is what the call cost, worked out when it returned, and ``price_source`` where its
    price came from; both None when the provider reported no usage or the model has no known price.
    ``first_chunk_s``: a streamed reply's time to its first piece of text (None: not streamed, or no text).
    """

    step: int
    prompt_tokens: int
    reply_tokens: int = 0
    latency_s: float = 0.0
    reply: ModelReply | None = None
    error: str | None = None
    error_type: str | None = None
    cost_usd: float | None = None
    price_source: str | None = None
    prompt_cost_usd: float | None = None
    completion_cost_usd: float | None = None
    first_chunk_s: float | None = None

    @property
    def usage(self) -> Usage | None:
        return None if self.reply is None else self.reply.usage

    @property
    def tokens(self) -> CallTokens:
        """The call's tokens: the provider's usage when it reported one, else the loop's estimate."""
        usage = self.usage
        if usage is not None:
            return CallTokens(usage.input_tokens, usage.output_tokens, estimated=False)
        return CallTokens(self.prompt_tokens, self.reply_tokens, estimated=True)


class CallTokens(NamedTuple):
    """A model call's tokens in and out, and whether they are the loop's estimate (no usage reported)."""

    input: int
    output: int
    estimated: bool

    @property
    def total(self) -> int:
        return self.input + self.output


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted:
    """A tool call about to run, committed before the function runs.

    A started call with no finish is in doubt.
    ``attempt`` counts the runs of the same call: 2 when a resume ran it again.
    """

    step: int = 0
    call_id: str
    name: str
    args: Any
    attempt: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    """A tool call that got its observation.

    ``refused`` names why a call did not run:
    ``unknown_tool``, ``invalid_args``, ``repeat``, ``denied`` or ``in_doubt``.
    A sub-agent's call names its child run (``child_run_id``) and what the child's tree spent:
    ``child_tokens`` and the known part of its cost, ``child_cost_usd`` (they count against the run's budgets).
    """

    step: int = 0
    call_id: str
    name: str
    observation: str
    ok: bool
    duration_s: float = 0.0
    ran: bool = True
    refused: str | None = None
    child_run_id: str | None = None
    child_tokens: int = 0
    child_cost_usd: float = 0.0

    def __post_init__(self) -> None:
        if self.child_run_id is None and self.child_tokens == 0:
            return
        if self.child_run_id is not None and not isinstance(self.child_run_id, str):
            raise TypeError("child_run_id must be a string")
        if isinstance(self.child_tokens, bool) or not isinstance(self.child_tokens, int) or self.child_tokens < 0:
            raise TypeError("child_tokens must be a non-negative integer")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReturnedLate:
    """A call cut short (a deadline, a cancel, its timeout) whose function returned or raised after all.

    Logged after the run's end, while the process that ran it lived: ``observation`` is what it gave
    (cut to ``max_result_chars``; an ``ERROR:`` one when it raised) and ``duration_s`` how long it took.
    A resume reads it as the call's observation, in place of the one that said its outcome is unknown.
    """

    step: int = 0
    call_id: str
    name: str
    observation: str
    ok: bool
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """A call that waits for a decision; the run stops ``awaiting_approval`` after these."""

    step: int = 0
    call_id: str
    name: str
    args: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A decision on a call awaiting approval, by whom (``decided_by``) and, for a denial, why.

    Logged when it is made (``runner resume --approve``, ``resume(decisions=...)``,
    ``RunStore.decide``), so a decision outlives the process that took it."""

    step: int = 0
    call_id: str
    approved: bool
    reason: str | None = None
    decided_by: str

    def __post_init__(self) -> None:
        if not isinstance(self.approved, bool) or not isinstance(self.call_id, str):
            raise TypeError("approved must be a bool and call_id a string")
        if not isinstance(self.reason, (str, type(None))) or not isinstance(self.decided_by, str):
            raise TypeError("reason must be a string or None and decided_by a string")

    @property
    def verdict(self) -> bool | str:
        """As the loop takes a decision: True, or a denial's reason (False when it gave none)."""
        return True if self.approved else (self.reason or False)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinished:
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDelta:
    """A piece of a reply's text as it streamed, committed in batches while the model still writes.

    ``offset`` is where ``text`` starts in the reply's text so far. Not conversation: the finished
    reply is logged as ``model_call``; a resume asks again, and replay and export leave deltas out.
    """

    step: int
    text: str
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or isinstance(self.offset, bool) or not isinstance(self.offset, int):
            raise TypeError("text must be a string and offset an integer")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputRejected:
    """A failed attempt at the run's typed result: ``final_result`` called with invalid arguments, or plain text.

    ``call_id`` is the ``final_result`` call's (None for a plain-text reply); ``error`` what was wrong,
    as the model was told. Each counts against ``max_output_retries``.
    """

    step: int
    call_id: str | None = None
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """The run's end; ``output`` is its typed result as JSON (``output_type=``), None for free text."""

    step: int = 0
    status: Status
    answer: str | None = None
    steps: int = 0
    tokens: int = 0
    tool_calls: int = 0
    error: str | None = None
    output: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResumed:
    """A stopped or orphaned run taken up again.

    It says who (``by``, a person; None in older logs) in which process (``owner``), from which status
    (``reason``), and with which limits and approval ``decisions``.
    ``tool_traits`` are those of the registry it goes on with, as in ``RunStarted``; ``output_schema``
    the typed result it goes on to end with, when the resume gave one.
    """

    run_id: str = ""
    step: int = 0
    owner: str
    reason: str
    limits: dict[str, Any]
    decisions: dict[str, bool | str] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    tool_traits: dict[str, ToolTraits] | None = None
    output_schema: OutputSchema | None = None
    by: str | None = None

    def __post_init__(self) -> None:
        if self.by is not None and not isinstance(self.by, str):
            raise TypeError("by must be a string")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQueued:
    """A run submitted to a worker pool and not started yet, as it was submitted.

    ``limits`` holds only the limits the submitter chose.
    The agent's own options fill in the rest when a worker starts it, with ``run_started`` after this fact.
    ``output_type`` (``module:attr``) replaces the agent's ``output_type`` option.
    """

    run_id: str = ""
    step: int = 0
    task: str
    agent_name: str
    limits: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    queue: str | None = None
    output_type: str | None = None  # the typed result's ``module:attr``, for the worker to import


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequeued:
    """A pool run stopped on a limit or an error, sent back to its queue (``runner resume``) by ``requeued_by``.

    ``limits`` holds only the limits given, each replacing the run's; a worker takes a stopped run only
    when this fact follows its stop, and resumes it under them.
    """

    step: int = 0
    limits: dict[str, Any] = field(default_factory=dict)
    requeued_by: str

    def __post_init__(self) -> None:
        if not isinstance(self.limits, dict) or not all(isinstance(name, str) for name in self.limits):
            raise TypeError("limits must map limit names to values")
        if not isinstance(self.requeued_by, str):
            raise TypeError("requeued_by must be a string")


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequested:
    """A cancel request the run stopped for, logged by the run itself just before its ``run_finished``.

    ``requested_by`` is who asked (``runner cancel --by``, the console's decider; default the OS user).
    Logged by the run's own writer: another process appending to a running run's log would race its writer.
    """

    step: int = 0
    requested_by: str

    def __post_init__(self) -> None:
        if not isinstance(self.requested_by, str):
            raise TypeError("requested_by must be a string")


Event = (RunStarted | MessageAppended | StepStarted | ModelCallStarted | ModelCalled | ToolStarted
         | ToolFinished | ApprovalRequested | ApprovalDecided | StepFinished | RunFinished | RunResumed | RunQueued
         | RunRequeued | ToolReturnedLate | CancelRequested | OutputRejected | ModelDelta)

KINDS: Final[dict[str, type[Any]]] = {
    "run_started": RunStarted, "message": MessageAppended, "step_started": StepStarted, "model_call": ModelCalled,
    "tool_started": ToolStarted, "tool_finished": ToolFinished, "approval_requested": ApprovalRequested,
    "approval_decided": ApprovalDecided, "step_finished": StepFinished, "run_finished": RunFinished,
    "run_resumed": RunResumed, "run_queued": RunQueued, "run_requeued": RunRequeued,
    "tool_returned_late": ToolReturnedLate, "cancel_requested": CancelRequested, "output_rejected": OutputRejected,
    "model_delta": ModelDelta,
}
KIND_OF: Final[dict[type[Any], str]] = {cls: kind for kind, cls in KINDS.items()}


def kind_of(event: Event) -> str:
    """The ``events.kind`` of a stored fact; ``ValueError`` for the transient one."""
    kind = KIND_OF.get(type(event))
    if kind is None:
        raise ValueError(f"{type(event).__name__} is not stored")
    return kind
