"""Models over the official ``openai`` client's Chat Completions API, called whole or streamed.

It works with OpenAI and any compatible server: pass a client built with its ``base_url``.
The client is the caller's, so keys, retries and timeouts are set the usual way; ``openai_model`` builds one.
What the model sends is kept as sent: arguments that are not JSON stay the raw string.
Only what goes back on the wire is repaired: such a call is sent back with ``"{}"``,
because some servers, llama.cpp among them, reject a history that holds unparsable arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ..messages import Message, ModelReply, ToolCall, ToolSpec
from ._common import (
    STOP_REFUSAL,
    AsyncAdapter,
    SyncAdapter,
    UnusableResponse,
    Wire,
    client_options,
    parse_arguments,
    require,
    usage_of,
)
from .streams import cut_short

if TYPE_CHECKING:
    from openai import AsyncOpenAI, AsyncStream, OpenAI, Stream
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionChunk,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
    )
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

PROVIDER = "openai"
# Set by the adapter itself; a request option with one of these names is a mistake.
RESERVED_OPTIONS = frozenset({"messages", "tools", "stream", "n"})


# Where the SDK itself looks for a key and a server.
_ENV = {"key_env": "OPENAI_API_KEY", "base_env": "OPENAI_BASE_URL"}

def to_openai_messages(messages: Sequence[Message]) -> list[ChatCompletionMessageParam]:
    """Our messages in Chat Completions shape, in the same order."""
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            if not calls:
                out.append({"role": "assistant", "content": message["content"]})
                continue
            out.append({
                "role": "assistant",
                "content": message["content"] or None,
                "tool_calls": [
                    {"id": call["id"], "type": "function",
                     "function": {"name": call["name"], "arguments": wire_arguments(call["args"])}}
                    for call in calls
                ],
            })
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        elif message["role"] == "system":
            out.append({"role": "system", "content": message["content"]})
        elif message["role"] == "user":
            out.append({"role": "user", "content": message["content"]})
        else:
            raise ValueError(f"unknown message role {message['role']!r}")
    return out


def wire_arguments(args: Any) -> str:
    """A call's arguments for the history: a JSON object, ``{}`` if the model sent none."""
    return json.dumps(args) if isinstance(args, dict) else "{}"


