"""What every adapter shares: the model over a sync or async client, the install hint, arguments, stop reasons.

A provider writes its ``Wire`` (its request and its reply) and how its client sends; ``SyncAdapter``
and ``AsyncAdapter`` are the rest. Stop reasons use one small vocabulary so the loop can judge any
provider's reply the same way: a reply cut off by the token limit says ``"length"`` (OpenAI's
``finish_reason``; Anthropic's ``max_tokens`` is translated), a refused one says ``"refusal"``;
every other value is the provider's own.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import ModuleType
from typing import Any, Generic, NamedTuple, Protocol, Self, TypeVar, cast

from ..errors import RunnerError
from ..messages import CUT_OFF_STOP_REASONS, REFUSAL_STOP_REASONS, Message, ModelReply, ToolSpec, Usage
from .streams import Gather, apieces, pieces

STOP_LENGTH = "length"
STOP_REFUSAL = "refusal"
STOP_CONTENT_FILTER = "content_filter"
# Replies that ended for one of these reasons are not answers (the loop's own rule).
NON_FINAL_STOP_REASONS = CUT_OFF_STOP_REASONS | REFUSAL_STOP_REASONS
MAX_WHOLE_FLOAT = 2.0**53  # past this a float is no exact count (the loop refuses counts past 2**53)
CONNECTION_ERROR = "APIConnectionError"  # both SDKs' class for a server that cannot be reached (timeouts too)


class MissingDependency(RunnerError):
    """An optional SDK is not installed; the message says which extra brings it."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        self.hint = f"pip install 'durable-agent-runner[{extra}]'"
        super().__init__(f"the {extra} adapter needs the {package!r} package: {self.hint}")


class UnusableResponse(RunnerError):
    """The provider answered successfully but with nothing a reply can be made of."""

    def __init__(self, provider: str, reason: str) -> None:
        self.provider = provider
        self.reason = reason
        super().__init__(f"{provider} response cannot be used: {reason}")


