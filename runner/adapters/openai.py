"""Models over the official ``openai`` client's Chat Completions API.

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

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
    )

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


CHAT: Wire[ChatCompletion] = Wire(RESERVED_OPTIONS, chat_body, reply_from_completion)


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
