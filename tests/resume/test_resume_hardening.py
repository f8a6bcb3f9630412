"""Resume, hardened: the log's record of a tool decides for its calls in doubt, a run awaiting
approval resumes only with a decision, and decisions are facts (``approval_decided``) of their own.

Every test runs on a SQLite file and on PostgreSQL (``store_url``/``store``); the first kills a
real process inside a payment (``tests.resume.durable_child``) and resumes it from this one.
"""

from __future__ import annotations

import getpass
import json
import logging
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select

from runner import CannotResume, RunStore, fold, open_store, rebuild_spans, replay, run_agent
from runner._loop.observations import IN_DOUBT
from runner._run.resume import resume
from runner._tools.registry import ToolRegistry
from runner.events import ApprovalDecided, EventDecodeError, decode, decode_all, encode
from runner.pool.queued import record_queued
from runner.pool.take import take
from runner.store.tables import events
from tests.pool import agents
from tests.resume.durable_child import Plan, PlanModel, ran, tools
from tests.resume.helpers import RUN_ID, assert_consistent, killed_in

TWO_TRANSFERS: Plan = [[["t1", "transfer", {"ref": "x"}], ["t2", "transfer", {"ref": "y"}]]]


def changed(workdir: Path, name: str, *, side_effects: bool) -> ToolRegistry:
    """The durable child's tools, with tool ``name`` registered with ``side_effects`` as given."""
    base = tools(workdir)
    registry = ToolRegistry()
    for tool_name in ("pay", "lookup", "charge", "transfer"):
        tool = base.get(tool_name)
        assert tool is not None
        registry.register(tool_name, tool.description, tool.parameters, tool.fn,
                          side_effects=side_effects if tool_name == name else tool.side_effects,
                          needs_approval=tool.needs_approval, idempotency_key=tool.idempotency_key)
    return registry


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name.startswith("runner") and record.levelno >= logging.WARNING]


