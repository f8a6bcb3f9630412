"""``runner`` with a model that streams, for the tests of what the terminal prints while a reply is written.

``python -m tests.cli.stream_cli ARGS``: the real command line, where ``--model openai:NAME`` builds a
``GatedModel`` instead of the OpenAI adapter. It streams the replies in ``STREAM_CLI_SCRIPT`` (a JSON
list: a string, or ``{"content": ..., "calls": [[id, name, args], ...]}``) word by word,
``STREAM_CLI_PAUSE_S`` apart; after the first piece of each reply it waits until the file
``STREAM_CLI_GATE`` exists (when set), having created ``GATE.waiting``: the test's handshake.
Asked for the whole reply (``--no-stream``) it waits at the gate too, then answers at once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from runner import Message, Model, ModelReply, ToolCall, ToolSpec
from runner.cli import main, specs
from tests.streaming.helpers import StreamingModel

GATE_S = 60.0  # a bound, not an expectation: how long a reply waits for the test to open its gate


def script() -> list[ModelReply]:
    """The replies ``STREAM_CLI_SCRIPT`` holds."""
    replies: list[ModelReply] = []
    for item in json.loads(os.environ.get("STREAM_CLI_SCRIPT", "[]")):
        if isinstance(item, str):
            replies.append(ModelReply(item))
        else:
            replies.append(ModelReply(item.get("content", ""),
                                      [ToolCall(i, name, args) for i, name, args in item.get("calls", [])]))
    return replies


def wait_at_gate() -> None:
    """Wait until the test opens the gate (creates its file), saying first that it waits."""
    gate = os.environ.get("STREAM_CLI_GATE")
    if not gate:
        return
    Path(gate + ".waiting").touch()
    deadline = time.monotonic() + GATE_S
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError("the test never opened the gate")
        time.sleep(0.01)


class GatedModel(StreamingModel):
    """A ``StreamingModel`` named as the OpenAI adapter names its models, held at the test's gate."""

    provider_name = "openai"

    def __init__(self, name: str) -> None:
        super().__init__(script(), pause_s=float(os.environ.get("STREAM_CLI_PAUSE_S", "0")))
        self.model_name = name

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        wait_at_gate()
        return self.reply()

    def stream(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> Iterator[str | ModelReply]:
        reply = self.reply()
        for i, piece in enumerate(self.pieces(reply)):
            yield piece
            if i == 0:
                wait_at_gate()
            time.sleep(self.pause_s)
        yield reply


def build_model(spec: str, base_url: str | None, api_key: str | None) -> Model:
    provider, _, name = spec.partition(":")
    assert provider == "openai", spec
    return GatedModel(name)


if __name__ == "__main__":
    specs.build_model = build_model  # before any command loads (they load on first use) and imports it
    main()
