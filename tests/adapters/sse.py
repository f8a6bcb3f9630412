"""A real HTTP server on 127.0.0.1 that streams server-sent events, and the providers' streams in their shapes.

The streaming adapters are tested through the official SDK clients over a real socket, so the
SDK's own SSE reading, chunked transfer and connection handling are what the adapters meet.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.adapters.wire import ANTHROPIC_MODEL, OPENAI_MODEL


class Cut:
    """In a script: close the connection here, the body unfinished."""


class Watch:
    """In a script: wait until the client has closed the connection (at most ``HOLD_S``), then end the body.

    ``closed`` says whether it did; ``checked`` is set once that is known.
    """

    def __init__(self) -> None:
        self.closed: bool | None = None
        self.checked = threading.Event()

    def wait(self, connection: socket.socket) -> None:
        deadline = time.monotonic() + HOLD_S
        while (left := deadline - time.monotonic()) > 0:
            if select.select([connection], [], [], left)[0]:
                self.closed = connection.recv(1, socket.MSG_PEEK) == b""
                if self.closed:
                    break
        self.checked.set()


CUT = Cut()
Frame = bytes | threading.Event | Cut | Watch
Script = list[Frame] | tuple[int, Any]
HOLD_S = 10.0  # how long a script waits on an event before it goes on anyway


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection (a stream left early, a closed client) is no error here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class SSEServer:
    """Answers each POST with its next script: frames of server-sent events, or ``(status, json)`` for a whole body.

    A frame is bytes (written and flushed at once), an ``Event`` (wait until it is set, at most
    ``HOLD_S``; ``held`` says whether each wait was met), ``CUT`` or a ``Watch``. The body is sent chunked, so a
    cut is a broken body to the client; with ``chunked=False`` it runs until the connection closes,
    and a cut is a clean end. ``done`` is set once a stream's last frame is written.
    """

    def __init__(self, *scripts: Script, chunked: bool = True) -> None:
        self.scripts = list(scripts)
        self.bodies: list[Any] = []
        self.paths: list[str] = []
        self.held: list[bool] = []
        self.done = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                server.paths.append(self.path)
                if not server.scripts:
                    raise AssertionError(f"no script left for request {len(server.bodies)}")
                script = server.scripts.pop(0)
                if isinstance(script, tuple):
                    self.whole(*script)
                else:
                    self.stream(script)

            def whole(self, status: int, body: Any) -> None:
                out = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def stream(self, frames: list[Frame]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                for frame in frames:
                    if isinstance(frame, threading.Event):
                        server.held.append(frame.wait(HOLD_S))
                    elif isinstance(frame, Cut):
                        self.close_connection = True
                        return
                    elif isinstance(frame, Watch):
                        frame.wait(self.connection)
                        self.close_connection = True
                        return
                    else:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame) if chunked else frame)
                        self.wfile.flush()
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                server.done.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


Serve = Callable[..., SSEServer]


def servers() -> Iterator[Serve]:
    """The body of the ``serve`` fixture: ``serve(*scripts, chunked=True)`` is a running ``SSEServer``.

    Every server it started is stopped when the fixture ends.
    """
    started: list[SSEServer] = []

    def start(*scripts: Script, chunked: bool = True) -> SSEServer:
        started.append(SSEServer(*scripts, chunked=chunked))
        return started[-1]

    yield start
    for server in started:
        server.close()


def event(data: Any, name: str | None = None) -> bytes:
    """One server-sent event: its JSON data, under ``name`` when given."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None,
          usage: dict[str, Any] | None = None) -> bytes:
    """A Chat Completions stream chunk: a delta of the one choice, or (no delta) the usage chunk with no choices."""
    body: dict[str, Any] = {"id": "chatcmpl-abc123", "object": "chat.completion.chunk", "created": 1_700_000_000,
                            "model": OPENAI_MODEL, "system_fingerprint": "fp_test", "choices": []}
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    if usage is not None:
        body["usage"] = usage
    return event(body)


DONE = b"data: [DONE]\n\n"


def openai_stream(pieces: Sequence[str] = (), calls: Sequence[tuple[str, str, Sequence[str]]] = (),
                  finish_reason: str = "stop", usage: tuple[int, int] = (20, 5), cached: int | None = None,
                  refusal: Sequence[str] = ()) -> list[Frame]:
    """A streamed completion: the role, the text's pieces, each call's id and name then its arguments' fragments,
    the finish reason, the usage chunk and ``[DONE]``."""
    frames: list[Frame] = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in pieces]
    frames += [chunk({"refusal": piece}) for piece in refusal]
    for index, (call_id, name, fragments) in enumerate(calls):
        frames.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        frames += [chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                   for fragment in fragments]
    frames.append(chunk({}, finish_reason))
    counts: dict[str, Any] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    if cached is not None:
        counts["prompt_tokens_details"] = {"cached_tokens": cached}
    frames += [chunk(usage=counts), DONE]
    return frames


def anthropic_event(data: dict[str, Any]) -> bytes:
    return event(data, data["type"])


def anthropic_stream(blocks: Sequence[tuple[str, Any]], stop_reason: str = "end_turn",
                     usage: tuple[int, int] = (30, 7), **usage_extra: int) -> list[Frame]:
    """A streamed message: ``message_start`` with the input usage, each block's start, deltas and stop
    (``("text", pieces)`` or ``("tool_use", (id, name, json_fragments))``), a ``ping``, then ``message_delta``
    with the stop reason and output usage, and ``message_stop``."""
    frames: list[Frame] = [anthropic_event({"type": "message_start", "message": {
        "id": "msg_01ABC", "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1, **usage_extra}}})]
    for index, (kind, body) in enumerate(blocks):
        if kind == "text":
            frames.append(anthropic_event({"type": "content_block_start", "index": index,
                                           "content_block": {"type": "text", "text": ""}}))
            frames += [anthropic_event({"type": "content_block_delta", "index": index,
                                        "delta": {"type": "text_delta", "text": piece}}) for piece in body]
        else:
            call_id, name, fragments = body
            frames.append(anthropic_event({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}}))
            frames += [anthropic_event({"type": "content_block_delta", "index": index,
                                        "delta": {"type": "input_json_delta", "partial_json": fragment}})
                       for fragment in fragments]
        frames.append(anthropic_event({"type": "content_block_stop", "index": index}))
    frames.append(anthropic_event({"type": "ping"}))
    frames.append(anthropic_event({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                                      "stop_sequence": None},
                                   "usage": {"output_tokens": usage[1]}}))
    frames.append(anthropic_event({"type": "message_stop"}))
    return frames
