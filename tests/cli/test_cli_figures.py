"""The figures ``runner runs`` and ``runner show`` print for a run: its tool calls and its active time."""

from __future__ import annotations

import json
import re
import socket
import time
from datetime import datetime
from typing import Any

from sqlalchemy import update

from runner import ScriptedModel, ToolRegistry, run_agent
from runner._loop.actions import CallTool
from runner._loop.core import DEFAULT_SYSTEM
from runner._loop.sync import drive_until
from runner._run.build import NOT_GIVEN, build_core
from runner._run.resume import resume
from runner.store import RunStore, open_store
from runner.store.tables import runs
from tests.cli.helpers import invoke, rows
from tests.loop.helpers import call, reply, weather_registry

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


def at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["at"])


def shown_run(store_url: str, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """``runner show --json``'s run and events, and the duration line of the timeline."""
    found = json.loads(invoke("show", run_id, "--db", store_url, "--json").stdout)
    return found["run"], found["events"], invoke("show", run_id, "--db", store_url).stdout.splitlines()[1]


def test_show_gives_the_active_time_apart_from_the_wait_for_approval(store_url: str) -> None:
    registry = ToolRegistry()
    registry.register("pay", "Pay.", {"type": "object"}, lambda: "paid", needs_approval=True)
    with open_store(store_url) as store:
        waiting = run_agent("Pay", ScriptedModel([reply("", call("c1", "pay"))]), registry, store=store)
        assert waiting.status == "awaiting_approval"
        time.sleep(0.6)  # nobody decides for a while
        resume(store, waiting.run_id, ScriptedModel(["Paid."]), registry, decisions={"c1": True})
    run, events, line = shown_run(store_url, waiting.run_id)
    (started, first_stop, resumed, stop) = [e for e in events if e["kind"] in (
        "run_started", "run_finished", "run_resumed")]
    active = (at(first_stop) - at(started)) + (at(stop) - at(resumed))
    assert run["active_s"] == active.total_seconds()
    assert run["duration_s"] - run["active_s"] >= 0.6
    assert list(run)[list(run).index("duration_s") + 1] == "active_s"
    assert re.search(r" UTC, took \d\S*s \(active \d\S*s\); 2 steps, ", line), line


def test_a_part_whose_process_died_is_active_until_its_last_event(store_url: str) -> None:
    run_id = "b" * 32
    with open_store(store_url) as store:
        crash_in_first_tool(store, run_id)
        resume(store, run_id, ScriptedModel(["Warm."]), weather_registry())
    run, events, _ = shown_run(store_url, run_id)
    resumed = next(i for i, e in enumerate(events) if e["kind"] == "run_resumed")
    active = (at(events[resumed - 1]) - at(events[0])) + (at(events[-1]) - at(events[resumed]))
    assert run["active_s"] == active.total_seconds()
