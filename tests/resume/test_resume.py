"""Durable execution with real processes: SIGKILL inside a tool, resume from another process.

Each test runs on a real SQLite file and on PostgreSQL (``store_url``). The killed
process is ``tests.resume.durable_child``; the resuming process is this one (or a second
child), so nothing survives between them but the log.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from runner import ScriptedModel, open_store, replay, run_agent
from runner._loop.observations import IN_DOUBT
from runner._run.resume import follow_up, fork, resume
from runner.errors import CannotResume, RunInUse
from tests.resume.durable_child import PlanModel, ran, tools
from tests.resume.helpers import RUN_ID, assert_consistent, child, killed_in


def finished_child(store_url: str, workdir: Path, plan: Any, *args: str) -> dict[str, Any]:
    proc = child(store_url, workdir, plan, *args)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def assert_replays(store_url: str, run_id: str, workdir: Path) -> None:
    """The whole run, resumes and all, replays clean under strict replay (run last: tools really run)."""
    with open_store(store_url) as store:
        report = replay(run_id, tools(workdir), source_store=store)
    assert report.ok, report.explain()


@pytest.mark.process
def test_a_side_effect_killed_midway_is_not_run_again_and_the_model_is_told_its_outcome_is_unknown(
        store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "pay", {"ref": "p1"}]]]
    killed_in(store_url, tmp_path, plan, "p1", "pay p1")
    model = PlanModel(plan)
    with open_store(store_url) as store:
        assert (store.get_run(RUN_ID).status, store.get_run(RUN_ID).liveness) == ("running", "dead")
        result = resume(store, RUN_ID, model, tools(tmp_path))
        run = store.get_run(RUN_ID)
    assert (result.status, result.answer) == ("done", "all done")
    assert ran(tmp_path) == ["pay p1"]
    assert [m for m in model.seen[0] if m["role"] == "tool"] == [
        {"role": "tool", "tool_call_id": "c1", "name": "pay", "content": IN_DOUBT}]
    assert run.status == "done"
    assert run.messages == result.messages
    assert [e.kind for e in run.events if e.kind in ("run_resumed", "run_finished")] == ["run_resumed", "run_finished"]
    assert_consistent(run)
    assert_replays(store_url, RUN_ID, tmp_path)
    assert ran(tmp_path) == ["pay p1"]  # replay did not run the call in doubt either


@pytest.mark.process
def test_a_read_only_tool_killed_midway_runs_again_and_its_real_result_is_used(
        store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "lookup", {"ref": "r1"}]]]
    killed_in(store_url, tmp_path, plan, "r1", "lookup r1")
    with open_store(store_url) as store:
        result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
        run = store.get_run(RUN_ID)
    assert result.status == "done"
    assert ran(tmp_path) == ["lookup r1", "lookup r1"]
    assert result.messages[3] == {"role": "tool", "tool_call_id": "c1", "name": "lookup",
                                  "content": '{"ref": "r1", "value": 42}'}
    assert [e.data.get("attempt", 1) for e in run.events if e.kind == "tool_started"] == [1, 2]
    assert_consistent(run)
    assert_replays(store_url, RUN_ID, tmp_path)


@pytest.mark.process
def test_a_call_with_an_idempotency_key_runs_again_once_with_the_same_key(store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "charge", {"ref": "k1"}]]]
    killed_in(store_url, tmp_path, plan, "k1", f"charge k1 {RUN_ID}:c1")
    with open_store(store_url) as store:
        result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
        assert_consistent(store.get_run(RUN_ID))
    assert result.status == "done"
    assert ran(tmp_path) == [f"charge k1 {RUN_ID}:c1"] * 2
    assert result.messages[3]["content"] == '"charged k1"'


@pytest.mark.process
def test_an_idempotent_call_killed_midway_runs_again_with_the_same_arguments(store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "put", {"ref": "i1"}]]]
    killed_in(store_url, tmp_path, plan, "i1", "put i1")
    with open_store(store_url) as store:
        result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
        run = store.get_run(RUN_ID)
    assert result.status == "done"
    assert ran(tmp_path) == ["put i1", "put i1"]
    assert result.messages[3]["content"] == '"put i1"'
    assert [(e.data["name"], e.data["args"], e.data.get("attempt", 1)) for e in run.events
            if e.kind == "tool_started"] == [("put", {"ref": "i1"}, 1), ("put", {"ref": "i1"}, 2)]
    assert run.facts[0].tool_traits["put"] == {  # type: ignore[union-attr,index]
        "side_effects": True, "needs_approval": False, "idempotency_key": None, "idempotent": True}
    assert_consistent(run)
    assert_replays(store_url, RUN_ID, tmp_path)
    assert ran(tmp_path) == ["put i1", "put i1"]  # replay serves a side effect's recorded result


@pytest.mark.process
@pytest.mark.parametrize(("second", "expected"), [
    ("pay", ["lookup a", "pay b", "lookup c"]),
    ("lookup", ["lookup a", "lookup b", "lookup b", "lookup c"]),
])
def test_three_calls_killed_inside_the_second_first_never_reruns_second_by_rule_third_once(
        store_url: str, tmp_path: Path, second: str, expected: list[str]) -> None:
    plan = [[["c1", "lookup", {"ref": "a"}], ["c2", second, {"ref": "b"}], ["c3", "lookup", {"ref": "c"}]]]
    killed_in(store_url, tmp_path, plan, "b", f"{second} b")
    with open_store(store_url) as store:
        result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
        assert_consistent(store.get_run(RUN_ID))
    assert result.status == "done"
    assert ran(tmp_path) == expected
    observations = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert observations["c1"] == '{"ref": "a", "value": 42}'
    assert observations["c3"] == '{"ref": "c", "value": 42}'
    assert observations["c2"] == (IN_DOUBT if second == "pay" else '{"ref": "b", "value": 42}')
    assert_replays(store_url, RUN_ID, tmp_path)


@pytest.mark.process
@pytest.mark.parametrize(("verdict", "expected_ran", "observation"), [
    ("yes", ["transfer x"], '"transferred x"'),
    ("not today", [], "ERROR: the call to transfer was denied by the approver: not today; do not retry it"),
])
def test_an_approval_is_decided_in_a_second_process(store_url: str, tmp_path: Path, verdict: str,
                                                     expected_ran: list[str], observation: str) -> None:
    plan = [[["t1", "transfer", {"ref": "x"}]]]
    first = finished_child(store_url, tmp_path, plan, "run", RUN_ID)
    assert (first["status"], first["error"]) == ("awaiting_approval", "call t1 (transfer) needs approval")
    with open_store(store_url) as store:
        pending = [e.data for e in store.get_run(RUN_ID).events if e.kind == "approval_requested"]
    assert pending == [{"call_id": "t1", "name": "transfer", "args": {"ref": "x"}}]
    second = finished_child(store_url, tmp_path, plan, "resume", RUN_ID, f"t1={verdict}")
    assert second["status"] == "done"
    assert ran(tmp_path) == expected_ran
    with open_store(store_url) as store:
        run = store.get_run(RUN_ID)
    assert [m["content"] for m in run.messages if m["role"] == "tool"] == [observation]
    resumed = [e.data for e in run.events if e.kind == "run_resumed"]
    assert [(r["reason"], r["decisions"]) for r in resumed] == [
        ("awaiting_approval", {"t1": True if verdict == "yes" else verdict})]
    assert_consistent(run)
    assert_replays(store_url, RUN_ID, tmp_path)


def test_a_pending_call_without_a_decision_keeps_the_run_awaiting_approval(store_url: str, tmp_path: Path) -> None:
    plan = [[["t1", "transfer", {"ref": "x"}]]]
    with open_store(store_url) as store:
        first = run_agent("Do the plan.", PlanModel(plan), tools(tmp_path), store=store, run_id=RUN_ID)
        with pytest.raises(CannotResume, match=r"is awaiting approval of t1 and no decision was given or logged"):
            resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))  # refused: it would only stop again
        with pytest.raises(CannotResume, match=r"has no call 'nope' awaiting approval \(awaiting: t1\)"):
            resume(store, RUN_ID, PlanModel(plan), tools(tmp_path), decisions={"nope": True})
        run = store.get_run(RUN_ID)
    assert (first.status, run.status, run.error) == ("awaiting_approval", "awaiting_approval",
                                                     "call t1 (transfer) needs approval")
    assert ran(tmp_path) == []
    assert [e.kind for e in run.events].count("approval_requested") == 1
    assert "run_resumed" not in [e.kind for e in run.events]


def test_a_step_limit_run_resumed_with_more_steps_finishes_and_replays_strictly(store_url: str,
                                                                                  tmp_path: Path) -> None:
    plan = [[["c1", "lookup", {"ref": "a"}]], [["c2", "lookup", {"ref": "b"}]]]
    with open_store(store_url) as store:
        stopped = run_agent("Do the plan.", PlanModel(plan), tools(tmp_path), store=store, max_steps=1,
                            run_id=RUN_ID)
        result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path), max_steps=5)
        run = store.get_run(RUN_ID)
        report = replay(RUN_ID, tools(tmp_path), source_store=store)
    assert (stopped.status, result.status, result.steps) == ("step_limit", "done", 3)
    assert run.messages == result.messages
    assert_consistent(run)
    assert run.limits["max_steps"] == 1  # the run row keeps what it started with; the resume logged its own
    assert [e.data["limits"]["max_steps"] for e in run.events if e.kind == "run_resumed"] == [5]
    assert report.ok, report.explain()


@pytest.mark.process
def test_resuming_a_done_run_or_a_live_one_is_refused_in_one_line(store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "pay", {"ref": "p1"}]]]
    (tmp_path / "hang-p1").touch()
    proc = child(store_url, tmp_path, plan, "run", RUN_ID)
    try:
        deadline = time.monotonic() + 30
        while "pay p1" not in ran(tmp_path):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with open_store(store_url) as store, pytest.raises(RunInUse) as live:
            resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    assert str(live.value).startswith(f"run {RUN_ID} is being driven by a live process (")
    with open_store(store_url) as store:
        done = run_agent("t", ScriptedModel(["hi"]), tools(tmp_path), store=store)
        with pytest.raises(CannotResume) as refused:
            resume(store, done.run_id, ScriptedModel(["x"]), tools(tmp_path))
    assert str(refused.value) == (f"run {done.run_id} is done; nothing to resume "
                                  "(fork it or follow it up instead)")
    assert "\n" not in str(live.value)


def test_fork_starts_from_the_parents_messages_before_step_k_with_an_observation_swapped(
        store_url: str, tmp_path: Path) -> None:
    plan = [[["c1", "lookup", {"ref": "a"}]], [["c2", "lookup", {"ref": "b"}]]]
    with open_store(store_url) as store:
        parent = run_agent("Do the plan.", PlanModel(plan), tools(tmp_path), store=store)
        before = store.get_run(parent.run_id).events
        model = ScriptedModel(["what if"])
        forked = fork(store, parent.run_id, at_step=2, model=model, registry=tools(tmp_path),
                      observations={"c1": '{"value": -1}'})
        child_run = store.get_run(forked.run_id)
        assert store.get_run(parent.run_id).events == before
    want = [dict(m) for m in parent.messages[:4]]
    want[3]["content"] = '{"value": -1}'
    assert model.seen[0] == want
    assert (forked.status, forked.answer, forked.steps) == ("done", "what if", 2)
    assert child_run.parent_run_id == parent.run_id
    assert child_run.events[0].data["origin"] == "fork"
    assert ran(tmp_path) == ["lookup a", "lookup b"]  # the fork re-ran nothing
    assert_replays(store_url, forked.run_id, tmp_path)


def test_follow_up_continues_the_conversation_with_a_new_user_message(store_url: str, tmp_path: Path) -> None:
    with open_store(store_url) as store:
        parent = run_agent("Hello?", ScriptedModel(["hi"]), tools(tmp_path), store=store)
        model = ScriptedModel(["fine"])
        second = follow_up(store, parent.run_id, "How are you?", model, tools(tmp_path))
        linked = store.get_run(second.run_id)
    assert model.seen[0] == [*parent.messages, {"role": "user", "content": "How are you?"}]
    assert (second.status, second.answer) == ("done", "fine")
    assert (linked.parent_run_id, linked.task) == (parent.run_id, "How are you?")
    assert_replays(store_url, second.run_id, tmp_path)


@pytest.mark.process
def test_a_run_killed_at_twenty_random_moments_ends_done_with_each_side_effect_at_most_once(
        store_url: str, tmp_path: Path) -> None:
    rng = random.Random(20261130)
    plan = [[[f"s{i}a", "pay", {"ref": f"p{i}"}], [f"s{i}b", "lookup", {"ref": f"l{i}"}]] for i in range(8)]
    proc: subprocess.Popen[str] | None = child(store_url, tmp_path, plan, "run", RUN_ID)
    kills = 0
    while kills < 20 and proc is not None:
        time.sleep(rng.uniform(0.0, 0.6))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
        with open_store(store_url) as store:
            try:
                status = store.get_run(RUN_ID).status
            except Exception:  # killed before its first commit: start it again
                status = None
        # done (possibly killed between its last commit and its exit): nothing left to resume
        proc = None if status == "done" else child(store_url, tmp_path, plan,
                                                    *(("run", RUN_ID) if status is None else ("resume", RUN_ID)))
    if proc is not None:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with open_store(store_url) as store:
        run = store.get_run(RUN_ID)
    assert run.status == "done"
    assert_consistent(run)
    pays = [line for line in ran(tmp_path) if line.startswith("pay ")]
    assert len(pays) == len(set(pays))
    assert kills == 20 or run.status == "done"
    assert_replays(store_url, RUN_ID, tmp_path)
