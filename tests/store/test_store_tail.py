"""``RunStore.events_after``: a run's log read on from an event, a page at a time, with its status, on each backend.

Pages read one after the other give exactly ``get_run``'s events, a tool message whose observation was
logged in an earlier page folded back whole; a run that does not exist, and a row that is no fact, are errors.
"""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from runner import RunNotFound, ScriptedModel, run_agent
from runner._log.statuses import Status
from runner.events import KIND_OF, EventDecodeError, MessageAppended, ToolFinished
from runner.store import RunStore, StoredEvent, tail
from runner.store.tables import events
from tests.loop.helpers import call, reply, weather_registry

MESSAGE = KIND_OF[MessageAppended]


def three_calls(store: RunStore) -> str:
    """A run whose model asks for three calls in one reply (the last refused as a repeat), then answers."""
    first = reply("", *(call(f"c{i}", "get_weather", city="Paris") for i in range(3)))
    return run_agent("Weather?", ScriptedModel([first, "done"]), weather_registry(), store=store).run_id


def paged(store: RunStore, run_id: str, after: int, limit: int) -> list[StoredEvent]:
    """Every event past ``after``, read ``limit`` at a time as a follower reads them."""
    found: list[StoredEvent] = []
    while page := store.events_after(run_id, after, limit).events:
        assert len(page) <= limit
        found += page
        after = page[-1].seq
    return found


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 200])
def test_pages_read_on_from_any_event_give_the_runs_log_exactly(store: RunStore, limit: int) -> None:
    run_id = three_calls(store)
    logged = store.get_run(run_id).events
    for after in range(len(logged) + 1):
        assert paged(store, run_id, after, limit) == logged[after:], (after, limit)
    observed = {e.data["call_id"]: e.data["observation"] for e in logged if e.kind == KIND_OF[ToolFinished]}
    tools = {e.data["message"]["tool_call_id"]: e.data["message"]["content"] for e in logged
             if e.kind == MESSAGE and e.data["message"]["role"] == "tool"}
    assert len(tools) == 3
    assert tools == observed  # each stored as a reference to its result, read back whole


def test_an_observation_logged_results_ago_is_found_reading_back_a_few_at_a_time(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = three_calls(store)
    logged = store.get_run(run_id).events
    last_tool = max(e.seq for e in logged if e.kind == MESSAGE and e.data["message"].get("tool_call_id") == "c2")
    finished = [e.seq for e in logged if e.kind == KIND_OF[ToolFinished]]
    assert finished[0] < finished[-1] < last_tool  # c2's result came first, two others between it and its message
    monkeypatch.setattr(tail, "LOOK_BACK", 1)
    assert store.events_after(run_id, last_tool - 1, 1).events == [e for e in logged if e.seq == last_tool]


def test_the_status_is_read_with_the_events_and_a_missing_run_is_run_not_found(store: RunStore) -> None:
    run_id = three_calls(store)
    last = store.get_run(run_id).events[-1].seq
    assert store.events_after(run_id, last) == tail.Tail(Status.DONE, [])
    with pytest.raises(RunNotFound, match=r"^no run 'nope' in "):
        store.events_after("nope")


def test_a_row_that_is_no_fact_names_the_run_and_its_place(store: RunStore) -> None:
    run_id = three_calls(store)
    last = store.get_run(run_id).events[-1]
    with store.engine.begin() as conn:
        conn.execute(insert(events), [{"run_id": run_id, "seq": last.seq + 1, "at": last.at, "step": 0,
                                       "kind": "x\ndata: forged", "data": "{}", "span_id": None}])
    assert [e.seq for e in store.events_after(run_id, 0, last.seq).events] == list(range(1, last.seq + 1))
    with pytest.raises(EventDecodeError, match=f"^run {run_id} event {last.seq + 1}: unknown event kind"):
        store.events_after(run_id, last.seq)


def test_a_tool_message_whose_observation_was_never_logged_is_an_error(store: RunStore) -> None:
    run_id = three_calls(store)
    last = store.get_run(run_id).events[-1]
    orphan = '{"index":9,"message":{"role":"tool","tool_call_id":"c9","name":"x"},"content_from":"tool_finished"}'
    with store.engine.begin() as conn:
        conn.execute(insert(events), [{"run_id": run_id, "seq": last.seq + 1, "at": last.at, "step": 2,
                                       "kind": MESSAGE, "data": orphan, "span_id": None}])
    with pytest.raises(EventDecodeError, match=f"event {last.seq + 1}: message refers to no logged observation"):
        store.events_after(run_id, last.seq)
