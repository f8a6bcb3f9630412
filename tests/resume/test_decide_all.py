"""``RunStore.decide_all``: every decision on a stopped run logged with one compare-and-set, the run as appended.

Every test runs on a SQLite file and on PostgreSQL (``store``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import CannotResume, RunStore, fold, run_agent
from runner._run.resume import resume_stored
from runner.events import ApprovalDecided
from tests.resume.durable_child import Plan, PlanModel, ran, tools
from tests.resume.helpers import RUN_ID

TWO_TRANSFERS: Plan = [[["t1", "transfer", {"ref": "x"}], ["t2", "transfer", {"ref": "y"}]]]


def awaiting(store: RunStore, workdir: Path) -> None:
    result = run_agent("Do the plan.", PlanModel(TWO_TRANSFERS), tools(workdir), store=store, run_id=RUN_ID)
    assert result.status == "awaiting_approval"


def decided(store: RunStore) -> list[tuple[str, bool, str | None, str]]:
    return [(f.call_id, f.approved, f.reason, f.decided_by) for f in store.get_run(RUN_ID).facts
            if isinstance(f, ApprovalDecided)]


def test_every_decision_is_logged_at_once_and_the_run_returned_is_the_run_as_stored(store: RunStore,
                                                                                     tmp_path: Path) -> None:
    awaiting(store, tmp_path)
    seen = store.get_run(RUN_ID)
    after = store.decide_all(seen, {"t1": True, "t2": "too much"}, "alice")
    stored = store.get_run(RUN_ID)
    assert decided(store) == [("t1", True, None, "alice"), ("t2", False, "too much", "alice")]
    assert [(e.seq, e.step, e.kind, e.data) for e in after.events] == [
        (e.seq, e.step, e.kind, e.data) for e in stored.events]
    assert (after.facts, after.updated_at, after.status) == (stored.facts, stored.updated_at, stored.status)
    assert fold(after.facts, RUN_ID).pending_approvals == {}
    # the run as appended is the one a resume takes over: its compare-and-set matches the row
    result = resume_stored(store, after, PlanModel(TWO_TRANSFERS), tools(tmp_path))
    assert (result.status, ran(tmp_path)) == ("done", ["transfer x"])


def test_a_refused_decision_logs_none_of_them(store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path)
    store.decide(RUN_ID, "t1", True, decided_by="alice")
    seen = store.get_run(RUN_ID)
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID}: call 't1' was approved by alice; it cannot be "
                                           r"denied now$"):
        store.decide_all(seen, {"t2": True, "t1": False}, "bob")
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID} has no call 't9' awaiting approval \(awaiting: t2\)$"):
        store.decide_all(seen, {"t2": True, "t9": True}, "bob")
    assert store.get_run(RUN_ID).events == seen.events


def test_the_same_decisions_again_log_nothing_and_return_the_run_as_given(store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path)
    once = store.decide_all(store.get_run(RUN_ID), {"t1": True}, "alice")
    again = store.decide_all(once, {"t1": True}, "bob")
    assert again is once
    assert decided(store) == [("t1", True, None, "alice")]


def test_a_run_changed_since_it_was_read_is_read_again_and_checked_again(store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path)
    stale = store.get_run(RUN_ID)
    store.decide(RUN_ID, "t1", False, decided_by="carol")  # moves the row on after the read
    after = store.decide_all(stale, {"t2": True}, "alice")
    assert decided(store) == [("t1", False, None, "carol"), ("t2", True, None, "alice")]
    assert after.events == store.get_run(RUN_ID).events
    with pytest.raises(CannotResume, match="was denied by carol; it cannot be approved now"):
        store.decide_all(stale, {"t1": True}, "alice")


def test_a_done_run_awaits_no_decision(store: RunStore, tmp_path: Path) -> None:
    result = run_agent("Do the plan.", PlanModel([]), tools(tmp_path), store=store, run_id=RUN_ID)
    assert result.status == "done"
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID} is done; it awaits no decision$"):
        store.decide_all(store.get_run(RUN_ID), {"t1": True}, "alice")
