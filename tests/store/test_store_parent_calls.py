"""``runs.parent_call_id``: a sub-agent's child run names its parent's call; ``top`` leaves such runs out.

Migration 0007 adds the column and fills it for the children logged before it; a store read
read-only at an older revision has none of it, and lists every run as top-level.
"""

from __future__ import annotations

from alembic import command
from sqlalchemy import Engine, text

from runner import RunStore, ScriptedModel, ToolRegistry, follow_up, run_agent
from runner.store import RunFilter, open_store
from runner.store.engine import make_engine, parse_url
from runner.store.migrate import alembic_config
from tests.trees import Asks, run_tree, tree_registry


def migrate(engine: Engine, down_to: str | None = None) -> None:
    with engine.begin() as conn:
        if down_to is None:
            command.upgrade(alembic_config(conn), "head")
        else:
            command.downgrade(alembic_config(conn), down_to)


def test_a_child_run_names_its_parents_call_and_top_leaves_it_out(store: RunStore) -> None:
    tree = run_tree(store)
    lone = run_agent("alone", ScriptedModel(["hi"]), ToolRegistry(), store=store).run_id
    later = follow_up(store, lone, "and then?", ScriptedModel(["more"]), ToolRegistry()).run_id
    assert tree.status == "done"
    everyone = {run.run_id: run for run in store.list_runs()}
    assert {run_id: run.parent_call_id for run_id, run in everyone.items()} == {
        tree.parent: None, tree.child: "p1", lone: None, later: None}
    assert store.get_run(tree.child).parent_call_id == "p1"
    assert [run.parent_call_id for run in store.children(tree.parent)] == ["p1"]
    top = [run.run_id for run in store.list_runs(top=True)]
    assert sorted(top) == sorted([tree.parent, lone, later])  # a follow-up has a parent, and is top-level
    assert [run.run_id for run in store.list_runs(RunFilter(top=True))] == top
    assert (store.count_runs(top=True), store.count_runs(), store.count_runs(RunFilter(top=True, text="find x"))) \
        == (3, 4, 0)
    assert [run.run_id for run in store.list_runs(text="find x")] == [tree.child]
    assert [run.run_id for run in store.list_runs(top=True, status="done", tool="research")] == [tree.parent]


def test_a_call_id_longer_than_the_column_is_cut_there_and_read_whole_from_the_log(store: RunStore) -> None:
    long_id = "p" * 300
    parent = Asks("research", {"task": "find X"}, long_id, "final")
    result = run_agent("long", parent, tree_registry(), store=store)
    child = next(run for run in store.children(result.run_id))
    assert child.parent_call_id == long_id[:200]
    assert store.get_run(child.run_id).parent_call_id == long_id
    assert [run.run_id for run in store.list_runs(top=True)] == [result.run_id]


def test_upgrading_to_0007_fills_in_the_children_logged_before_it(store_url: str) -> None:
    with open_store(store_url) as store:
        tree = run_tree(store, child_task="a task with \x00 and \u2028 in it")
        lone = run_agent("alone", ScriptedModel(["hi"]), ToolRegistry(), store=store).run_id
        later = follow_up(store, lone, "and then?", ScriptedModel(["more"]), ToolRegistry()).run_id
    engine = make_engine(parse_url(store_url))
    try:
        migrate(engine, "0006")
        with engine.connect() as conn:
            assert "parent_call_id" not in list(conn.execute(text("SELECT * FROM runs")).keys())
        migrate(engine)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT run_id, parent_call_id FROM runs")).all()
        found: dict[str, str | None] = {str(row[0]): row[1] for row in rows}
        assert found == {tree.parent: None, tree.child: "p1", lone: None, later: None}
    finally:
        engine.dispose()


def test_a_store_read_only_at_0006_lists_every_run_as_top_level(store_url: str) -> None:
    with open_store(store_url) as store:
        tree = run_tree(store)
    engine = make_engine(parse_url(store_url))
    try:
        migrate(engine, "0006")
        with open_store(store_url, read_only=True) as store:  # read at the revision it is at
            assert {run.run_id: run.parent_call_id for run in store.list_runs(top=True)} == {
                tree.parent: None, tree.child: None}
            assert store.count_runs(top=True) == 2
            assert store.get_run(tree.child).parent_call_id == "p1"  # its log says so all the same
            assert [run.parent_call_id for run in store.children(tree.parent)] == [None]
    finally:
        engine.dispose()
