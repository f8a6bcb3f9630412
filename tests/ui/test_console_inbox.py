"""The approvals inbox reads a page of waiting runs in a fixed number of statements, and shows what each waits on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event

from runner import ScriptedModel, resume, run_agent
from runner._view import console
from runner._view.lineage import pending_approvals
from runner.store import RunStore
from tests.loop.helpers import call, reply
from tests.ui.money import money


def awaiting(store: RunStore, n: int) -> str:
    """Run ``n``: its model asks for two transfers at once; it stops awaiting approval of both."""
    model = ScriptedModel([reply("", call(f"t{n}a", "transfer", ref=f"bob {n}"), call(f"t{n}b", "transfer", ref="al"))])
    result = run_agent(f"Send 5 to bob {n}, ünïcode \x00task", model, money([]), store=store, run_id=f"{n:032x}")
    assert result.status == "awaiting_approval"
    return result.run_id


@contextmanager
def statements(store: RunStore) -> Iterator[list[str]]:
    """The SQL statements run on the store's engine while inside."""
    seen: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", count)


def test_the_inbox_reads_in_as_many_statements_for_two_waiting_runs_as_for_seven(store: RunStore) -> None:
    for n in range(1, 3):
        awaiting(store, n)
    with statements(store) as few:
        assert len(console.inbox(store)) == 4
    for n in range(3, 8):
        awaiting(store, n)
    with statements(store) as many:
        shown = console.inbox(store)
    assert len(shown) == 14
    assert len(many) == len(few), (few, many)


def test_the_inbox_shows_each_call_waiting_as_the_run_page_does(store: RunStore) -> None:
    ids = [awaiting(store, n) for n in range(1, 4)]
    store.decide(ids[0], "t1a", approved=True, decided_by="ops")  # one of run 1's two calls decided: the other waits
    shown = console.inbox(store)
    expected = [(run_id, call_id) for run_id in reversed(ids)
                for call_id in pending_approvals(store.get_run(run_id))]
    assert [(p.run.run_id, p.call.call_id) for p in shown] == expected
    assert (ids[0], "t1b") in expected
    assert (ids[0], "t1a") not in expected
    for p in shown:  # the task as logged (its NUL too), not the column's rendering
        assert p.run.task == store.get_run(p.run.run_id).task
        assert "\x00" in p.run.task


def test_a_run_decided_resumed_and_asking_again_shows_only_its_new_call(store: RunStore) -> None:
    ran: list[str] = []
    asked = awaiting(store, 1)  # waits on t1a and t1b
    store.decide(asked, "t1a", approved=True, decided_by="ops")  # one decided by an approval_decided fact
    again = resume(store, asked, ScriptedModel([reply("", call("t1c", "transfer", ref="carol"))]), money(ran),
                   decisions={"t1b": False})  # the other by the resume; the model then asks for a third
    assert (again.status, ran) == ("awaiting_approval", ["bob 1"])
    other = awaiting(store, 2)
    shown = [(p.run.run_id, p.call.call_id) for p in console.inbox(store)]
    assert shown == [(other, "t2a"), (other, "t2b"), (asked, "t1c")]
    assert list(pending_approvals(store.get_run(asked))) == ["t1c"]


def test_runner_ui_freezes_what_it_loaded_and_collects_young_objects_less_often() -> None:
    import gc

    from runner.cli.console import GC_YOUNG, for_serving

    threshold = gc.get_threshold()
    try:
        for_serving()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
