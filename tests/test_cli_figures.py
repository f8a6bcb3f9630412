"""The figures ``runner runs`` and ``runner show`` print for a run: its tool calls and its active time."""

from __future__ import annotations

import json
import socket

from sqlalchemy import update

from runner import ScriptedModel
from runner._loop.build import NOT_GIVEN, build_core
from runner._loop.core import DEFAULT_SYSTEM
from runner._loop.results import CallTool
from runner._loop.resume import resume
from runner._loop.sync import drive_until
from runner.store import RunStore, open_store
from runner.store.tables import runs
from tests.loop_helpers import call, reply, weather_registry
from tests.test_cli_helpers import invoke, rows

GONE = f"{socket.gethostname()}:4194999"  # a pid on this host that runs nothing: the owner is dead


def crash_in_first_tool(store: RunStore, run_id: str) -> None:
    """Leave ``run_id`` as a process killed while its first tool ran: the call started, never finished."""
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))])
    core = build_core("Weather?", model, weather_registry(), DEFAULT_SYSTEM, NOT_GIVEN, NOT_GIVEN, store=store,
                      run_id=run_id)
    assert drive_until(core, lambda action: isinstance(action, CallTool)) is None
    store.heartbeat.discard(run_id)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=GONE))


def test_a_call_run_again_after_a_crash_counts_once(store_url: str) -> None:
    run_id = "a" * 32
    with open_store(store_url) as store:
        crash_in_first_tool(store, run_id)
        result = resume(store, run_id, ScriptedModel(["Warm."]), weather_registry())
        run = store.get_run(run_id)
    attempts = [e.data.get("attempt", 1) for e in run.events if e.kind == "tool_started"]
    assert attempts == [1, 2]  # get_weather has no side effects: the call in doubt ran again
    assert (result.status, result.tool_calls, run.tool_calls) == ("done", 1, 1)
    assert run.events[-1].data["tool_calls"] == 1
    (row,) = rows(invoke("runs", "--db", store_url).stdout)
    assert row[4] == "1"
    assert json.loads(invoke("runs", "--db", store_url, "--json").stdout)[0]["tool_calls"] == 1
    header = invoke("show", run_id, "--db", store_url).stdout.splitlines()[1]
    assert "; 2 steps, 1 tool call, " in header
