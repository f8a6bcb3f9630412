"""Retention: ``RunStore.prune`` deletes whole finished runs; single events stay undeletable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError

from runner import ScriptedModel, run_agent
from runner._run.resume import follow_up
from runner.pool.queued import record_queued, request_cancel
from runner.store import RunStore
from runner.store.tables import events, run_cancels, run_deletions, run_labels, run_tools, runs
from tests.loop.helpers import call, reply, weather_registry

LATER = datetime.now(UTC) + timedelta(days=1)


def weather(store: RunStore, run_id: str, **kwargs: Any) -> str:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21C."])
    return run_agent("Weather?", model, weather_registry(), store=store, run_id=run_id,
                     labels={"team": "a"}, **kwargs).run_id


def counts(store: RunStore) -> dict[str, int]:
    with store.reading() as conn:
        return {table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                for table in (runs, events, run_labels, run_tools, run_cancels, run_deletions)}


def run_ids(store: RunStore) -> list[str]:
    return sorted(run.run_id for run in store.list_runs(limit=100))


def test_prune_removes_whole_runs_with_their_events_labels_and_tools(store: RunStore) -> None:
    weather(store, "old")
    cutoff = datetime.now(UTC)
    weather(store, "new")
    events_of_old = len(store.get_run("old").events)
    before = counts(store)
    result = store.prune(cutoff)
    assert [run.run_id for run in result.runs] == ["old"]
    assert (result.events, result.kept_parents, result.dry_run) == (events_of_old, (), False)
    assert run_ids(store) == ["new"]
    assert counts(store) == {"runs": 1, "events": before["events"] - events_of_old, "run_labels": 1,
                             "run_tools": 1, "run_cancels": 0, "run_deletions": 0}


def test_a_dry_run_reports_and_deletes_nothing(store: RunStore) -> None:
    weather(store, "one")
    weather(store, "two")
    before = counts(store)
    result = store.prune(LATER, dry_run=True)
    assert sorted(run.run_id for run in result.runs) == ["one", "two"]
    assert result.events == before["events"]
    assert result.dry_run is True
    assert counts(store) == before


def test_prune_never_deletes_running_queued_or_awaiting_approval_runs(store: RunStore) -> None:
    registry = weather_registry()
    registry.register("pay", "Pay.", {"type": "object", "properties": {}}, lambda: "paid", needs_approval=True)
    waiting = run_agent("Pay", ScriptedModel([reply("", call("p1", "pay"))]), registry, store=store).run_id
    queued = record_queued(store, "job", "tipper")
    running: list[list[str]] = []

    def model(messages: Any, specs: Any) -> Any:
        running.append(sorted(run.run_id for run in store.prune(LATER).runs))
        return "done"

    run_agent("Hi", model, weather_registry(), store=store, run_id="live")
    assert running == [[]]  # while "live" ran, the waiting and queued runs were there and untouched
    assert store.get_run(waiting).status == "awaiting_approval"
    assert store.get_run(queued).status == "queued"
    assert [run.run_id for run in store.prune(LATER).runs] == ["live"]
    assert sorted(run_ids(store)) == sorted([waiting, queued])


def test_asking_to_prune_an_unfinished_status_is_a_value_error(store: RunStore) -> None:
    with pytest.raises(ValueError, match=r"^cannot prune 'running' runs: only finished runs can be pruned"):
        store.prune(LATER, status="running")


def test_status_narrows_what_is_pruned(store: RunStore) -> None:
    weather(store, "done")
    weather(store, "short", max_steps=1)
    result = store.prune(LATER, status=["step_limit"])
    assert [(run.run_id, run.status) for run in result.runs] == [("short", "step_limit")]
    assert run_ids(store) == ["done"]


def test_a_parent_of_a_kept_run_is_kept_and_goes_with_its_children(store: RunStore) -> None:
    weather(store, "parent")
    child = follow_up(store, "parent", "And Oslo?", ScriptedModel(["-3C."]), weather_registry()).run_id
    grandchild = follow_up(store, child, "Thanks", ScriptedModel(["Welcome."]), weather_registry()).run_id
    result = store.prune(LATER, status="done", dry_run=True)
    assert [run.run_id for run in result.runs] == [grandchild, child, "parent"]  # children first
    weather(store, "short", max_steps=1)
    kept = follow_up(store, "short", "Go on", ScriptedModel(["ok"]), weather_registry(), max_steps=1)
    assert kept.status == "done"
    result = store.prune(LATER, status="step_limit")
    assert (result.runs, result.kept_parents) == ((), ("short",))
    result = store.prune(LATER)
    assert sorted(run.run_id for run in result.runs) == sorted([grandchild, child, "parent", kept.run_id, "short"])
    assert counts(store) == dict.fromkeys(("runs", "events", "run_labels", "run_tools", "run_cancels",
                                           "run_deletions"), 0)


def test_prune_deletes_cancel_requests_and_works_in_small_batches(store: RunStore) -> None:
    for index in range(5):
        weather(store, f"r{index}")
    queued = record_queued(store, "job", "tipper")
    request_cancel(store, queued)  # a queued run is cancelled at once, leaving its request row
    assert counts(store)["run_cancels"] == 1
    result = store.prune(LATER, batch_size=2)
    assert sorted(run.run_id for run in result.runs) == sorted([*(f"r{i}" for i in range(5)), queued])
    assert counts(store)["runs"] == counts(store)["run_cancels"] == 0


def test_a_single_event_still_cannot_be_deleted_updated_or_replaced(store: RunStore) -> None:
    run_id = weather(store, "kept")
    before = store.get_run(run_id).events
    refused = (r"events are append-only: "
               r"(DELETE is not allowed|UPDATE is not allowed|event \(run_id, seq\) already exists)")
    statements = [f"DELETE FROM events WHERE run_id = '{run_id}' AND seq = 1", "DELETE FROM events",
                  "UPDATE events SET kind = 'edited'"]
    if store.engine.dialect.name == "sqlite":
        statements.append(f"REPLACE INTO events (run_id, seq, at, step, kind, data) "
                          f"VALUES ('{run_id}', 1, CURRENT_TIMESTAMP, 0, 'forged', '{{}}')")
    for statement in statements:
        with pytest.raises(DBAPIError, match=refused), store.engine.begin() as conn:
            conn.execute(text(statement))
    with store.engine.begin() as conn:  # a marked run's events still cannot be edited
        marked = conn.begin_nested()
        conn.execute(run_deletions.insert().values(run_id=run_id))
        with pytest.raises(DBAPIError, match="events are append-only: UPDATE is not allowed"):
            conn.execute(text("UPDATE events SET kind = 'edited'"))
        marked.rollback()
    assert store.get_run(run_id).events == before
    assert counts(store)["run_deletions"] == 0
