"""A tool's result is stored once: the tool message refers to its call's ``tool_finished`` and reads back whole."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from runner import ScriptedModel, StoredEvent, ToolRegistry, load_fixture, run_agent
from runner.events import Event, MessageAppended, ToolFinished, decode_all, encode
from runner.store import RunStore
from runner.store.tables import events, runs
from tests.loop.helpers import call, reply

MEGABYTE = 1_000_000


def big_registry(size: int = MEGABYTE) -> ToolRegistry:
    registry = ToolRegistry()

    def fetch(url: str) -> str:
        return "x" * size

    registry.register("fetch", "Fetch a page.", {"type": "object", "properties": {"url": {"type": "string"}},
                                                 "required": ["url"]}, fetch)
    return registry


def big_run(store: RunStore, run_id: str = "big-result") -> Any:
    model = ScriptedModel([reply("", call("c1", "fetch", url="a")), reply("", call("c2", "fetch", url="b")),
                           "Read both."])
    return run_agent("Read two pages.", model, big_registry(), store=store, run_id=run_id,
                     max_steps=4, token_budget=10_000_000)


def stored_bytes(store: RunStore, run_id: str) -> int:
    length = func.length if store.engine.dialect.name == "sqlite" else func.octet_length
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.sum(length(events.c.data))).where(events.c.run_id == run_id)).scalar_one())


def test_a_large_result_is_stored_once(store: RunStore) -> None:
    result = big_run(store)
    assert result.status == "done"
    size = stored_bytes(store, result.run_id)
    assert 2 * MEGABYTE < size < 2 * MEGABYTE + 100_000  # two results of 1 MB each, once each: not 4 MB


def test_messages_and_events_read_back_as_they_were_recorded(store: RunStore, tmp_path: Path) -> None:
    result = big_run(store)
    run = store.get_run(result.run_id)
    assert run.messages == result.messages
    tool_messages = [e.data for e in run.events if e.kind == "message" and e.data["message"]["role"] == "tool"]
    page = json.dumps("x" * MEGABYTE)  # a string result's observation is its JSON
    assert [m["message"]["content"] for m in tool_messages] == [page, page]
    assert all("content_from" not in m for m in tool_messages)  # events as ``runner show --json`` prints them
    assert decode_all(run.events, run.run_id) == list(run.facts)
    fixture = load_fixture(store.export_fixture(result.run_id, tmp_path / "big.json"))
    assert fixture.messages_before(3)[-1]["content"] == page


def test_the_stored_row_refers_to_its_call_and_a_log_that_repeats_the_result_still_reads(store: RunStore) -> None:
    result = big_run(store)
    with store.engine.connect() as conn:
        rows = conn.execute(select(events.c.seq, events.c.data).where(
            events.c.run_id == result.run_id, events.c.kind == "message").order_by(events.c.seq)).all()
        tool_rows = [(seq, json.loads(data)) for seq, data in rows if json.loads(data)["message"]["role"] == "tool"]
    assert [data["content_from"] for _, data in tool_rows] == ["tool_finished", "tool_finished"]
    assert ["content" in data["message"] for _, data in tool_rows] == [False, False]
    page = json.dumps("x" * MEGABYTE)
    # An older log holds the content in the message itself: it reads as before (a copy of the run, so written).
    with store.engine.begin() as conn:
        row = dict(conn.execute(select(runs).where(runs.c.run_id == result.run_id)).mappings().one())
        conn.execute(runs.insert().values({**row, "run_id": "old-log"}))
        for event in conn.execute(select(events).where(events.c.run_id == result.run_id)).mappings().all():
            data = json.loads(event["data"])
            if data.pop("content_from", None):
                data["message"]["content"] = page
            conn.execute(events.insert().values({**event, "run_id": "old-log", "data": json.dumps(data)}))
    assert stored_bytes(store, "old-log") > 4 * MEGABYTE
    assert store.get_run("old-log").messages == result.messages


def test_the_codec_stores_a_tool_message_once_and_folds_it_back() -> None:
    observation = "été \u0000 \ud800 \"%_'"
    finished = ToolFinished(step=1, call_id="c1", name="fetch", observation=observation, ok=True)
    message = MessageAppended(step=1, index=3, message={"role": "tool", "tool_call_id": "c1", "name": "fetch",
                                                        "content": observation})
    data = encode(message, {"c1": observation})[1]
    assert data == {"index": 3, "message": {"role": "tool", "tool_call_id": "c1", "name": "fetch"},
                    "content_from": "tool_finished"}
    other = MessageAppended(step=1, index=4, message={"role": "tool", "tool_call_id": "c1", "name": "fetch",
                                                      "content": "another text"})
    assert encode(other, {"c1": observation})[1]["message"]["content"] == "another text"
    now = datetime.now(UTC)
    facts: list[Event] = [finished, message, other]
    rows = [StoredEvent(seq, now, 1, *encode(fact, {"c1": observation}), None) for seq, fact in enumerate(facts, 1)]
    assert decode_all(rows, "r") == [finished, message, other]
