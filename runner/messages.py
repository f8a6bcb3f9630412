"""Data shapes shared by the loop, the models and the event log.

Messages are plain JSON-able dicts so they can be logged, diffed and sent to any
provider unchanged; replies and calls are frozen dataclasses because the harness
must not be able to alter what the model said after the fact.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, NotRequired, Protocol, TypedDict


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model proposes: ``args`` is whatever the model sent (usually a dict)."""

    id: str
    name: str
    args: Any


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by a provider for one model call.

    ``input_tokens`` counts the whole prompt; ``cache_read_tokens`` and ``cache_write_tokens`` are the
    parts of it the provider read from or wrote to its prompt cache (priced apart, see ``runner.prices``).
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class CostFields(TypedDict):
    """The ``model_called`` fields that record a call's cost (all None when it has none)."""

    cost_usd: float | None
    price_source: str | None
    prompt_cost_usd: float | None
    completion_cost_usd: float | None


NO_COST: Final[CostFields] = {"cost_usd": None, "price_source": None, "prompt_cost_usd": None,
                              "completion_cost_usd": None}


class Cost(NamedTuple):
    """A call's cost in USD and where its price came from (``given``, or ``genai-prices VERSION provider:model``).

    ``prompt_usd`` and ``completion_usd`` are its parts, for the tokens in and out, when known.
    """

    usd: float
    source: str
    prompt_usd: float | None = None
    completion_usd: float | None = None

    def facts(self) -> CostFields:
        """The ``model_called`` fields that record this cost."""
        return {"cost_usd": self.usd, "price_source": self.source, "prompt_cost_usd": self.prompt_usd,
                "completion_cost_usd": self.completion_usd}


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What a model returns: text, tool calls, or both (then it is not final).

    ``stop_reason`` is what the provider said about why generation ended
    (``"length"`` for a cut-off reply, ``"refusal"``...); scripted models leave it None.
    """

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None


# ``ModelReply.stop_reason`` values after which a reply is not an answer: the text
# (and any call) was cut off at the output limit, or the model declined.
CUT_OFF_STOP_REASONS = frozenset({"length", "max_tokens"})
REFUSAL_STOP_REASONS = frozenset({"refusal", "content_filter"})


class ToolCallDict(TypedDict):
    id: str
    name: str
    args: Any


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str
    tool_calls: list[ToolCallDict]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    name: str
    content: str


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage


class ToolSpec(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]


DEFAULT_SYSTEM: Final = "You are a helpful assistant. Use the tools when they help, then give a final answer."


class ToolTraits(TypedDict):
    """How a tool is to be treated beyond what the model sees.

    The traits are logged per tool, so a resume judges a call by what its tool was when the call started.
    ``idempotent``, ``exclusive`` and ``subagent`` are written only when true (a log from before them has none: false).
    """

    side_effects: bool
    needs_approval: bool
    idempotency_key: str | None
    idempotent: NotRequired[bool]
    exclusive: NotRequired[bool]
    subagent: NotRequired[bool]


# A tool registered with none of them: the log records only the tools whose traits differ.
DEFAULT_TRAITS: Final[ToolTraits] = {"side_effects": False, "needs_approval": False, "idempotency_key": None}


def check_traits(traits: object) -> None:
    """Raise ``TypeError`` unless ``traits`` is None or maps tool names to whole ``ToolTraits``.

    A resume trusts the log's record of a tool for its calls in doubt, so a damaged or forged one is refused.
    """
    if traits is None:
        return
    if not isinstance(traits, dict) or not all(
            isinstance(name, str) and isinstance(one, dict) and isinstance(one.get("side_effects"), bool)
            and isinstance(one.get("needs_approval"), bool) and "idempotency_key" in one
            and isinstance(one["idempotency_key"], (str, type(None))) and isinstance(one.get("idempotent", False), bool)
            and isinstance(one.get("exclusive", False), bool) and isinstance(one.get("subagent", False), bool)
            for name, one in traits.items()):
        raise TypeError("tool_traits must map tool names to their side_effects, needs_approval and idempotency_key "
                        "(and idempotent and exclusive, when given)")


class McpRef(TypedDict):
    """An MCP server a run's tools came from, as the log records it (``runner.mcp``; see docs/mcp.md).

    ``target`` is the command line of a ``stdio`` server (``--mcp``) or the URL of an ``http`` one (``--mcp-url``).
    """

    transport: Literal["stdio", "http"]
    target: str


def check_mcp_refs(refs: object) -> None:
    """Raise ``TypeError`` unless ``refs`` is None or a list of whole ``McpRef``."""
    if refs is None:
        return
    if not isinstance(refs, list) or not all(
            isinstance(ref, dict) and set(ref) == {"transport", "target"} and ref["transport"] in ("stdio", "http")
            and isinstance(ref["target"], str) and ref["target"] for ref in refs):
        raise TypeError("mcp_servers must be a list of {transport: stdio|http, target: text}")


class Model(Protocol):
    """Any callable ``(messages, tool_specs) -> ModelReply`` is a model.

    The parameters are positional-only because the loop passes them by position:
    a user's function may name them as it likes and still type-check as a model.
    A model may also expose ``model_name`` and ``provider_name`` attributes; the
    log and the spans use them when present.
    """

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec], /) -> ModelReply: ...


class AsyncModel(Protocol):
    """A model for ``arun_agent``: a coroutine function, or any callable returning an awaitable reply."""

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec], /) -> Awaitable[ModelReply]: ...


# What a run's core holds: only ``arun_agent`` may be given an ``AsyncModel``, and it awaits the reply.
AnyModel = Model | AsyncModel


def assistant_message(reply: ModelReply) -> AssistantMessage:
    """The dict appended for a reply: calls keep the model's order and ids."""
    return {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in reply.tool_calls],
    }


def tool_message(call: ToolCall, content: str) -> ToolMessage:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def usage_data(usage: Usage) -> dict[str, int]:
    """A reply's usage as JSON-able data; the cache counts only when the provider reported some."""
    data = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cache_read_tokens:
        data["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        data["cache_write_tokens"] = usage.cache_write_tokens
    return data


def parse_reply(data: Mapping[str, Any]) -> ModelReply:
    usage = data.get("usage")
    return ModelReply(
        content=data["content"],
        tool_calls=[ToolCall(c["id"], c["name"], c["args"]) for c in data["tool_calls"]],
        usage=Usage(int(usage["input_tokens"]), int(usage["output_tokens"]), int(usage.get("cache_read_tokens", 0)),
                    int(usage.get("cache_write_tokens", 0))) if usage else None,
        stop_reason=data.get("stop_reason"),
    )


def reply_data(reply: ModelReply) -> dict[str, Any]:
    """A reply as JSON-able data, for the log, fixtures and spans."""
    return {
        "content": reply.content,
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in reply.tool_calls],
        "usage": None if reply.usage is None else usage_data(reply.usage),
        "stop_reason": reply.stop_reason,
    }
