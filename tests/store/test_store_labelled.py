"""``label_values``: a label key's distinct values, highest first, a page at a time, from the label index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Select

from runner import ScriptedModel, ToolRegistry, resume, run_agent
from runner.store import RunStore, label_values, open_store
from runner.store.labelled import highest, labelled_runs
from tests.loop.helpers import call, reply


def labelled(store: RunStore, **labels: str) -> str:
    return run_agent("Say hi.", ScriptedModel(["hi"]), ToolRegistry(), store=store, labels=labels).run_id


def test_the_values_come_distinct_highest_first_with_their_runs(store: RunStore) -> None:
    for value in ("b", "a", "c", "b", "a", "b"):
        labelled(store, batch=value, other="z")
    labelled(store, other="y")
    runs = {v: store.list_runs(label={"batch": v}) for v in "abc"}
    assert label_values(store, "batch", limit=10) == [
        (v, min(r.started_at for r in runs[v]), len(runs[v]), max(r.updated_at for r in runs[v])) for v in "cba"]
    assert [v.value for v in label_values(store, "batch", limit=2)] == ["c", "b"]
    assert [v.value for v in label_values(store, "batch", limit=2, below="b")] == ["a"]
    assert [v.runs for v in label_values(store, "batch", limit=3, at_most=2)] == [1, 2, 2]
    assert label_values(store, "none", limit=10) == []
    for wrong in (-1, 1001, True):
        with pytest.raises(ValueError, match=r"^limit must be a whole number from 0 to 1000"):
            label_values(store, "batch", limit=wrong)
    with pytest.raises(ValueError, match=r"^at_most must be a whole number from 1 to 1000"):
        label_values(store, "batch", limit=1, at_most=0)


def test_a_runs_change_moves_its_values_last_change(store: RunStore) -> None:
    waiting = run_agent("Move 5.", ScriptedModel([reply("", call("t1", "transfer", ref="bob"))]), transfer(),
                        store=store, labels={"batch": "a"})
    assert waiting.status == "awaiting_approval"
    [before] = label_values(store, "batch", limit=1)
    resume(store, waiting.run_id, ScriptedModel(["Moved."]), transfer(), decisions={"t1": True})
    [after] = label_values(store, "batch", limit=1)
    assert (after.runs, after.first_started_at) == (before.runs, before.first_started_at)
    assert after.last_updated_at > before.last_updated_at


def transfer() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("transfer", "Move money.", {"type": "object", "properties": {"ref": {"type": "string"}}},
                      lambda ref: "moved", side_effects=True, needs_approval=True)
    return registry


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[RunStore]:
    opened = open_store(tmp_path / "runs.db")
    yield opened
    opened.close()


def plan(store: RunStore, query: Select[*tuple[Any, ...]]) -> list[str]:
    """SQLite's plan for ``query``, a line a step."""
    with store.engine.connect() as conn:
        compiled = query.compile(conn)
        params = tuple(compiled.params[name] for name in compiled.positiontup or ())
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), params).all()
    return [row[-1] for row in rows]


def test_each_value_is_a_seek_and_a_bounded_range_of_the_label_index(sqlite_store: RunStore) -> None:
    index = "USING COVERING INDEX ix_run_labels_key_value_started_at"
    assert plan(sqlite_store, highest("rerun", None)) == [f"SEARCH run_labels {index} (key=?)"]
    assert plan(sqlite_store, highest("rerun", "r1")) == [f"SEARCH run_labels {index} (key=? AND value<?)"]
    runs = plan(sqlite_store, labelled_runs("rerun", "r1", 200))
    assert f"SEARCH run_labels {index} (key=? AND value=?)" in runs
    assert "SEARCH runs USING INDEX sqlite_autoindex_runs_1 (run_id=?)" in runs
    assert not [line for line in runs if line.startswith("SCAN runs") or "TEMP B-TREE" in line]  # no scan, no sort
