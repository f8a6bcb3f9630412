"""Models over the official ``anthropic`` client's Messages API, called whole or streamed.

The system prompt goes apart, tool calls become ``tool_use`` blocks, and the results of
one reply's calls go back as ``tool_result`` blocks in one user message, in call order.
A reply cut off by a token limit has ``stop_reason`` ``"length"``, as with every adapter.
Usage counts cached prompt tokens as input.
Extended thinking is refused: its blocks would have to be sent back, and our messages do not carry them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..messages import Message, ModelReply, ToolCall, ToolSpec
from ._common import (
    STOP_LENGTH,
    AsyncAdapter,
    SyncAdapter,
    UnusableResponse,
    Wire,
    client_options,
    require,
    usage_of,
)
from .streams import cut_short

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic
    from anthropic.lib.streaming import (
        AsyncMessageStream,
        AsyncMessageStreamManager,
        MessageStream,
        MessageStreamManager,
    )
    from anthropic.types import (
        ContentBlockParam,
        MessageParam,
        ToolParam,
        ToolResultBlockParam,
    )
    from anthropic.types import Message as AnthropicMessage

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 1024
RESERVED_OPTIONS = frozenset({"messages", "tools", "system", "stream"})
CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})


# Where the SDK itself looks for a key and a server.
_ENV = {"key_env": "ANTHROPIC_API_KEY", "base_env": "ANTHROPIC_BASE_URL"}
_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"


def _credentialed(options: dict[str, Any]) -> dict[str, Any]:
    """``options``, after checking the client will have a credential.

    The OpenAI SDK refuses a client without a key; Anthropic's builds one and fails
    on the first request, after a run has started. Refuse it here instead, so a
    missing key is one line before anything is recorded.
    """
    if options["api_key"] is None and not os.environ.get(_ENV["key_env"]) and not os.environ.get(_TOKEN_ENV):
        raise ValueError(f"no Anthropic API key: pass api_key or set {_ENV['key_env']} (or {_TOKEN_ENV}); "
                         "a local server needs only a base URL")
    return options


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[MessageParam]]:
    """The system prompt (system messages joined) and the conversation in API shape."""
    system: list[str] = []
    out: list[MessageParam] = []
    results: list[ToolResultBlockParam] | None = None  # the user turn being filled with results
    for message in messages:
        if message["role"] == "tool":
            block: ToolResultBlockParam = {
                "type": "tool_result", "tool_use_id": message["tool_call_id"],
                "content": message["content"], "is_error": message["content"].startswith("ERROR:")}
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(block)
            continue
        results = None
        if message["role"] == "system":
            system.append(message["content"])
        elif message["role"] == "user":
            out.append({"role": "user", "content": message["content"]})
        elif message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            if not calls:
                out.append({"role": "assistant", "content": message["content"]})
                continue
            blocks: list[ContentBlockParam] = []
            if message["content"]:
                blocks.append({"type": "text", "text": message["content"]})
            blocks.extend({"type": "tool_use", "id": c["id"], "name": c["name"], "input": wire_input(c["args"])}
                          for c in calls)
            out.append({"role": "assistant", "content": blocks})
        else:
            raise ValueError(f"unknown message role {message['role']!r}")
    return "\n\n".join(system), out


def wire_input(args: Any) -> dict[str, Any]:
    """A call's input for the history: the API accepts only an object, so ``{}`` otherwise."""
    return args if isinstance(args, dict) else {}


def to_anthropic_tools(specs: Sequence[ToolSpec]) -> list[ToolParam]:
    return [{"name": s["name"], "description": s["description"], "input_schema": s["parameters"]} for s in specs]


def reply_from_message(message: AnthropicMessage) -> ModelReply:
    """Text blocks joined, ``tool_use`` blocks as calls; other blocks are not ours to act on."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, block.input))
    if not message.content and message.stop_reason is None:
        raise UnusableResponse(PROVIDER, "the message has no content and no stop_reason")
    stop_reason: str | None = message.stop_reason
    if stop_reason in CUT_OFF:
        stop_reason = STOP_LENGTH
    u = message.usage
    usage = usage_of(u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens)
    return ModelReply("".join(texts), calls, usage, stop_reason)


def messages_body(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """A Messages API request's conversation, its system prompt and tools when there are any."""
    system, conversation = to_anthropic_messages(messages)
    body: dict[str, Any] = {"messages": conversation}
    if system:
        body["system"] = system
    if specs:
        body["tools"] = to_anthropic_tools(specs)
    return body