@pytest.mark.process
def test_a_payment_in_doubt_resumed_with_a_registry_that_forgot_its_side_effects_is_not_paid_again(
        store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = [[["c1", "pay", {"ref": "p1"}]]]
    killed_in(store_url, tmp_path, plan, "p1", "pay p1")
    model = PlanModel(plan)
    with caplog.at_level(logging.WARNING, logger="runner"), open_store(store_url) as store:
        result = resume(store, RUN_ID, model, changed(tmp_path, "pay", side_effects=False))
        run = store.get_run(RUN_ID)
    assert (result.status, ran(tmp_path)) == ("done", ["pay p1"])
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [IN_DOUBT]
    assert [e.data["refused"] for e in run.events if e.kind == "tool_finished"] == ["in_doubt"]
    assert_consistent(run)
    assert warnings_of(caplog) == [
        f"run {RUN_ID}: tool 'pay' differs from the log's record: side_effects True in the log, False now "
        "(calls already started are judged by the more careful of the two)"]


@pytest.mark.process
def test_a_call_started_under_a_registry_without_side_effects_is_not_run_again_by_one_that_has_them(
        store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = [[["c1", "lookup", {"ref": "r1"}]]]
    killed_in(store_url, tmp_path, plan, "r1", "lookup r1")
    with caplog.at_level(logging.WARNING, logger="runner"), open_store(store_url) as store:  # it now writes
        result = resume(store, RUN_ID, PlanModel(plan), changed(tmp_path, "lookup", side_effects=True))
    assert (result.status, ran(tmp_path)) == ("done", ["lookup r1"])  # the more careful of the two holds
    assert warnings_of(caplog) == [
        f"run {RUN_ID}: tool 'lookup' differs from the log's record: side_effects False in the log, True now "
        "(calls already started are judged by the more careful of the two)"]


@pytest.mark.process
def test_an_idempotent_call_in_doubt_is_not_run_again_by_a_registry_that_no_longer_says_so(
        store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = [[["c1", "put", {"ref": "i1"}]]]
    killed_in(store_url, tmp_path, plan, "i1", "put i1")
    model = PlanModel(plan)
    base, registry = tools(tmp_path), ToolRegistry()
    for name in base.names():  # the same tools, none of them idempotent
        tool = base.get(name)
        assert tool is not None
        registry.register(name, tool.description, tool.parameters, tool.fn, side_effects=tool.side_effects,
                          needs_approval=tool.needs_approval, idempotency_key=tool.idempotency_key)
    with caplog.at_level(logging.WARNING, logger="runner"), open_store(store_url) as store:
        result = resume(store, RUN_ID, model, registry)
    assert (result.status, ran(tmp_path)) == ("done", ["put i1"])
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [IN_DOUBT]
    assert warnings_of(caplog) == [
        f"run {RUN_ID}: tool 'put' differs from the log's record: idempotent True in the log, False now "
        "(calls already started are judged by the more careful of the two)"]


@pytest.mark.process
@pytest.mark.parametrize("traits", [{"pay": {}}, {"pay": "x"}, ["pay"]])
def test_a_forged_record_of_tool_traits_is_one_store_error_and_the_payment_in_doubt_is_not_run(
        store_url: str, tmp_path: Path, traits: object) -> None:
    plan = [[["c1", "pay", {"ref": "p1"}]]]
    killed_in(store_url, tmp_path, plan, "p1", "pay p1")
    with open_store(store_url) as store:
        run = store.get_run(RUN_ID)
        last = run.events[-1]
        forged = {"owner": "mallory", "reason": "running", "limits": {}, "tool_traits": traits}
        with store.engine.begin() as conn:  # the log is append-only: a hostile writer can only append
            conn.execute(insert(events).values(run_id=RUN_ID, seq=last.seq + 1, at=last.at, step=last.step,
                                               kind="run_resumed", data=json.dumps(forged)))
        with pytest.raises(EventDecodeError, match=rf"^run {RUN_ID} event {last.seq + 1}: run_resumed event is "
                                                   r"malformed: tool_traits must map"):
            resume(store, RUN_ID, PlanModel(plan), tools(tmp_path))
        with store.engine.connect() as conn:  # the resume wrote nothing after the forged row
            assert conn.scalar(select(func.max(events.c.seq)).where(events.c.run_id == RUN_ID)) == last.seq + 1
    assert ran(tmp_path) == ["pay p1"]


def awaiting(store: RunStore, workdir: Path, plan: Plan) -> None:
    result = run_agent("Do the plan.", PlanModel(plan), tools(workdir), store=store, run_id=RUN_ID)
    assert result.status == "awaiting_approval"


def test_resuming_a_run_awaiting_approval_without_a_decision_is_refused_and_writes_nothing(
        store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path, TWO_TRANSFERS)
    before = store.get_run(RUN_ID)
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID} is awaiting approval of t1, t2 and no decision "
                                           r"was given or logged: nothing to resume$"):
        resume(store, RUN_ID, PlanModel(TWO_TRANSFERS), tools(tmp_path))
    after = store.get_run(RUN_ID)
    assert after.events == before.events
    assert (after.status, after.owner, after.updated_at) == (before.status, before.owner, before.updated_at)
    assert ran(tmp_path) == []


def test_a_decision_that_contradicts_a_logged_one_is_refused_and_one_that_agrees_is_accepted(
        store: RunStore, tmp_path: Path) -> None:
    plan: Plan = [[["t1", "transfer", {"ref": "x"}]]]
    awaiting(store, tmp_path, plan)
    assert store.decide(RUN_ID, "t1", False, reason="too much", decided_by="alice") is True
    logged = len(store.get_run(RUN_ID).events)
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID}: call 't1' was denied \(too much\) by alice; it "
                                           r"cannot be approved now$"):
        resume(store, RUN_ID, PlanModel(plan), tools(tmp_path), decisions={"t1": True})
    assert len(store.get_run(RUN_ID).events) == logged
    result = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path), decisions={"t1": "too much"})
    run = store.get_run(RUN_ID)
    assert (result.status, ran(tmp_path)) == ("done", [])
    assert [e.kind for e in run.events].count("approval_decided") == 1


def test_resume_logs_its_decisions_by_the_one_it_names(store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path, TWO_TRANSFERS)
    result = resume(store, RUN_ID, PlanModel(TWO_TRANSFERS), tools(tmp_path), decisions={"t1": True, "t2": False},
                    decided_by="carol")
    decided = [f for f in store.get_run(RUN_ID).facts if isinstance(f, ApprovalDecided)]
    assert result.status == "done"
    assert sorted((f.call_id, f.approved, f.decided_by) for f in decided) == [("t1", True, "carol"),
                                                                             ("t2", False, "carol")]


