"""``GET /api/runs/{ref}/events``: a run's log as server-sent events, each pushed once it is committed.

Each event is ``id:`` its ``seq``, ``event:`` its kind, ``data:`` the event as ``runner show --json`` lists it.
``Last-Event-ID`` (what a browser's ``EventSource`` sends when it reconnects), else ``?after=SEQ``, resumes
after that event. The store is polled every ``POLL_S`` for the events past the last one sent, a page at a
time; the stream ends once the run has stopped (neither running nor queued) and all its events were sent,
or when the console stops. Past a stopped run's last event there is nothing to send: 204, so a browser stops.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Final, NamedTuple

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .._text import one_line
from .._view.console import LIVE_STATUSES
from .._view.summary import event_json
from ..errors import StoreError
from ..events import KIND_OF, ModelCalled, ModelDelta, RunFinished
from ..store import StoredEvent, Tail
from .refs import ref_of
from .state import Console

POLL_S: Final = 0.15  # how often a live run's log is read for new events (one indexed range read)
KEEP_ALIVE_S: Final = 15.0  # a comment after this long without an event: proxies keep the stream open
PAGE: Final = 200  # events read at once: memory is bounded by a page, however long the run's log
RETRY_MS: Final = 1000  # how soon a browser reconnects after losing the stream
SEQ: Final = re.compile(r"[0-9]{1,18}")
MEDIA_TYPE: Final = "text/event-stream"


class Followed(NamedTuple):
    """The kinds the run page's script listens for: a piece of a reply, a reply logged whole, the end, all of them."""

    delta: str
    reply: str
    end: str
    every: str  # space-separated


FOLLOWED: Final = Followed(KIND_OF[ModelDelta], KIND_OF[ModelCalled], KIND_OF[RunFinished],
                           " ".join(sorted(KIND_OF.values())))


def resume_point(request: Request) -> int:
    """The ``seq`` the client saw last: its ``Last-Event-ID`` header, else ``?after=``, else 0 (the whole log)."""
    given = request.headers.get("last-event-id")
    name = "Last-Event-ID"
    if given is None or not given.strip():  # a browser that saw no event yet sends none
        given, name = request.query_params.get("after"), "after"
    if given is None or not given.strip():
        return 0
    if not SEQ.fullmatch(given.strip()):
        raise HTTPException(400, f"{name} must be an event's seq (a whole number, 0 or more), got {given!r}")
    return int(given)


async def run_events(request: Request) -> Response:
    """``GET /api/runs/{ref}/events``: the run's events past the client's last, then each new one as it comes."""
    console: Console = request.state.console
    after = resume_point(request)
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    first = await run_in_threadpool(console.store.events_after, run_id, after, PAGE)
    if not first.events and first.status not in LIVE_STATUSES:
        return Response(status_code=204)  # all was sent: an EventSource told 204 reconnects no more
    if request.method == "HEAD":  # the headers only, not a stream that lasts as long as the run
        return Response(media_type=MEDIA_TYPE)
    return StreamingResponse(frames(console, run_id, after, first), media_type=MEDIA_TYPE,
                             headers={"x-accel-buffering": "no"})  # a proxy passes each event on at once


async def frames(console: Console, run_id: str, after: int, tail: Tail) -> AsyncIterator[bytes]:
    """The stream's text: each event past ``after`` (``tail`` holds the first page), until the run has stopped.

    A page as long as the store's page is followed at once by the next; a shorter one, by a wait. A client
    that goes away cancels this at its next wait or read; a store that fails ends the stream with a comment.
    """
    yield f"retry: {RETRY_MS}\n\n".encode()
    last, said = after, time.monotonic()
    while True:
        for event in tail.events:
            yield frame(event)
            last, said = event.seq, time.monotonic()
        full = len(tail.events) >= PAGE
        if tail.status not in LIVE_STATUSES and not full:
            return
        if not full:
            await asyncio.sleep(POLL_S)
        if console.stopping.is_set():
            return
        if time.monotonic() - said > KEEP_ALIVE_S:
            yield b": keep-alive\n\n"
            said = time.monotonic()
        try:
            tail = await run_in_threadpool(console.store.events_after, run_id, last, PAGE)
        except StoreError as exc:  # the client reconnects after ``last``, and hears the error then if it lasts
            yield f": stopped: {one_line(exc)}\n\n".encode()
            return


def frame(event: StoredEvent) -> bytes:
    """One event as a server-sent event; its JSON escapes every control and non-ASCII character, as the CLI's."""
    data = json.dumps(event_json(event), ensure_ascii=True, default=str)
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()