def check_request(request: Mapping[str, Any]) -> None:
    """Refuse extended thinking and a ``max_tokens`` that is not a positive integer (``ValueError``)."""
    thinking = request.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        raise ValueError("extended thinking is not supported: its blocks must be sent back with tool "
                         "results and runner messages do not carry them")
    max_tokens = request["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")


class MessageGather:
    """A streamed message's events, read off the SDK's ``MessageStream``, which gathers the ``Message`` itself.

    The text comes as the SDK's ``text`` events (a text block's deltas); the message is whole, its
    ``stop_reason`` and usage with it, once ``message_stop`` has come.
    """

    def __init__(self, stream: MessageStream[Any] | AsyncMessageStream[Any]) -> None:
        self.sdk = require("anthropic", "anthropic")
        self.stream = stream
        self.response: Any = stream.response
        self.stopped = False

    def add(self, event: Any) -> str | None:
        """Take in one event: the text it brings, or None."""
        match event.type:
            case "text":
                text: str = event.text
                return text
            case "message_stop":
                self.stopped = True
        return None

    def result(self) -> AnthropicMessage:
        """The message the events made; the SDK's connection error when ``message_stop`` did not come."""
        if not self.stopped:
            raise cut_short(self, "message_stop")
        return self.stream.current_message_snapshot


MESSAGES: Wire[AnthropicMessage] = Wire(RESERVED_OPTIONS, messages_body, reply_from_message, MessageGather,
                                        check_request)


class AnthropicModel(SyncAdapter["Anthropic", "AnthropicMessage"]):
    """A model callable ``(messages, tool_specs) -> ModelReply`` over ``client.messages``.

    ``request_options`` go to every request (``tool_choice``, ``stop_sequences``,
    ``extra_body``...). SDK errors (after the client's own retries) propagate, so
    the run stops with ``model_error``.
    """

    def __init__(self, client: Anthropic, model: str, max_tokens: int = DEFAULT_MAX_TOKENS, *,
                 provider_name: str = PROVIDER, **request_options: Any) -> None:
        super().__init__(client, MESSAGES, model, provider_name, request_options, max_tokens=max_tokens)
        self.max_tokens = max_tokens

    def _send(self, request: dict[str, Any]) -> AnthropicMessage:
        reply: AnthropicMessage = self.client.messages.create(**request)
        return reply

    def _open(self, request: dict[str, Any]) -> MessageStreamManager[Any]:
        return self.client.messages.stream(**request)


class AsyncAnthropicModel(AsyncAdapter["AsyncAnthropic", "AnthropicMessage"]):
    """``AnthropicModel`` over ``AsyncAnthropic``: ``await model(messages, tool_specs)``."""

    def __init__(self, client: AsyncAnthropic, model: str, max_tokens: int = DEFAULT_MAX_TOKENS, *,
                 provider_name: str = PROVIDER, **request_options: Any) -> None:
        super().__init__(client, MESSAGES, model, provider_name, request_options, max_tokens=max_tokens)
        self.max_tokens = max_tokens

    async def _send(self, request: dict[str, Any]) -> AnthropicMessage:
        reply: AnthropicMessage = await self.client.messages.create(**request)
        return reply

    async def _open(self, request: dict[str, Any]) -> AsyncMessageStreamManager[Any]:
        return self.client.messages.stream(**request)


def anthropic_model(model: str, max_tokens: int = DEFAULT_MAX_TOKENS, *, api_key: str | None = None,
                    base_url: str | None = None, timeout: float | None = None,
                    max_retries: int | None = None, **request_options: Any) -> AnthropicModel:
    """Build an ``anthropic.Anthropic`` client and an ``AnthropicModel`` that owns it.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.
    Raises ``MissingDependency`` when the ``anthropic`` package is not installed, and
    ``ValueError`` when there is no key (nor ``ANTHROPIC_AUTH_TOKEN``) and no base URL.
    """
    sdk = require("anthropic", "anthropic")
    options = _credentialed(client_options(base_url, api_key, timeout, max_retries, **_ENV))
    client = cast("Anthropic", sdk.Anthropic(**options))
    return AnthropicModel(client, model, max_tokens, **request_options)


def async_anthropic_model(model: str, max_tokens: int = DEFAULT_MAX_TOKENS, *, api_key: str | None = None,
                          base_url: str | None = None, timeout: float | None = None,
                          max_retries: int | None = None, **request_options: Any) -> AsyncAnthropicModel:
    """``anthropic_model`` with an ``anthropic.AsyncAnthropic`` client."""
    sdk = require("anthropic", "anthropic")
    options = _credentialed(client_options(base_url, api_key, timeout, max_retries, **_ENV))
    client = cast("AsyncAnthropic", sdk.AsyncAnthropic(**options))
    return AsyncAnthropicModel(client, model, max_tokens, **request_options)

