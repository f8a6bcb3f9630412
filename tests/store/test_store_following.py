"""``RunStore.events_past`` and ``run_summary``: what a follower of a run reads, a cheap read each poll.

The events after any ``seq`` are the run's own from there, as ``get_run`` reads them, even where a
tool message stored as a reference to its call's observation comes after the ``seq`` and the
observation before it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from runner import ModelReply, RunStore, ScriptedModel, Status, run_agent
from runner.errors import RunNotFound
from runner.store.tables import events
from tests.loop.helpers import call, reply, weather_registry


def test_the_events_after_any_seq_are_the_runs_own_from_there(store: RunStore) -> None:
    script: list[ModelReply | str] = [reply("", call("c1", "get_weather", city="Paris")), "It is 21C."]
    run_id = run_agent("Weather?", ScriptedModel(script), weather_registry(), store=store).run_id
    logged = store.get_run(run_id).events
    for i in range(len(logged) + 1):
        after = logged[i - 1].seq if i else 0
        assert store.events_past(run_id, after) == logged[i:]
    finished = next(e.seq for e in logged if e.kind == "tool_finished")
    with store.reading() as conn:  # the tool message after it is stored as a reference to its observation
        stored = conn.execute(select(events.c.data).where(events.c.run_id == run_id,
                                                          events.c.seq == finished + 1)).scalar_one()
    assert "content_from" in str(stored)
    assert "celsius" not in str(stored)
    message = store.events_past(run_id, finished)[0]
    assert message.data["message"]["content"] == '{"celsius": 21}'  # its content back, from before the seq


def test_run_summary_says_how_the_run_stands_and_no_run_is_not_found(store: RunStore) -> None:
    run_id = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store).run_id
    summary = store.run_summary(run_id)
    assert (summary.run_id, summary.status, summary.answer, summary.finished) == (run_id, Status.DONE, "hello", True)
    with pytest.raises(RunNotFound):
        store.run_summary("nosuchrun")
    assert store.events_past("nosuchrun", 0) == []
