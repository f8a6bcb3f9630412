"""A PostgreSQL server that stops answering (a partition, a dead host) fails a run and a console request
within a bound, as one that refuses connections does, and loses nothing committed before."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner.errors import StoreError
from runner.store import open_store
from runner.ui import create_app
from tests.store.helpers import OPENING, TOOL_STEP, CuttableProxy, store_behind_a_proxy

pytestmark = pytest.mark.postgres

RUN_BOUND_S = 30.0  # the bound for a run; the test waits a little longer, then fails
CONSOLE_BOUND_S = 30.0


def _silencing(proxy: CuttableProxy) -> ToolRegistry:
    registry = ToolRegistry()

    def quiet(n: int) -> dict[str, int]:
        proxy.go_silent()
        return {"n": n}

    registry.register("quiet", "Make the server go silent.",
                      {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, quiet)
    return registry


def test_a_run_whose_server_goes_silent_ends_with_a_store_error_and_keeps_its_log(pg_admin: Engine) -> None:
    with store_behind_a_proxy(pg_admin) as (store, proxy):
        direct = store.url.set(host=proxy.target[0], port=proxy.target[1]).render_as_string(hide_password=False)
        model = ScriptedModel([ModelReply("", [ToolCall("c1", "quiet", {"n": 1})]), "never"])
        outcome: list[BaseException | str] = []

        def drive() -> None:
            try:
                outcome.append(run_agent("t", model, _silencing(proxy), store=store, run_id="silent-run").status)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=drive, daemon=True)
        thread.start()
        while not proxy.silent and thread.is_alive():
            time.sleep(0.01)
        started = time.monotonic()
        thread.join(RUN_BOUND_S + 10)
        took = time.monotonic() - started
        if thread.is_alive():
            proxy.silent = False  # let the stuck commit finish, so the store closes
            thread.join(60)
            pytest.fail(f"the run still waited for a silent server after {took:.0f} s")
        assert len(outcome) == 1
        assert isinstance(outcome[0], StoreError), outcome
        assert str(outcome[0]).startswith("cannot write run silent-run to the store: ")
        assert took < RUN_BOUND_S
        proxy.silent = False
        with open_store(direct, read_only=True) as reader:  # past the proxy: what was committed is there
            kinds = [e.kind for e in reader.get_run("silent-run").events]
        assert kinds == [*OPENING, *TOOL_STEP[:4]]  # up to the tool's start, committed before it ran


def test_a_console_request_on_a_pooled_connection_to_a_silent_server_gets_a_503(pg_admin: Engine) -> None:
    with store_behind_a_proxy(pg_admin) as (store, proxy):
        run_agent("t", ScriptedModel(["answer"]), ToolRegistry(), store=store, run_id="quiet-run")
        with store.reading() as conn:  # a connection left idle in the pool
            conn.exec_driver_sql("SELECT 1")
        with TestClient(create_app(store, read_only=True), base_url="http://127.0.0.1:8000") as client:
            assert client.get("/api/runs/quiet-run").status_code == 200
            proxy.go_silent()
            answer: list[int] = []
            thread = threading.Thread(target=lambda: answer.append(client.get("/api/runs/quiet-run").status_code),
                                      daemon=True)
            started = time.monotonic()
            thread.start()
            thread.join(CONSOLE_BOUND_S + 10)
            took = time.monotonic() - started
            if thread.is_alive():
                proxy.silent = False
                thread.join(60)
                pytest.fail(f"the console still waited for a silent server after {took:.0f} s")
            assert answer == [503]
            assert took < CONSOLE_BOUND_S
            proxy.silent = False