def test_a_decision_logged_without_resuming_is_a_fact_that_resume_and_replay_use(
        store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path, TWO_TRANSFERS)
    assert store.decide(RUN_ID, "t1", True, decided_by="alice") is True
    assert store.decide(RUN_ID, "t1", True, decided_by="bob") is False  # the same decision: nothing new
    with pytest.raises(CannotResume, match=rf"^run {RUN_ID}: call 't1' was approved by alice; it cannot be "
                                           r"denied now$"):
        store.decide(RUN_ID, "t1", False, decided_by="bob")
    with pytest.raises(CannotResume, match=r"has no call 't9' awaiting approval \(awaiting: t2\)"):
        store.decide(RUN_ID, "t9", True)
    run = store.get_run(RUN_ID)
    assert run.status == "awaiting_approval"
    assert (run.events[-1].kind, run.events[-1].step, run.events[-1].data) == (
        "approval_decided", 1, {"call_id": "t1", "approved": True, "reason": None, "decided_by": "alice"})
    assert list(fold(decode_all(run.events, RUN_ID)).pending_approvals) == ["t2"]  # minus the decided one
    assert store.decide(RUN_ID, "t2", False, reason="not today", decided_by="alice") is True

    result = resume(store, RUN_ID, PlanModel(TWO_TRANSFERS), tools(tmp_path))  # the logged decisions
    run = store.get_run(RUN_ID)
    assert (result.status, ran(tmp_path)) == ("done", ["transfer x"])
    assert [e.data["decisions"] for e in run.events if e.kind == "run_resumed"] == [{"t1": True, "t2": "not today"}]
    assert [m["content"] for m in run.messages if m["role"] == "tool"] == [
        '"transferred x"', "ERROR: the call to transfer was denied by the approver: not today; do not retry it"]
    assert_consistent(run)
    spans = rebuild_spans(run)  # each call waited (a span each), then ran or was refused with its decision on it
    tools_spans = [dict(span.attributes or {}) for span in spans if span.name == "execute_tool transfer"]
    assert sorted((a.get("runner.tool.awaiting_approval", False), a.get("runner.approval.decision", ""),
                   a.get("runner.approval.decided_by", "")) for a in tools_spans) == [
        (False, "approved", "alice"), (False, "denied", "alice"), (True, "", ""), (True, "", "")]
    assert all(span.end_time is not None for span in spans)
    assert replay(RUN_ID, tools(tmp_path), source_store=store).ok


def test_resume_with_decisions_logs_each_as_a_fact_before_it_goes_on(store: RunStore, tmp_path: Path) -> None:
    awaiting(store, tmp_path, TWO_TRANSFERS)
    result = resume(store, RUN_ID, PlanModel(TWO_TRANSFERS), tools(tmp_path), decisions={"t1": True, "t2": False})
    run = store.get_run(RUN_ID)
    assert result.status == "done"
    facts = decode_all(run.events, RUN_ID)
    decided = [fact for fact in facts if isinstance(fact, ApprovalDecided)]
    assert decided == [ApprovalDecided(step=1, call_id="t1", approved=True, reason=None, decided_by=getpass.getuser()),
                       ApprovalDecided(step=1, call_id="t2", approved=False, reason=None,
                                       decided_by=getpass.getuser())]
    kinds = [e.kind for e in run.events]
    assert kinds.index("approval_decided") + 2 == kinds.index("run_resumed")


def test_a_pool_run_awaiting_approval_goes_back_to_its_worker_once_decided(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_NAP_S", "0.01")
    monkeypatch.delenv("POOL_LEDGER_URL", raising=False)
    run_id = record_queued(store, "pay the rent", "approver")
    assert take(store, run_id, agents.with_approver) == "awaiting_approval"
    before = store.get_run(run_id).events
    assert take(store, run_id, agents.with_approver) == "dropped"  # undecided: nothing for a worker to do
    assert store.get_run(run_id).events == before
    store.decide(run_id, "transfer-1", True, decided_by="alice")
    assert take(store, run_id, agents.with_approver) == "done"
    run = store.get_run(run_id)
    assert run.answer == 'transfer: "transferred pay the rent"'
    assert [e.data["name"] for e in run.events if e.kind == "tool_started"] == ["transfer"]


def test_the_decision_fact_has_its_own_kind_and_a_damaged_one_is_refused() -> None:
    fact = ApprovalDecided(step=2, call_id="t1", approved=False, reason="too much", decided_by="alice")
    assert encode(fact) == ("approval_decided", {"call_id": "t1", "approved": False, "reason": "too much",
                                                 "decided_by": "alice"})
    assert decode(*encode(fact), step=2) == fact
    assert fact.verdict == "too much"
    with pytest.raises(EventDecodeError, match=r"^approval_decided event is malformed: approved must be a bool"):
        decode("approval_decided", {"call_id": "t1", "approved": "yes", "reason": None, "decided_by": "alice"})
