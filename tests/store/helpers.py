"""Shared by the store tests: the event kinds a run of two tool steps and an answer leaves in the log,
and a PostgreSQL store behind a proxy that can cut it off from its server."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from runner.store import RunStore, open_store
from tests.conftest import SESSION_PREFIX, drop_pg_schema, pg_schema_url

OPENING = ["run_started", "message", "message"]
"""The run, its system prompt and its task."""
TOOL_STEP = ["step_started", "message", "model_call", "tool_started", "tool_finished", "message", "step_finished"]
"""A step whose reply calls one tool."""
ANSWER_STEP = ["step_started", "message", "model_call", "step_finished"]
"""A step whose reply is the answer."""

KINDS_PER_RUN = [*OPENING, *TOOL_STEP, *TOOL_STEP, *ANSWER_STEP, "run_finished"]
"""The whole log of a run that calls a tool in each of two steps, then answers."""
KINDS_BEFORE_KILL = [*OPENING, *TOOL_STEP, *TOOL_STEP[:4]]
"""The same run's log when it is killed while its second tool runs."""


class CuttableProxy:
    """A TCP proxy to the PostgreSQL server that can be cut as a restart or failover cuts a server:
    every open connection dropped, new ones refused, for a while."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.down_until = 0.0
        self.open: list[Any] = []
        self.refused = 0
        self.silent = False  # ``go_silent``: nothing forwarded, nothing closed, as a partition or a dead host
        self.held: list[Any] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if time.monotonic() < self.down_until:
                self.refused += 1
                client.close()
                continue
            if self.silent:
                self.held.append(client)  # accepted (the kernel did it already), never answered
                continue
            upstream = socket.create_connection(self.target)
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: Any, b: Any) -> None:
        try:
            while data := a.recv(65536):
                while self.silent:  # hold what came, forward nothing, close nothing
                    time.sleep(0.05)
                b.sendall(data)
        except OSError:
            pass
        for sock in (a, b):
            with contextlib.suppress(OSError):
                sock.close()

    def cut(self, seconds: float) -> None:
        self.down_until = time.monotonic() + seconds
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(2)
                sock.close()
        self.open = []

    def go_silent(self) -> None:
        """Stop forwarding in both directions without closing anything: the server stops answering."""
        self.silent = True

    def close(self) -> None:
        self.silent = False
        for sock in self.held:
            with contextlib.suppress(OSError):
                sock.close()
        self.cut(0)
        self.server.close()


@contextmanager
def store_behind_a_proxy(pg_admin: Engine) -> Iterator[tuple[RunStore, CuttableProxy]]:
    """A store on a schema of its own, reached through a ``CuttableProxy``; all dropped afterwards."""
    schema = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}"
    url = make_url(pg_schema_url(pg_admin, schema))
    proxy = CuttableProxy(url.host or "127.0.0.1", url.port or 5432)
    store = open_store(url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
    try:
        yield store, proxy
    finally:
        proxy.down_until = 0.0
        store.close()
        proxy.close()
        drop_pg_schema(pg_admin, schema)
