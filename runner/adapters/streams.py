"""A streamed response read through its SDK: the text of each event as it comes, then the whole response.

A provider's ``Gather`` turns its SDK's stream events into text pieces and, once the stream has
ended, into the response object the same request would have got unstreamed, so the reply is made by
the very code a plain call's is. A stream that breaks or ends before its end marker raises the SDK's
own connection error, as a request that failed on the wire does, never a half reply.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from types import ModuleType
from typing import Any, Protocol, TypeVar

ResponseT_co = TypeVar("ResponseT_co", covariant=True)


class Gather(Protocol[ResponseT_co]):
    """One streamed response's events, gathered as they come.

    ``sdk`` is the provider's SDK module (its errors), ``response`` the HTTP response the events come on.
    """

    sdk: ModuleType
    response: Any

    def add(self, event: Any) -> str | None:
        """Take in one event: the text it brings, or None."""
        ...

    def result(self) -> ResponseT_co:
        """The response the events made; the SDK's connection error when the stream stopped short of its end."""
        ...


def cut_short(gather: Gather[object], missing: str) -> Exception:
    """The SDK's connection error for a stream that ended before ``missing`` came (a connection cut cleanly)."""
    return _sdk_error(gather, "APIConnectionError", f"the stream ended before its {missing} came")


def transport_error(gather: Gather[object], exc: Exception) -> Exception | None:
    """A failure of the HTTP library mid-stream as the SDK's own error (as a failed request's), else None.

    The SDK turns a request's transport errors into ``APITimeoutError`` or ``APIConnectionError``;
    those that come while the body streams reach the reader as the HTTP library raised them (in
    some SDK versions). The library is the response's own, so ``httpx`` and ``httpx2`` alike.
    """
    http = sys.modules.get(type(gather.response).__module__.partition(".")[0])
    if isinstance(exc, getattr(http, "TimeoutException", ())):
        return _sdk_error(gather, "APITimeoutError")
    if isinstance(exc, getattr(http, "TransportError", ())):
        return _sdk_error(gather, "APIConnectionError", f"Connection error: {exc}")
    return None


def _sdk_error(gather: Gather[object], name: str, message: str | None = None) -> Exception:
    cls = getattr(gather.sdk, name)
    request = gather.response.request
    error: Exception = cls(request=request) if message is None else cls(message=message, request=request)
    return error


def pieces(events: Iterable[Any], gather: Gather[object]) -> Iterator[str]:
    """Each piece of text the events bring, as they come; transport failures become the SDK's errors.

    After each piece this thread lets go of the GIL (``time.sleep(0)``): when the events come faster
    than they are parsed, the thread waiting for the piece (a run's driver) would otherwise wait
    for the interpreter's switch interval (5 ms) at each hand-over (docs/benchmarks.md, Streaming).
    """
    try:
        for event in events:
            text = gather.add(event)
            if text:
                yield text
                time.sleep(0)
    except Exception as exc:
        mapped = transport_error(gather, exc)
        if mapped is None:
            raise
        raise mapped from exc


async def apieces(events: AsyncIterable[Any], gather: Gather[object]) -> AsyncIterator[str]:
    """``pieces`` of an async stream; after each piece the event loop runs the tasks waiting for it.

    Events already read come without a pause at which the loop could switch tasks, so without
    ``sleep(0)`` a task waiting for the first piece (``astream_agent``'s caller) got it after the last.
    """
    try:
        async for event in events:
            text = gather.add(event)
            if text:
                yield text
                await asyncio.sleep(0)
    except Exception as exc:
        mapped = transport_error(gather, exc)
        if mapped is None:
            raise
        raise mapped from exc
