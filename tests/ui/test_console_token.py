"""A console with a token on a shared host, in Chromium: what a server on another port of 127.0.0.1 receives
from the browser (its cookies included) cannot act, while the console's own pages can, and two consoles on
one host keep their cookies apart."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Page

from runner._log.statuses import Status
from runner.ui.guard import secrets_for
from tests.cli.helpers import FakeOpenAI, completion, installed_runner
from tests.ui.helpers import (
    ROOT,
    TOOLS,
    Start,
    awaiting,
    decide,
    decisions,
    events_of,
    local_env,
    ran,
    record,
    status_of,
)

pytestmark = [pytest.mark.process]

TOKEN = "s3cret"
OTHER_TOKEN = "an0ther"
HTTP_S = 30.0  # a bound, not an expectation


class Catcher:
    """A server on another port of 127.0.0.1 that keeps the headers of every request the browser sends it."""

    def __init__(self) -> None:
        seen: list[dict[str, str]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append({name.lower(): value for name, value in self.headers.items()})
                body = b"<!doctype html><p>nothing to see</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Catcher:
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(url: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, str]:
    """A request as a server replaying what it caught would send it (no ``Origin``, as curl sends none)."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=HTTP_S) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_a_server_on_another_port_that_gets_the_cookie_cannot_act_and_the_console_still_can(
        store_url: str, page: Page, console: Start, ran_file: Path) -> None:
    run_id = awaiting(store_url)
    done = record(store_url, "Read the home page", completion("", [("c1", "fetch_page", {"ref": "home"})]),
                  completion("Read."))
    before = {one: events_of(store_url, one) for one in (run_id, done)}
    with FakeOpenAI(completion("Sent."), completion("Forked.")) as model:
        ui = console(store_url, "--token", TOKEN, "--tools", TOOLS, "--base-url", model.url)
        page.goto(ui.url)  # the printed URL: the console's cookie, and the key in this tab
        assert page.url == f"{ui.origin}/"
        with Catcher() as thief:
            page.goto(thief.origin + "/")
            caught = thief.seen[-1]
        assert "cookie" in caught  # browsers send a host's cookies to every port of it
        stolen = {"cookie": caught["cookie"]}
        read_page = send(ui.at(f"/runs/{run_id}"), stolen)
        assert read_page[0] == 200  # the cookie reads (docs/console.md says so) ...
        assert secrets_for(TOKEN).act not in read_page[1]
        assert "#key=" not in read_page[1]
        form = {**stolen, "content-type": "application/x-www-form-urlencoded"}
        posts = [
            (f"/runs/{run_id}/decide", form, urlencode({"call_id": "t1", "verdict": "approve"})),
            (f"/runs/{run_id}/decide", form, urlencode({"call_id": "t1", "verdict": "deny", "reason": "x",
                                                        "_key": "0" * 64})),
            (f"/runs/{run_id}/cancel", form, ""),
            (f"/runs/{done}/fork", form, urlencode({"at_step": "1"})),
            (f"/runs/{done}/resume", form, ""),
            (f"/api/runs/{run_id}/decisions", {**stolen, "content-type": "application/json"},
             json.dumps({"decisions": {"t1": True}})),
            (f"/api/runs/{run_id}/cancel", {**stolen, "content-type": "application/json"}, "{}"),
        ]
        for path, headers, body in posts:
            status, text = send(ui.at(path), headers, body.encode())
            assert status == 403, (path, status, text)
        assert {one: events_of(store_url, one) for one in (run_id, done)} == before
        assert model.requests == []

        page.goto(ui.at("/approvals"))  # the console's own page, in the tab that opened the printed URL
        assert decide(page, run_id, "t1", "approve") == 200
        page.goto(ui.at(f"/runs/{done}"))
        with page.expect_navigation():
            page.locator("form#fork button[type=submit]").click()
        assert page.locator("#run-header").count() == 1
        assert f"/runs/{done}" not in page.url
    assert decisions(store_url, run_id)[0]["approved"] is True
    assert ran(ran_file) == ["transfer a"]
    assert status_of(store_url, run_id) in (Status.DONE, Status.RUNNING)


def test_two_consoles_on_one_host_both_keep_working(store_url: str, page: Page, console: Start) -> None:
    first_run, second_run = awaiting(store_url, ref="a"), awaiting(store_url, ref="b")
    first = console(store_url, "--token", TOKEN, "--by", "alice")
    second = console(store_url, "--token", OTHER_TOKEN, "--by", "bob")
    page.goto(first.url)
    page.goto(second.url)
    names = sorted(cookie["name"] for cookie in page.context.cookies())
    assert names == sorted([secrets_for(TOKEN).cookie, secrets_for(OTHER_TOKEN).cookie])
    for ui in (first, second):
        response = page.goto(ui.at("/approvals"))
        assert response is not None
        assert response.status == 200, ui.url
    page.goto(second.at("/approvals"))
    assert decide(page, second_run, "t1", "deny", "not now") == 200
    page.goto(first.at("/approvals"))
    assert decide(page, first_run, "t1", "deny", "no") == 200
    assert [d["decided_by"] for d in decisions(store_url, first_run)] == ["alice"]
    assert [d["decided_by"] for d in decisions(store_url, second_run)] == ["bob"]


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the Unix socket at ``path``, as ``curl --unix-socket`` or an ``ssh -L`` tunnel sends it."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=HTTP_S)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(HTTP_S)
        self.sock.connect(self.path)


def test_a_console_on_a_unix_socket_only_its_user_may_open(store_url: str, tmp_path: Path, ran_file: Path) -> None:
    run_id = awaiting(store_url)
    path = str(tmp_path / "ui.sock")
    process = subprocess.Popen([installed_runner(), "ui", "--db", store_url, "--uds", path], cwd=ROOT,
                               env=local_env(ran_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().rstrip("\n") == f"runner ui: serving unix:{path}"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        connection = UnixConnection(path)
        connection.request("GET", f"/api/runs/{run_id}")
        answer = connection.getresponse()
        assert (answer.status, json.loads(answer.read())["run"]["run_id"]) == (200, run_id)
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=HTTP_S)
    assert process.returncode == 0, err
    assert not os.path.exists(path)  # the socket file goes with the console
