"""``GET /api/runs/{id}/events``: a run's log as server-sent events, on each backend.

A live run streams in a thread of the test (a model that writes a word at a time) while a real uvicorn
server in another serves the console: Starlette's TestClient reads a response whole, so it serves only
what ends by itself (a finished run, a refusal). The events are compared with the store's log and with
what ``runner show --json`` prints.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient

from runner import ModelReply, Status, run_agent
from runner.events import KIND_OF, ModelDelta, RunFinished, RunQueued
from runner.store import RunStore
from runner.ui import create_app, follow
from runner.ui.guard import secrets_for
from runner.ui.serve import Server
from tests.cli.helpers import invoke
from tests.loop.helpers import weather_registry
from tests.streaming.helpers import StreamingModel, call
from tests.ui.helpers import streaming

RUN = "e" * 32
DELTA = KIND_OF[ModelDelta]
FINISHED = KIND_OF[RunFinished]
LOOKING = "Let me look that up for you."
ANSWER = "It is 21C in Paris today, a fine and sunny day."
SCRIPT: list[ModelReply | str] = [call("c1", "get_weather", LOOKING, city="Paris"), ANSWER]
WAIT_S = 20.0  # bounds, not expectations


class Sse(NamedTuple):
    """One server-sent event as a client reads it."""

    id: int
    kind: str
    data: dict[str, Any]


def sse(lines: Iterator[str]) -> Iterator[Sse]:
    """The events in a stream's lines (a comment, ``retry:`` and a blank line between events are no event)."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if "data" in fields:
                yield Sse(int(fields["id"]), fields["event"], json.loads(fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


@contextmanager
def serving(app: Starlette) -> Iterator[tuple[str, Server]]:
    """``app`` served by uvicorn on a free port of 127.0.0.1 in a thread (as ``runner ui`` serves it), then stopped."""
    urls: list[str] = []
    server = Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on"),
                    urls.append, app.state.stopping)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not urls and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert urls, "the server did not start"
    try:
        yield urls[0], server
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the server did not stop"


def finished(store: RunStore) -> str:
    """A streamed run, done: its log holds each reply's deltas."""
    result = run_agent("Weather in Paris?", StreamingModel(SCRIPT, pause_s=0.01), weather_registry(), store=store,
                       stream=True, run_id=RUN, delta_interval_s=0.005)
    assert result.status == Status.DONE
    assert sum(e.kind == DELTA for e in store.get_run(RUN).events) > 4
    return RUN


def shown_events(store_url: str, run_id: str) -> list[dict[str, Any]]:
    """The run's events as ``runner show --json`` prints them."""
    printed: list[dict[str, Any]] = json.loads(invoke("show", run_id, "--json", "--db", store_url).stdout)["events"]
    return printed


def texts(events: list[Sse], step: int) -> str:
    """The text of a step's ``model_delta`` events, joined."""
    return "".join(e.data["data"]["text"] for e in events if e.kind == DELTA and e.data["step"] == step)


@pytest.mark.parametrize(("resume", "page"), [("Last-Event-ID", follow.PAGE), ("after", 3)])
def test_a_client_that_leaves_after_four_events_and_comes_back_gets_the_whole_log_once_in_order(
        store: RunStore, store_url: str, resume: str, page: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "PAGE", page)  # 3: the log is read a few events at a time
    model = StreamingModel(SCRIPT, pause_s=0.1)
    with serving(create_app(store)) as (url, _), streaming(store, model, weather_registry(), RUN) as done, \
            httpx.Client(base_url=url, timeout=WAIT_S) as client:
        with client.stream("GET", f"/api/runs/{RUN}/events") as first:
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            got = []
            for event in sse(first.iter_lines()):
                got.append(event)
                if len(got) == 4:
                    break
        assert not done.done()  # it left a live run
        seen = {resume: str(got[-1].id)}
        pushed = []
        with client.stream("GET", f"/api/runs/{RUN}/events", headers=seen if resume != "after" else None,
                           params=seen if resume == "after" else None) as second:
            for event in sse(second.iter_lines()):
                got.append(event)
                pushed.append(event.kind == DELTA and not done.done())
        assert done.done()  # the stream ended with the run
    run = store.get_run(RUN)
    assert [e.id for e in got] == [e.seq for e in run.events]  # no gap, no repeat, in order
    assert [e.data for e in got] == shown_events(store_url, RUN)
    assert got[-1].kind == FINISHED
    assert (texts(got, 1), texts(got, 2)) == (LOOKING, ANSWER)
    assert texts(got, 2) == run.answer
    assert sum(pushed) >= 3  # deltas came while the model still wrote


def test_a_finished_runs_stream_sends_its_whole_log_and_ends_and_past_its_end_there_is_nothing(
        store: RunStore, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = finished(store)
    printed = shown_events(store_url, run_id)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:  # it ends: read whole
        whole = client.get(f"/api/runs/{run_id[:8]}/events")  # a unique prefix, as the other routes take
        assert whole.status_code == 200
        assert whole.headers["content-type"].startswith("text/event-stream")
        got = list(sse(iter(whole.text.splitlines())))
        assert [e.data for e in got] == printed
        assert [(e.id, e.kind) for e in got] == [(e["seq"], e["kind"]) for e in printed]
        assert whole.text.startswith(f"retry: {follow.RETRY_MS}\n\n")
        last = got[-1].id
        tail = client.get(f"/api/runs/{run_id}/events", params={"after": "5"})
        assert [e.data for e in sse(iter(tail.text.splitlines()))] == printed[5:]
        no_id = client.get(f"/api/runs/{run_id}/events", params={"after": "5"}, headers={"Last-Event-ID": " "})
        assert no_id.text == tail.text  # an empty Last-Event-ID (no event seen yet) says nothing
        header_wins = client.get(f"/api/runs/{run_id}/events", params={"after": "0"}, headers={"Last-Event-ID": "7"})
        assert [e.id for e in sse(iter(header_wins.text.splitlines()))] == list(range(8, last + 1))
        for ended in ({"Last-Event-ID": str(last)}, {"Last-Event-ID": str(last + 100)}):
            nothing = client.get(f"/api/runs/{run_id}/events", headers=ended)
            assert (nothing.status_code, nothing.content) == (204, b"")  # an EventSource stops reconnecting
        monkeypatch.setattr(follow, "PAGE", 2)
        paged = client.get(f"/api/runs/{run_id}/events")
        assert [e.data for e in sse(iter(paged.text.splitlines()))] == printed


def test_a_missing_run_is_404_and_a_bad_resume_point_400_as_the_other_routes_answer(store: RunStore) -> None:
    finished(store)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        missing = client.get("/api/runs/nope/events")
        assert missing.status_code == 404
        assert missing.json() == client.get("/api/runs/nope").json() == {"error": f"no run 'nope' in {store.url}"}
        for bad in ("-1", "x", "1.5", "\u0661", "9" * 19):  # U+0661: a digit int() takes
            refused = client.get(f"/api/runs/{RUN}/events", headers={b"Last-Event-ID": bad.encode()})
            assert refused.status_code == 400, bad
            assert refused.json()["error"].startswith("Last-Event-ID must be an event's seq"), bad
            refused = client.get(f"/api/runs/{RUN}/events", params={"after": bad})
            assert refused.json()["error"].startswith("after must be an event's seq"), bad
        assert client.get(f"/api/runs/{RUN}/events", params={"after": ""}).status_code == 200  # empty: from the start


def test_the_stream_takes_the_consoles_token_and_cookie_as_every_read_does(store: RunStore) -> None:
    finished(store)
    secrets = secrets_for("s3cret")
    path = f"/api/runs/{RUN}/events"
    with TestClient(create_app(store, token="s3cret"), base_url="http://127.0.0.1") as client:
        refused = client.get(path)
        assert refused.status_code == client.get(f"/api/runs/{RUN}").status_code == 401
        assert refused.json()["error"].startswith("this console needs its token")
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        client.cookies.set(secrets.cookie, "wrong")
        assert client.get(path).status_code == 401
        client.cookies.set(secrets.cookie, secrets.read)  # what a page opened with ?token= sends
        by_cookie = client.get(path)
        assert by_cookie.status_code == 200
        assert by_cookie.headers["cache-control"] == "no-store"
        assert "connect-src 'self'" in by_cookie.headers["content-security-policy"]
        client.cookies.clear()
        assert client.get(path, headers={"Authorization": "Bearer s3cret"}).text == by_cookie.text
    with TestClient(create_app(store), base_url="http://evil.example") as client:  # no token: loopback only
        assert client.get(path).status_code == 403
    with TestClient(create_app(store, read_only=True), base_url="http://127.0.0.1") as client:  # a read
        assert client.get(path).status_code == 200
        assert client.post(path).status_code == 403


def test_a_queued_runs_stream_waits_for_it_and_head_answers_at_once(store: RunStore) -> None:
    store.queue_run(RunQueued(run_id=RUN, task="job", agent_name="tipper", limits={}))
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        head = client.head(f"/api/runs/{RUN}/events")  # not a stream as long as the run
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-type"].startswith("text/event-stream")
    with serving(create_app(store)) as (url, _), httpx.Client(base_url=url, timeout=WAIT_S) as http, \
            http.stream("GET", f"/api/runs/{RUN}/events") as queued:
        lines = queued.iter_lines()
        assert next(sse(lines)).kind == KIND_OF[RunQueued]
        assert store.cancel_queued(RUN, "not wanted")
        assert [e.kind for e in sse(lines)] == [FINISHED]  # then it ended


def test_a_client_that_goes_away_leaves_no_request_behind_and_nothing_logged(
        store: RunStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    model = StreamingModel(["word " * 30], pause_s=0.1)
    with serving(create_app(store)) as (url, server), streaming(store, model, weather_registry(), RUN) as done:
        with httpx.Client(base_url=url, timeout=WAIT_S) as client:
            for _ in range(3):
                with client.stream("GET", f"/api/runs/{RUN}/events") as response:
                    next(sse(response.iter_lines()))
        deadline = time.monotonic() + 5
        while (server.server_state.tasks or server.server_state.connections) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not done.done()  # the run goes on; its followers' requests ended
        assert (server.server_state.tasks, server.server_state.connections) == (set(), set())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_console_stops_at_once_while_a_client_follows_a_live_run(store: RunStore) -> None:
    model = StreamingModel(["word " * 40], pause_s=0.1)
    with streaming(store, model, weather_registry(), RUN) as done:
        with serving(create_app(store)) as (url, server), httpx.Client(base_url=url, timeout=WAIT_S) as client, \
                client.stream("GET", f"/api/runs/{RUN}/events") as response:
            lines = response.iter_lines()
            next(sse(lines))
            asked = time.monotonic()
            server.should_exit = True
            rest = list(sse(lines))  # the stream ends as the server stops
            took = time.monotonic() - asked
        assert not done.done()
    assert took < 2.0
    assert FINISHED not in [e.kind for e in rest]
