"""list_runs: every filter, newest first, paging, and the indexes behind them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, update

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.store import RunStore, open_store
from runner.store.tables import runs
from tests.loop.helpers import call, reply, weather_registry

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def add_run(store: RunStore, n: int, task: str, *, tool: bool = False, fail: bool = False,
            labels: dict[str, str] | None = None) -> str:
    """Record run ``n`` and backdate it to T0 + n hours, so the order is known."""
    if fail:
        script: list[Any] = []  # the scripted model runs dry: model_error
    elif tool:
        script = [reply("", call("c1", "get_weather", city="Paris")), f"answer {n}"]
    else:
        script = [f"answer {n}"]
    run_id = f"{n:032x}"
    run_agent(task, ScriptedModel(script), weather_registry(), run_id=run_id, store=store, labels=labels)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(started_at=T0 + timedelta(hours=n)))
    return run_id


@pytest.fixture
def filled(store: RunStore) -> RunStore:
    add_run(store, 1, "Weather in Paris?", tool=True, labels={"env": "prod", "team": "a"})
    add_run(store, 2, "Say hello", labels={"env": "dev"})
    add_run(store, 3, "Broken 100%_run", fail=True, labels={"env": "prod", "team": "b"})
    add_run(store, 4, "Weather again", tool=True)
    return store


def ids(found: list[Any]) -> list[int]:
    return [int(run.run_id, 16) for run in found]


def test_list_runs_is_newest_first(filled: RunStore) -> None:
    assert ids(filled.list_runs()) == [4, 3, 2, 1]


def test_limit_and_offset_page_through_runs(filled: RunStore) -> None:
    assert ids(filled.list_runs(limit=2)) == [4, 3]
    assert ids(filled.list_runs(limit=2, offset=2)) == [2, 1]
    assert ids(filled.list_runs(limit=0)) == []


def test_status_filter_takes_one_status_or_several(filled: RunStore) -> None:
    assert ids(filled.list_runs(status="model_error")) == [3]
    assert ids(filled.list_runs(status=["done", "model_error"])) == [4, 3, 2, 1]
    assert ids(filled.list_runs(status="running")) == []


def test_since_is_inclusive_and_until_exclusive(filled: RunStore) -> None:
    assert ids(filled.list_runs(since=T0 + timedelta(hours=2))) == [4, 3, 2]
    assert ids(filled.list_runs(until=T0 + timedelta(hours=2))) == [1]
    naive = datetime(2025, 1, 1, 3)
    assert ids(filled.list_runs(since=naive)) == [4, 3]


def test_tool_filter_finds_runs_that_called_the_tool(filled: RunStore) -> None:
    assert ids(filled.list_runs(tool="get_weather")) == [4, 1]
    assert ids(filled.list_runs(tool="c_to_f")) == []


def test_text_filter_matches_task_or_answer_case_insensitively(filled: RunStore) -> None:
    assert ids(filled.list_runs(text="WEATHER")) == [4, 1]
    assert ids(filled.list_runs(text="answer 2")) == [2]
    assert ids(filled.list_runs(text="100%_")) == [3]
    assert ids(filled.list_runs(text="0%")) == [3]
    assert ids(filled.list_runs(text="_r")) == [3]


def test_text_filter_finds_a_runs_own_text_whatever_its_case_folding(store: RunStore) -> None:
    run_id = run_agent("İstanbul weather", ScriptedModel(["Ağir yağmur"]), ToolRegistry(), store=store).run_id
    for needle in ("İstanbul", "İSTANBUL WEATHER", "Ağir", "YAĞMUR", "weather"):  # the needle folds as the
        assert [r.run_id for r in store.list_runs(text=needle)] == [run_id], needle  # column does, on each backend


def test_label_filter_takes_a_pair_or_a_mapping(filled: RunStore) -> None:
    assert ids(filled.list_runs(label=("env", "prod"))) == [3, 1]
    assert ids(filled.list_runs(label={"env": "prod", "team": "a"})) == [1]
    assert ids(filled.list_runs(label={"env": "staging"})) == []


def test_filters_combine(filled: RunStore) -> None:
    assert ids(filled.list_runs(label=("env", "prod"), tool="get_weather", status="done")) == [1]


def test_summaries_carry_labels_and_counters(filled: RunStore) -> None:
    first = filled.list_runs(limit=1, offset=3)[0]
    assert (first.status, first.answer, first.steps, first.tool_calls) == ("done", "answer 1", 2, 1)
    assert first.labels == {"env": "prod", "team": "a"}
    assert first.started_at == T0 + timedelta(hours=1)


def test_bad_limit_is_a_value_error(store: RunStore) -> None:
    with pytest.raises(ValueError, match=r"^limit must be a non-negative integer, got -1$"):
        store.list_runs(limit=-1)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[RunStore]:
    opened = open_store(tmp_path / "runs.db")
    yield opened
    opened.close()


def plan(store: RunStore, **filters: Any) -> str:
    """SQLite's query plan for the SELECT that ``list_runs(**filters)`` sends."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if "ORDER BY" in statement and not sent:
            sent.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        store.list_runs(**filters)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    statement, params = sent[0]
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
    return "\n".join(row[-1] for row in rows)


def test_newest_first_reads_the_started_at_index(sqlite_store: RunStore) -> None:
    assert plan(sqlite_store) == "SCAN runs USING INDEX ix_runs_started_at"


def test_status_filter_reads_the_status_index(sqlite_store: RunStore) -> None:
    assert plan(sqlite_store, status="done") == "SEARCH runs USING INDEX ix_runs_status_started_at (status=?)"


def test_tool_and_label_filters_use_their_indexes(sqlite_store: RunStore) -> None:
    tool_plan = plan(sqlite_store, tool="get_weather")
    label_plan = plan(sqlite_store, label=("env", "prod"))
    assert tool_plan.splitlines()[0] == "SEARCH driver USING COVERING INDEX ix_run_tools_name_started_at (name=?)"
    assert label_plan.splitlines()[0] == (
        "SEARCH driver USING COVERING INDEX ix_run_labels_key_value_started_at (key=? AND value=?)")
    assert "SCAN" not in tool_plan + label_plan
    assert "TEMP B-TREE" not in tool_plan + label_plan  # newest first straight off the index, no sort


def test_text_search_folds_case_beyond_ascii(store: RunStore) -> None:
    from runner import ScriptedModel, ToolRegistry, run_agent

    result = run_agent("Café ÉTÉ", ScriptedModel(["ok"]), ToolRegistry(), store=store)
    for needle in ("ÉTÉ", "été", "café", "CAFÉ"):
        assert [r.run_id for r in store.list_runs(text=needle)] == [result.run_id], needle
