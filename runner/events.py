"""The facts a run is made of, as types, and the one codec between them and ``events.data``.

The loop emits these facts, the store writes them with ``encode``, and every reader gets them back with ``decode``.
So recording and resuming speak one vocabulary, and a stored run folds back into the loop's exact state.
Each kind's JSON keeps the log's shape, since the ``events`` table is a supported interface.
Fields added later are written only when set, so old rows decode and old readers see nothing new.
``ModelCallStarted`` is the one transient fact: the tracer opens the chat span on it, and the log has no row for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ._jsontext import finite
from .errors import StoreError
from .messages import (
    McpRef,
    Message,
    ModelReply,
    ToolSpec,
    ToolTraits,
    Usage,
    check_mcp_refs,
    check_traits,
    parse_reply,
    reply_data,
)

if TYPE_CHECKING:  # the records module imports this one
    from ._log.records import StoredEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """A new run: what it was asked, of whom, under which limits.

    ``origin`` says how a linked run came about: ``fork`` at ``forked_at_step``, or ``follow_up``.
    ``session_id`` names a linked run's conversation: the id of the chain's first run.
    ``tool_traits`` holds the tools registered with side effects, approval or an idempotency key, or None.
    ``mcp_servers`` are the MCP servers whose tools were added beside ``tools_ref`` (``--mcp``), or None.
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
    """

    step: int = 0
    call_id: str
    name: str
    observation: str
    ok: bool
    duration_s: float = 0.0
    ran: bool = True
    refused: str | None = None


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
class RunFinished:
    step: int = 0
    status: str
    answer: str | None = None
    steps: int = 0
    tokens: int = 0
    tool_calls: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResumed:
    """A stopped or orphaned run taken up again.

    It says by whom (``owner``), from which status (``reason``), and with which limits and approval ``decisions``.
    ``tool_traits`` are those of the registry it goes on with, as in ``RunStarted``.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQueued:
    """A run submitted to a worker pool and not started yet, as it was submitted.

    ``limits`` holds only the limits the submitter chose.
    The agent's own options fill in the rest when a worker starts it, with ``run_started`` after this fact.
    """

    run_id: str = ""
    step: int = 0
    task: str
    agent_name: str
    limits: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    queue: str | None = None


Event = (RunStarted | MessageAppended | StepStarted | ModelCallStarted | ModelCalled | ToolStarted
         | ToolFinished | ApprovalRequested | ApprovalDecided | StepFinished | RunFinished | RunResumed | RunQueued)

KINDS: Final[dict[str, type[Any]]] = {
    "run_started": RunStarted,
    "message": MessageAppended,
    "step_started": StepStarted,
    "model_call": ModelCalled,
    "tool_started": ToolStarted,
    "tool_finished": ToolFinished,
    "approval_requested": ApprovalRequested,
    "approval_decided": ApprovalDecided,
    "step_finished": StepFinished,
    "run_finished": RunFinished,
    "run_resumed": RunResumed,
    "run_queued": RunQueued,
}
KIND_OF: Final[dict[type[Any], str]] = {cls: kind for kind, cls in KINDS.items()}

# Kinds whose step is the row's ``step`` column only (the log's original shape).
_STEP_IN_COLUMN: Final = frozenset({MessageAppended, ToolStarted, ToolFinished, ApprovalRequested,
                                    ApprovalDecided, RunStarted, RunFinished, RunResumed, RunQueued})
# Fields written only when they differ from their default (added after the first release).
_OPTIONAL: Final = frozenset({"parent_run_id", "origin", "forked_at_step", "service_name", "attempt", "refused",
                              "decisions", "model", "provider", "tools_ref", "session_id", "tool_traits",
                              "mcp_servers", "cost_usd", "price_source", "prompt_cost_usd", "completion_cost_usd"})
_NAMES: Final[dict[type[Any], tuple[str, ...]]] = {cls: tuple(f.name for f in fields(cls)) for cls in KINDS.values()}
_DEFAULTS: Final[dict[str, Any]] = {"attempt": 1, "decisions": {}, "cost_usd": None, "price_source": None,
                                    "prompt_cost_usd": None, "completion_cost_usd": None}


class EventDecodeError(StoreError):
    """A stored event that is not one of this runner's facts (a foreign or damaged row)."""


def kind_of(event: Event) -> str:
    """The ``events.kind`` of a stored fact; ``ValueError`` for the transient one."""
    kind = KIND_OF.get(type(event))
    if kind is None:
        raise ValueError(f"{type(event).__name__} is not stored")
    return kind


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


def encode(event: Event) -> tuple[str, dict[str, Any]]:
    """``(kind, data)`` for the ``events`` row; ``data`` is JSON-able."""
    kind = kind_of(event)
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
        if cls is ModelCalled:
            values["reply"] = None if data.get("reply") is None else parse_reply(data["reply"])
            for name in ("cost_usd", "prompt_cost_usd", "completion_cost_usd"):
                _check_cost(name, values.get(name))
        check_traits(values.get("tool_traits"))  # run_started's and run_resumed's
        check_mcp_refs(values.get("mcp_servers"))
        event: Event = cls(**values)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise EventDecodeError(f"{kind} event is malformed: {exc}") from None
    return event


def _check_cost(name: str, cost: object) -> None:
    """A logged cost is None or a finite, non-negative number of USD (a forged one must not add up)."""
    if cost is None:
        return
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not finite(cost) or cost < 0:
        raise ValueError(f"{name} must be a non-negative number, got {cost!r}")


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
    if isinstance(event, (ModelCallStarted, ModelCalled)):
        return f"chat:{event.step}"
    if isinstance(event, (ToolStarted, ToolFinished)):
        return f"tool:{event.call_id}"
    if isinstance(event, MessageAppended):
        message = event.message
        if message["role"] == "assistant":
            return f"chat:{event.step}"
        if message["role"] == "tool":
            return f"tool:{message['tool_call_id']}"
    return "run"


def decode_all(rows: Iterable[StoredEvent], run_id: str = "") -> list[Event]:
    """Every fact of a stored run, in order; a row that is not one names the run and its place."""
    facts: list[Event] = []
    for row in rows:
        try:
            facts.append(decode(row.kind, row.data, row.step, run_id))
        except EventDecodeError as exc:
            raise EventDecodeError(f"run {run_id} event {row.seq}: {exc}") from None
    return facts
