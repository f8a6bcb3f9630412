"""A streamed reply: each piece of its text told to a listener at once, and logged as ``model_delta`` in batches.

A model that streams has ``stream(messages, tool_specs)``: text pieces (``str``), then the whole
``ModelReply`` (``astream``: an async iterator). With streaming on, the driver consumes it on the
call's worker and hands the pieces to its own thread, where a ``DeltaSink`` tells each to the listener
(``stream_agent``) and logs what came as a committed ``model_delta`` every ``every_s``: another process
follows the text as it grows, and a crash keeps what was written. The reply is logged as ever.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..events import ModelDelta
from ..messages import ModelReply

if TYPE_CHECKING:
    from .core import AgentCore

DELTA_EVERY_S: Final = 0.2  # the default: at most five delta commits a second per streaming run
MAX_DELTA_EVERY_S: Final = 0.5  # a follower sees the text at least this often


Listen = Callable[[int, str], None]  # told each piece of a streamed reply at once: its step, the text


class Streaming(NamedTuple):
    """How a run streams: ``every_s`` between delta commits, and who hears each piece at once (``listen``)."""

    every_s: float = DELTA_EVERY_S
    listen: Listen | None = None


class Piece(NamedTuple):
    """A piece of text a worker thread hands the driver's thread."""

    text: str


def stream_of(model: Any) -> Callable[..., Iterator[object]] | None:
    """The model's ``stream`` method, or None when it has none."""
    stream = getattr(model, "stream", None)
    return stream if callable(stream) else None


def astream_of(model: Any) -> Callable[..., AsyncIterator[object]] | None:
    """The model's ``astream`` method, or None when it has none."""
    astream = getattr(model, "astream", None)
    return astream if callable(astream) else None


def consume(stream: Callable[..., Iterator[object]], put: Callable[[str], None], messages: Any,
            specs: Any) -> ModelReply:
    """Iterate a model's stream, handing each piece of text to ``put``: the reply it ends with."""
    reply: ModelReply | None = None
    for item in stream(messages, specs):
        reply = _take(item, put, reply)
    return _ended(reply)


async def aconsume(astream: Callable[..., AsyncIterator[object]], put: Callable[[str], None], messages: Any,
                   specs: Any) -> ModelReply:
    """``consume`` for an async stream (``astream``)."""
    reply: ModelReply | None = None
    async for item in astream(messages, specs):
        reply = _take(item, put, reply)
    return _ended(reply)


def _take(item: object, put: Callable[[str], None], reply: ModelReply | None) -> ModelReply | None:
    if isinstance(item, str):
        if reply is not None:
            raise ValueError("the model's stream yielded text after its ModelReply")
        if item:
            put(item)
        return None
    if isinstance(item, ModelReply):
        return item
    raise TypeError(f"a model's stream yields text (str) and ends with its ModelReply, not {type(item).__name__}")


def _ended(reply: ModelReply | None) -> ModelReply:
    if reply is None:
        raise ValueError("the model's stream ended without yielding its ModelReply")
    return reply


class DeltaSink:
    """One streamed reply's pieces, on the driver's thread: told at once, logged in batches.

    ``commit`` makes the logged deltas durable (the recorder's ``sync``, or its async twin).
    """

    __slots__ = ("buffer", "commit", "core", "every_s", "first_s", "last", "listen", "offset", "started", "step")

    def __init__(self, core: AgentCore, step: int, streaming: Streaming, commit: Callable[[], None]) -> None:
        self.core, self.step, self.commit = core, step, commit
        self.every_s, self.listen = streaming.every_s, streaming.listen
        self.buffer: list[str] = []
        self.offset = 0
        self.started = self.last = time.monotonic()
        self.first_s: float | None = None

    def piece(self, text: str) -> None:
        """A piece of the reply's text, just come."""
        now = time.monotonic()
        if self.first_s is None:
            self.first_s = now - self.started
        if self.listen is not None:
            self.listen(self.step, text)
        self.buffer.append(text)
        if now - self.last >= self.every_s:
            self.flush()

    @property
    def due(self) -> float | None:
        """When the text held must be logged (monotonic seconds), or None when none is held."""
        return self.last + self.every_s if self.buffer else None

    def flush(self, commit: bool = True) -> None:
        """Log the text held as one ``model_delta``, and commit it unless ``commit`` is False."""
        self.last = time.monotonic()
        if not self.buffer:
            return
        text = "".join(self.buffer)
        self.buffer.clear()
        self.core.emit(ModelDelta(step=self.step, text=text, offset=self.offset))
        self.offset += len(text)
        if commit:
            self.commit()

    def close(self) -> float | None:
        """The reply is in (or given up on): log what is held, committed with the reply. Its time to first text."""
        self.flush(commit=False)
        return self.first_s
