"""Models that stream for the streaming tests: pieces of text at a pace, then the whole reply."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence

from runner import Message, ModelReply, ToolCall, ToolSpec


class StreamingModel:
    """Streams each reply of ``script`` word by word, ``pause_s`` apart; a call that is not streamed fails.

    A reply with tool calls streams its text, then the calls come whole with the reply.
    ``hold``: the first piece of each reply waits for it to be set after being sent (a test's handshake).
    """

    model_name = "streaming-model"

    def __init__(self, script: Sequence[ModelReply | str], pause_s: float = 0.0,
                 hold: threading.Event | None = None) -> None:
        self.script = [r if isinstance(r, ModelReply) else ModelReply(r) for r in script]
        self.pause_s, self.hold = pause_s, hold
        self.calls = 0

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        raise AssertionError("a streaming run must not call the model for its whole reply")

    def reply(self) -> ModelReply:
        self.calls += 1
        return self.script[self.calls - 1]

    def pieces(self, reply: ModelReply) -> list[str]:
        return re.findall(r"\S+\s*|\s+", reply.content or "")

    def stream(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> Iterator[str | ModelReply]:
        reply = self.reply()
        for i, piece in enumerate(self.pieces(reply)):
            yield piece
            if i == 0 and self.hold is not None:
                assert self.hold.wait(10), "the first piece never reached the caller"
            time.sleep(self.pause_s)
        yield reply


class AsyncStreamingModel(StreamingModel):
    """``StreamingModel`` with ``astream``: the pieces come from a coroutine on the event loop."""

    async def astream(self, messages: Sequence[Message],
                      tool_specs: Sequence[ToolSpec]) -> AsyncIterator[str | ModelReply]:
        reply = self.reply()
        for piece in self.pieces(reply):
            yield piece
            await asyncio.sleep(self.pause_s)
        yield reply


def call(call_id: str, name: str, content: str = "", **args: object) -> ModelReply:
    return ModelReply(content, [ToolCall(call_id, name, dict(args))])