def require(package: str, extra: str) -> ModuleType:
    """Import an optional SDK, or raise ``MissingDependency`` with the install hint."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependency(package, extra) from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_arguments(raw: object) -> Any:
    """The call's arguments as the model sent them, parsed when they are JSON.

    Whitespace or nothing means no arguments (``{}``). Text that is not strict
    JSON (``NaN`` included) comes back as the raw string, and JSON that is not
    an object comes back parsed: either way the registry's check turns it into
    an ``ERROR:`` observation the model can act on, instead of a crash here.
    """
    if raw is None:
        return {}
    if not isinstance(raw, str):  # a server that sends an object, not the documented JSON string
        return raw
    if not raw.strip():
        return {}
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return raw


def client_options(base_url: str | None, api_key: str | None, timeout: float | None, max_retries: int | None,
                   *, key_env: str, base_env: str) -> dict[str, Any]:
    """Keyword arguments for an SDK client; a local server (a base URL, no key) gets a placeholder key.

    The SDKs refuse to build a client without a key even for servers that ignore it.
    """
    if api_key is None and not os.environ.get(key_env) and (base_url or os.environ.get(base_env)):
        api_key = "unused"
    options: dict[str, Any] = {"base_url": base_url, "api_key": api_key}
    if timeout is not None:
        options["timeout"] = timeout
    if max_retries is not None:
        options["max_retries"] = max_retries
    return options


def usage_of(input_tokens: object, output_tokens: object, cache_read: object = None, cache_write: object = None,
             *, cached_in_input: bool = False) -> Usage | None:
    """The reply's usage as the server reported it; None when it left a count out (null or missing).

    Some OpenAI-compatible servers send nulls; the loop then falls back to its estimate. A count
    that is not a whole non-negative number (-1, 2.5, "many", NaN, true) is passed on as sent, as
    unparsable arguments are: the loop's check then stops the run ``invalid_reply`` rather than leave
    the call unpriced (docs/cost.md). ``cached_in_input``: the server's input count already holds the
    cached tokens (OpenAI's does, Anthropic's does not). A null cache count is 0.
    """
    sent = (input_tokens, output_tokens, 0 if cache_read is None else cache_read,
            0 if cache_write is None else cache_write)
    counts = tuple(map(_whole, sent))
    if None in counts:
        if (input_tokens is None or output_tokens is None) and all(
                n is not None or raw is None for n, raw in zip(counts, sent, strict=True)):
            return None  # a count left out, and the rest counts: no usage reported
        return Usage(*cast(tuple[int, int, int, int], sent))  # not counts, as sent: the loop refuses the reply
    inp, out, read, write = cast(tuple[int, int, int, int], counts)
    if cached_in_input:
        read = min(read, inp)
        return Usage(inp, out, read, min(write, inp - read))
    return Usage(inp + read + write, out, read, write)


def _whole(value: object) -> int | None:
    """``value`` as a token count when it is a whole non-negative number (``3.0`` is 3), else None.

    None too for a missing count (None). A bool is not a count, whatever Python says.
    """
    if type(value) is int:
        return value if value >= 0 else None
    if type(value) is float and value.is_integer() and 0 <= value <= MAX_WHOLE_FLOAT:
        return int(value)
    return None


class Closes(Protocol):
    """A sync SDK client: it closes its connections."""

    def close(self) -> None: ...


class ClosesLater(Protocol):
    """An async SDK client: it closes its connections when awaited."""

    def close(self) -> Awaitable[None]: ...


ClientT = TypeVar("ClientT")
SyncClientT = TypeVar("SyncClientT", bound=Closes)
AsyncClientT = TypeVar("AsyncClientT", bound=ClosesLater)
ResponseT = TypeVar("ResponseT")


def _no_check(request: Mapping[str, Any]) -> None:
    return None


class Wire(NamedTuple, Generic[ResponseT]):
    """A provider's half of an adapter: the options it sets itself, its request's body, its response as a reply.

    The sync and the async model of one provider share it; ``Adapter`` is what every provider shares.
    ``gather`` makes, from the SDK's stream, what turns its events into pieces of text and the response.
    ``check`` sees the fields the model fixes and the options given, and raises ``ValueError`` on a mistake.
    """

    reserved: frozenset[str]
    body: Callable[[Sequence[Message], Sequence[ToolSpec]], dict[str, Any]]
    reply: Callable[[ResponseT], ModelReply]
    gather: Callable[[Any], Gather[ResponseT]]
    check: Callable[[Mapping[str, Any]], None] = _no_check


class Adapter(Generic[ClientT, ResponseT]):
    """A model over a provider's SDK client: the client, the model's name, the provider's, the request options.

    ``fixed`` are request fields the model sets at construction (Anthropic's ``max_tokens``).
    """

    def __init__(self, client: ClientT, wire: Wire[ResponseT], model: str, provider_name: str,
                 request_options: dict[str, Any], **fixed: Any) -> None:
        clash = sorted(wire.reserved.intersection(request_options))
        if clash:
            raise ValueError(f"request option(s) {clash} are set by the adapter")
        wire.check({**fixed, **request_options})
        self.client = client
        self.wire = wire
        self.model_name = model
        self.provider_name = provider_name
        self.request_options = request_options
        self.fixed = fixed

    def __repr__(self) -> str:
        """The model, then the request fields it fixes (Anthropic's ``max_tokens``), or else the provider."""
        shown = ", ".join(f"{key}={value!r}" for key, value in self.fixed.items()) or f"provider={self.provider_name!r}"
        return f"{type(self).__name__}(model={self.model_name!r}, {shown})"

    def _say_where(self, exc: Exception) -> None:
        """Add the base URL to a connection error's text: the SDK's "Connection error." does not say which server.

        The error keeps its type (callers catch the SDK's own), so only its message changes.
        """
        if not any(cls.__name__ == CONNECTION_ERROR for cls in type(exc).__mro__) or not exc.args:
            return
        where = f"{exc.args[0]} (base URL {getattr(self.client, 'base_url', '?')})"
        exc.args = (where, *exc.args[1:])
        if isinstance(getattr(exc, "message", None), str):
            setattr(exc, "message", where)  # noqa: B010  (the SDK's error keeps its text there too)

    def _request(self, messages: Sequence[Message], specs: Sequence[ToolSpec]) -> dict[str, Any]:
        """The request's keyword arguments: the model, the fields it fixes, the body, then the options given.

        The body leaves out a field it has no value for (no tools, no system prompt) rather than send
        an SDK sentinel, so every SDK version the extra allows takes it.
        """
        return {"model": self.model_name, **self.fixed, **self.wire.body(messages, specs), **self.request_options}


class SyncAdapter(Adapter[SyncClientT, ResponseT]):
    """A model callable ``(messages, tool_specs) -> ModelReply`` over a sync client; ``with`` closes the client.

    SDK errors (after the client's own retries) propagate, so the run stops with ``model_error``.
    """

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        try:
            response = self._send(self._request(messages, tool_specs))
        except Exception as exc:
            self._say_where(exc)
            raise
        return self.wire.reply(response)

    def stream(self, messages: Sequence[Message],
               tool_specs: Sequence[ToolSpec]) -> Generator[str | ModelReply, None, None]:
        """The reply streamed: each piece of its text as it comes, then the ``ModelReply`` a call would return.

        Errors are the SDK's, as a call's are; closing the generator early closes the response.
        """
        try:
            with self._open(self._request(messages, tool_specs)) as events:
                gather = self.wire.gather(events)
                yield from pieces(events, gather)
                response = gather.result()
        except Exception as exc:
            self._say_where(exc)
            raise
        yield self.wire.reply(response)

    def _send(self, request: dict[str, Any]) -> ResponseT:
        """Send the request through the client; the provider's model says how."""
        raise NotImplementedError

    def _open(self, request: dict[str, Any]) -> AbstractContextManager[Any]:
        """Send the request for a stream: the SDK's stream of events, closed on leaving it."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the client (and its connections)."""
        self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncAdapter(Adapter[AsyncClientT, ResponseT]):
    """``SyncAdapter`` over an async client: ``await model(messages, tool_specs)``; ``async with`` closes it."""

    async def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        try:
            response = await self._send(self._request(messages, tool_specs))
        except Exception as exc:
            self._say_where(exc)
            raise
        return self.wire.reply(response)

    async def astream(self, messages: Sequence[Message],
                      tool_specs: Sequence[ToolSpec]) -> AsyncGenerator[str | ModelReply, None]:
        """``SyncAdapter.stream`` over the async client."""
        try:
            async with await self._open(self._request(messages, tool_specs)) as events:
                gather = self.wire.gather(events)
                async for text in apieces(events, gather):
                    yield text
                response = gather.result()
        except Exception as exc:
            self._say_where(exc)
            raise
        yield self.wire.reply(response)

    async def _send(self, request: dict[str, Any]) -> ResponseT:
        """Send the request through the client; the provider's model says how."""
        raise NotImplementedError

    async def _open(self, request: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        """Send the request for a stream: the SDK's stream of events, closed on leaving it."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the client (and its connections)."""
        await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