def to_openai_tools(specs: Sequence[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    return [
        {"type": "function",
         "function": {"name": s["name"], "description": s["description"], "parameters": s["parameters"]}}
        for s in specs
    ]


def reply_from_completion(completion: ChatCompletion) -> ModelReply:
    """The first choice as a ``ModelReply``; raises ``UnusableResponse`` if there is none."""
    if not completion.choices:
        raise UnusableResponse(PROVIDER, "the completion has no choices")
    choice = completion.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for item in message.tool_calls or ():
        if item.type == "custom":  # a custom (free-text) tool call: its input is a plain string
            calls.append(ToolCall(item.id, item.custom.name, item.custom.input))
        else:  # "function", or no type at all from some OpenAI-compatible servers
            calls.append(ToolCall(item.id, item.function.name, parse_arguments(item.function.arguments)))
    content = message.content or ""
    stop_reason: str | None = choice.finish_reason
    if message.refusal:
        content, stop_reason = message.refusal, STOP_REFUSAL
    usage = None
    if completion.usage is not None:
        details = getattr(completion.usage, "prompt_tokens_details", None)
        usage = usage_of(completion.usage.prompt_tokens, completion.usage.completion_tokens,
                         getattr(details, "cached_tokens", 0), cached_in_input=True)
    return ModelReply(content, calls, usage, stop_reason)


def chat_body(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """A Chat Completions request's messages, and its tools when there are any."""
    body: dict[str, Any] = {"messages": to_openai_messages(messages)}
    if specs:
        body["tools"] = to_openai_tools(specs)
    return body


class ChatGather:
    """A streamed completion's chunks, gathered into the ``ChatCompletion`` the call would have returned unstreamed.

    The text (or a refusal) comes in pieces, each tool call in fragments under its index: its id and
    name in the first, its arguments spread over many. The finish reason comes with the choice's last
    chunk, the usage in a chunk of its own after it (``stream_options.include_usage``).
    """

    def __init__(self, stream: Stream[ChatCompletionChunk] | AsyncStream[ChatCompletionChunk]) -> None:
        self.sdk = require("openai", "openai")
        self.response: Any = stream.response
        self.head: dict[str, Any] = {}
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def add(self, chunk: ChatCompletionChunk) -> str | None:
        """Take in one chunk: the text it brings (a refusal's too), or None."""
        if not self.head:
            self.head = {"id": chunk.id, "created": chunk.created, "model": chunk.model}
        if chunk.usage is not None:
            self.usage = chunk.usage
        text = None
        for choice in chunk.choices:
            if choice.index != 0:  # one choice is asked for ("n" is the adapter's)
                continue
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            for fragment in delta.tool_calls or ():
                self._fragment(fragment)
            if delta.content:
                self.content.append(delta.content)
            if delta.refusal:
                self.refusal.append(delta.refusal)
            text = (delta.content or "") + (delta.refusal or "")
        return text

    def _fragment(self, fragment: ChoiceDeltaToolCall) -> None:
        """A piece of a tool call: its id and name once (some servers send them again), its arguments appended."""
        call = self.calls.setdefault(fragment.index, {"id": "", "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
        call["id"] = call["id"] or fragment.id or ""
        function = fragment.function
        if function is None:
            return
        call["function"]["name"] = call["function"]["name"] or function.name or ""
        arguments = function.arguments
        if isinstance(arguments, str) and isinstance(call["function"]["arguments"], str):
            call["function"]["arguments"] += arguments
        elif arguments is not None:  # an object, not the documented JSON string: kept as sent, as unstreamed
            call["function"]["arguments"] = arguments

    def result(self) -> ChatCompletion:
        """The completion the chunks make; the SDK's connection error when no finish reason came."""
        if self.finish_reason is None:
            raise cut_short(self, "finish_reason")
        from openai.types.chat import ChatCompletion

        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None,
                                   "refusal": "".join(self.refusal) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[index] for index in sorted(self.calls)]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}
        return ChatCompletion.construct(**self.head, object="chat.completion", choices=[choice], usage=self.usage)


CHAT: Wire[ChatCompletion] = Wire(RESERVED_OPTIONS, chat_body, reply_from_completion, ChatGather)


def streamed(request: dict[str, Any]) -> dict[str, Any]:
    """The request for a stream whose last chunk carries the usage."""
    return {**request, "stream": True,
            "stream_options": {**(request.get("stream_options") or {}), "include_usage": True}}


def response_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """Chat Completions' structured output in ``schema``; not ``strict``, whose subset refuses keywords runner takes."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


class OpenAIModel(SyncAdapter["OpenAI", "ChatCompletion"]):
    """A model callable ``(messages, tool_specs) -> ModelReply`` over ``client.chat.completions``.

    ``request_options`` go to every request (``temperature``, ``max_completion_tokens``,
    ``tool_choice``, ``extra_body``...). ``provider_name`` names an OpenAI-compatible
    server in the log and on spans. SDK errors (after the client's own retries)
    propagate, so the run stops with ``model_error``.
    """

    def __init__(self, client: OpenAI, model: str, *, provider_name: str = PROVIDER,
                 **request_options: Any) -> None:
        super().__init__(client, CHAT, model, provider_name, request_options)

    def with_output_schema(self, schema: dict[str, Any], name: str) -> OpenAIModel:
        """This model on the same client, asking for structured output in ``schema`` (``output_mode="native"``)."""
        return OpenAIModel(self.client, self.model_name, provider_name=self.provider_name,
                           **{**self.request_options, "response_format": response_format(schema, name)})

    def _send(self, request: dict[str, Any]) -> ChatCompletion:
        completion: ChatCompletion = self.client.chat.completions.create(**request)
        return completion

    def _open(self, request: dict[str, Any]) -> Stream[ChatCompletionChunk]:
        stream: Stream[ChatCompletionChunk] = self.client.chat.completions.create(**streamed(request))
        return stream


class AsyncOpenAIModel(AsyncAdapter["AsyncOpenAI", "ChatCompletion"]):
    """``OpenAIModel`` over ``AsyncOpenAI``: ``await model(messages, tool_specs)``."""

    def __init__(self, client: AsyncOpenAI, model: str, *, provider_name: str = PROVIDER,
                 **request_options: Any) -> None:
        super().__init__(client, CHAT, model, provider_name, request_options)

    def with_output_schema(self, schema: dict[str, Any], name: str) -> AsyncOpenAIModel:
        """``OpenAIModel.with_output_schema`` on the async client."""
        return AsyncOpenAIModel(self.client, self.model_name, provider_name=self.provider_name,
                                **{**self.request_options, "response_format": response_format(schema, name)})

    async def _send(self, request: dict[str, Any]) -> ChatCompletion:
        completion: ChatCompletion = await self.client.chat.completions.create(**request)
        return completion

    async def _open(self, request: dict[str, Any]) -> AsyncStream[ChatCompletionChunk]:
        stream: AsyncStream[ChatCompletionChunk] = await self.client.chat.completions.create(**streamed(request))
        return stream


def openai_model(model: str, base_url: str | None = None, api_key: str | None = None, *,
                 provider_name: str = PROVIDER, timeout: float | None = None,
                 max_retries: int | None = None, **request_options: Any) -> OpenAIModel:
    """Build an ``openai.OpenAI`` client and an ``OpenAIModel`` that owns it.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``;
    with a base URL and no key (a local server) a placeholder key is sent.
    Raises ``MissingDependency`` when the ``openai`` package is not installed.
    """
    sdk = require("openai", "openai")
    client = cast("OpenAI", sdk.OpenAI(**client_options(base_url, api_key, timeout, max_retries, **_ENV)))
    return OpenAIModel(client, model, provider_name=provider_name, **request_options)


def async_openai_model(model: str, base_url: str | None = None, api_key: str | None = None, *,
                       provider_name: str = PROVIDER, timeout: float | None = None,
                       max_retries: int | None = None, **request_options: Any) -> AsyncOpenAIModel:
    """``openai_model`` with an ``openai.AsyncOpenAI`` client."""
    sdk = require("openai", "openai")
    client = cast("AsyncOpenAI", sdk.AsyncOpenAI(**client_options(base_url, api_key, timeout, max_retries, **_ENV)))
    return AsyncOpenAIModel(client, model, provider_name=provider_name, **request_options)
