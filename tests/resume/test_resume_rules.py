"""Resume's rules, in one process: every stop can be continued, approvals, the owner lease,
and the mistakes a caller can make (each one line)."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update

from runner import CannotResume, ModelReply, ScriptedModel, ToolCall, ToolRegistry, follow_up, fork, resume, run_agent
from runner.store import RunStore
from runner.store.lease import claim
from runner.store.owner import owner_id
from runner.store.tables import runs
from tests.loop.helpers import Calls, call, reply, weather_registry
from tests.resume.durable_child import PlanModel, ran, tools

PARIS = reply("", call("c1", "get_weather", city="Paris"))
OSLO = reply("", call("c2", "get_weather", city="Oslo"))


def finish(store: RunStore, run_id: str, model: Any, registry: ToolRegistry, **limits: Any) -> Any:
    result = resume(store, run_id, model, registry, **limits)
    run = store.get_run(run_id)
    assert run.messages == result.messages
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    return result


@pytest.mark.parametrize(("first", "again", "script", "done_with"), [
    ({"max_steps": 1}, {"max_steps": 4}, [PARIS, OSLO, "cold"], ["get_weather", "get_weather"]),
    ({"token_budget": 200}, {"token_budget": 10_000}, [PARIS, "warm"], ["get_weather"]),
    ({"max_tool_calls": 0}, {"max_tool_calls": 5}, [PARIS, "warm"], ["get_weather"]),
    ({"max_context_chars": 10}, {"max_context_chars": 10_000}, [PARIS, "warm"], ["get_weather"]),
], ids=["step_limit", "token_budget", "tool_budget", "context_budget"])
def test_a_run_stopped_on_a_limit_resumes_with_a_larger_one(store: RunStore, first: dict[str, Any],
                                                            again: dict[str, Any], script: list[Any],
                                                            done_with: list[str]) -> None:
    calls = Calls()
    stopped = run_agent("Weather?", ScriptedModel(script), weather_registry(calls), store=store, **first)
    assert stopped.status != "done"
    model = ScriptedModel(script[stopped.steps:])
    result = finish(store, stopped.run_id, model, weather_registry(calls), **again)
    assert result.status == "done"
    assert calls.names() == done_with


def test_a_cancelled_run_resumes_and_runs_the_call_it_stopped_before(store: RunStore) -> None:
    cancel = threading.Event()
    calls = Calls()

    def model(messages: Any, specs: Any) -> ModelReply:
        cancel.set()
        return ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})])

    stopped = run_agent("t", model, weather_registry(calls), store=store, cancel=cancel)
    assert (stopped.status, calls.names()) == ("cancelled", [])
    result = finish(store, stopped.run_id, ScriptedModel(["warm"]), weather_registry(calls))
    assert (result.status, calls.names()) == ("done", ["get_weather"])
    assert result.messages[3]["content"] == '{"celsius": 21}'


def test_a_model_error_resumes_by_asking_the_model_again(store: RunStore) -> None:
    def broken(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down")

    stopped = run_agent("t", broken, weather_registry(), store=store)
    result = finish(store, stopped.run_id, ScriptedModel(["back"]), weather_registry())
    assert (stopped.status, result.status, result.answer, result.steps) == ("model_error", "done", "back", 2)


@pytest.mark.parametrize("limits", [{"max_output_chars": 5}, {}], ids=["output_budget", "invalid_reply"])
def test_a_reply_whose_calls_were_not_run_gets_not_run_observations_on_resume(store: RunStore,
                                                                              limits: dict[str, Any]) -> None:
    calls = Calls()
    cut = ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})],
                     stop_reason=None if limits else "length")
    stopped = run_agent("t", ScriptedModel([cut]), weather_registry(calls), store=store, **limits)
    model = ScriptedModel(["ok"])
    result = finish(store, stopped.run_id, model, weather_registry(calls), max_output_chars=None)
    assert (stopped.status, result.status, calls.names()) == (stopped.status, "done", [])
    assert model.seen[0][3] == {"role": "tool", "tool_call_id": "c1", "name": "get_weather",
                                "content": f"ERROR: not run: {stopped.error}"}


@pytest.mark.parametrize(("parallel", "order"), [(1, ["transfer a", "lookup b"]), (8, ["lookup b", "transfer a"])],
                         ids=["one-by-one", "together"])
def test_every_call_awaiting_approval_is_logged_and_decided_at_once(store: RunStore, tmp_path: Path, parallel: int,
                                                                    order: list[str]) -> None:
    """One by one, the run stops at t1; together, c1 (no approval needed) runs before the run stops."""
    plan = [[["t1", "transfer", {"ref": "a"}], ["c1", "lookup", {"ref": "b"}], ["t2", "transfer", {"ref": "c"}]]]
    stopped = run_agent("t", PlanModel(plan), tools(tmp_path), store=store, max_parallel_tools=parallel)
    pending = [e.data["call_id"] for e in store.get_run(stopped.run_id).events if e.kind == "approval_requested"]
    assert (stopped.status, stopped.error, pending) == ("awaiting_approval", "call t1 (transfer) needs approval "
                                                        "(and 1 more)", ["t1", "t2"])
    result = finish(store, stopped.run_id, PlanModel(plan), tools(tmp_path), decisions={"t1": True, "t2": False},
                    max_parallel_tools=parallel)
    assert (result.status, ran(tmp_path)) == ("done", order)
    assert result.messages[-2]["content"] == "ERROR: the call to transfer was denied by the approver; do not retry it"


def payments(paid: list[int], *, needs_approval: bool, interrupt_first: bool = False) -> ToolRegistry:
    """``pay``, a side effect that appends to ``paid`` (the first call is Ctrl-C'd, if asked)."""
    registry = ToolRegistry()

    def pay(cents: int) -> str:
        if interrupt_first and not paid:
            paid.append(-1)  # it ran: the process is interrupted before its result is logged
            raise KeyboardInterrupt
        paid.append(cents)
        return "paid"

    registry.register("pay", "Pay.", {"type": "object", "properties": {"cents": {"type": "integer"}},
                                      "required": ["cents"]}, pay, side_effects=True, needs_approval=needs_approval)
    return registry


def test_a_denial_given_on_resume_holds_where_the_registry_no_longer_asks_for_approval(store: RunStore) -> None:
    paid: list[int] = []
    pay_c1 = reply("", call("c1", "pay", cents=500))
    stopped = run_agent("t", ScriptedModel([pay_c1]), payments(paid, needs_approval=True), store=store)
    assert stopped.status == "awaiting_approval"
    model = ScriptedModel(["not paid"])
    result = finish(store, stopped.run_id, model, payments(paid, needs_approval=False),
                    decisions={"c1": "over budget"})
    assert (result.status, paid) == ("done", [])
    assert model.seen[0][-1]["content"] == ("ERROR: the call to pay was denied by the approver: over budget; "
                                            "do not retry it")
    finished = [e.data for e in store.get_run(stopped.run_id).events if e.kind == "tool_finished"]
    assert [(f["call_id"], f["ran"], f["refused"]) for f in finished] == [("c1", False, "denied")]


def test_a_call_approved_and_started_before_the_run_stopped_can_no_longer_be_decided(store: RunStore) -> None:
    paid: list[int] = []
    registry = payments(paid, needs_approval=True, interrupt_first=True)
    stopped = run_agent("t", ScriptedModel([reply("", call("c1", "pay", cents=500))]), registry, store=store)
    assert stopped.status == "awaiting_approval"
    with pytest.raises(KeyboardInterrupt):
        resume(store, stopped.run_id, ScriptedModel([]), registry, decisions={"c1": True})
    assert (store.get_run(stopped.run_id).status, paid) == ("cancelled", [-1])  # in doubt: it may have paid
    before = len(store.get_run(stopped.run_id).events)
    with pytest.raises(CannotResume, match=rf"^run {stopped.run_id}: call 'c1' was approved and started before "
                                           r"the run stopped; it can no longer be decided$"):
        resume(store, stopped.run_id, ScriptedModel([]), registry, decisions={"c1": "changed my mind"})
    assert len(store.get_run(stopped.run_id).events) == before
    model = ScriptedModel(["unsure"])
    assert finish(store, stopped.run_id, model, registry).status == "done"
    assert paid == [-1]  # in doubt and without a key: never re-run blindly
    assert model.seen[0][-1]["content"].startswith("ERROR: the outcome of this call is unknown")


def test_an_approve_callback_still_decides_what_no_decision_covers(store: RunStore, tmp_path: Path) -> None:
    plan = [[["t1", "transfer", {"ref": "a"}]]]
    result = run_agent("t", PlanModel(plan), tools(tmp_path), store=store, approve=lambda c: "not on Sundays")
    assert result.status == "done"
    assert ran(tmp_path) == []
    assert result.messages[3]["content"] == ("ERROR: the call to transfer was denied by the approver: "
                                             "not on Sundays; do not retry it")


def test_two_takers_of_one_run_one_wins(store: RunStore) -> None:
    stopped = run_agent("t", ScriptedModel([PARIS]), weather_registry(), store=store, max_steps=1)
    seen = store.get_run(stopped.run_id)
    assert claim(store.engine, seen, "host-a:1@1/x") is True
    assert claim(store.engine, seen, "host-b:2@2/y") is False
    assert store.get_run(stopped.run_id).owner == "host-a:1@1/x"


def test_a_run_of_another_host_is_live_until_its_heartbeat_is_older_than_the_lease(store: RunStore) -> None:
    stopped = run_agent("t", ScriptedModel([PARIS]), weather_registry(), store=store, max_steps=1)
    with store.engine.begin() as conn:
        conn.execute(update(runs).values(status="running", owner="elsewhere:7@1/boot",
                                         heartbeat_at=datetime.now(UTC) - timedelta(seconds=5)))
    with pytest.raises(CannotResume, match="is being driven by a live process"):
        resume(store, stopped.run_id, ScriptedModel(["x"]), weather_registry())
    with store.engine.begin() as conn:
        conn.execute(update(runs).values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=31)))
    assert store.get_run(stopped.run_id).liveness == "stale"
    result = resume(store, stopped.run_id, ScriptedModel([OSLO, "cold"]), weather_registry(), max_steps=5)
    assert result.status == "done"


def test_the_heartbeat_moves_while_a_tool_works(store: RunStore) -> None:
    store.heartbeat.interval_s = 0.05
    beats: list[datetime | None] = []
    registry = ToolRegistry()

    def slow() -> str:
        for _ in range(3):
            time.sleep(0.2)
            beats.append(store.get_run("beat" + "0" * 28).heartbeat_at)
        return "done"

    registry.register("slow", "Slow.", {"type": "object"}, slow)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "slow")), "ok"]), registry, store=store,
                       run_id="beat" + "0" * 28)
    assert result.status == "done"
    assert len(set(beats)) == 3  # refreshed between each look, with no commit of the run in between


def test_a_callers_mistakes_are_one_line(store: RunStore) -> None:
    parent = run_agent("t", ScriptedModel([PARIS, "warm"]), weather_registry(), store=store)
    wrong_step = r"^run \w+ made 2 model calls; at_step must be an integer between 1 and 2, got "
    for at_step, shown in ((3, "3"), (2.0, "2.0"), (True, "True"), ("2", "'2'")):
        with pytest.raises(ValueError, match=wrong_step + re.escape(shown) + "$"):
            fork(store, parent.run_id, at_step=at_step, model=ScriptedModel([]),  # type: ignore[arg-type]
                 registry=weather_registry())
    forked = fork(store, parent.run_id, at_step=2, model=ScriptedModel(["mild"]), registry=weather_registry())
    with pytest.raises(ValueError, match=rf"^run {forked.run_id} made 1 model call; at_step must be an "
                                         r"integer between 2 and 2, got 1$"):  # a fork's steps go on from its parent's
        fork(store, forked.run_id, at_step=1, model=ScriptedModel([]), registry=weather_registry())
    with pytest.raises(ValueError, match=r"has no tool result for call\(s\) \['zz'\] before that step$"):
        fork(store, parent.run_id, at_step=2, model=ScriptedModel([]), registry=weather_registry(),
             observations={"zz": "x"})
    waiting = run_agent("t", ScriptedModel([PARIS]), weather_registry(), store=store, max_tool_calls=0)
    with pytest.raises(CannotResume, match=r"stopped with 1 call unanswered \(tool_budget\); resume it instead$"):
        follow_up(store, waiting.run_id, "and?", ScriptedModel([]), weather_registry())
    with pytest.raises(TypeError, match="unknown run option"):
        resume(store, waiting.run_id, ScriptedModel([]), weather_registry(), max_stepz=3)  # type: ignore[call-arg]
    wrong = r"^tools_ref must be a string like 'myapp.tools:registry', got (int|bytes)$"
    with pytest.raises(TypeError, match=wrong):
        run_agent("t", ScriptedModel(["x"]), weather_registry(), store=store, tools_ref=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=wrong):
        fork(store, parent.run_id, at_step=1, model=ScriptedModel([]), registry=weather_registry(),
             tools_ref=b"m:a")  # type: ignore[arg-type]


def test_a_run_that_never_started_cannot_be_followed_up(store: RunStore) -> None:
    from runner.pool.queued import record_queued, request_cancel

    queued = record_queued(store, "job", "tipper")
    cancelled = record_queued(store, "job", "tipper")
    request_cancel(store, cancelled)
    for run_id, status in ((queued, "queued"), (cancelled, "cancelled")):
        with pytest.raises(CannotResume, match=rf"^run {run_id} never started \({status}\); there is no "
                                               r"conversation to follow up$"):
            follow_up(store, run_id, "and?", ScriptedModel(["x"]), weather_registry())
    assert len(store.list_runs(limit=10)) == 2  # no child was made


def test_a_call_id_of_the_conversation_a_follow_up_or_fork_carries_cannot_be_used_again(store: RunStore) -> None:
    parent = run_agent("t", ScriptedModel([PARIS, "warm"]), weather_registry(), store=store)
    again = reply("", call("c1", "get_weather", city="Oslo"))
    child = follow_up(store, parent.run_id, "and Oslo?", ScriptedModel([again]), weather_registry())
    assert (child.status, child.error) == ("invalid_reply", "duplicate call id 'c1'")
    forked = fork(store, parent.run_id, at_step=2, model=ScriptedModel([again]), registry=weather_registry())
    assert (forked.status, forked.error) == ("invalid_reply", "duplicate call id 'c1'")
    fresh = follow_up(store, parent.run_id, "and Oslo?", ScriptedModel([OSLO, "cold"]), weather_registry())
    assert (fresh.status, [m.get("tool_call_id") for m in fresh.messages if m["role"] == "tool"]) == (
        "done", ["c1", "c2"])


def test_a_fork_will_not_guess_which_of_two_results_of_one_call_id_to_swap() -> None:
    from runner._run.resume import _swap_observations

    messages: list[Any] = [{"role": "tool", "tool_call_id": "c1", "name": "f", "content": "a"},
                           {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "b"}]
    with pytest.raises(ValueError, match=r"^run r answers call id\(s\) \['c1'\] more than once before that step; "
                                         r"cannot tell which result to swap$"):
        _swap_observations("r", messages, {"c1": "x"})
    assert [m["content"] for m in _swap_observations("r", messages, {})] == ["a", "b"]


def test_an_idempotency_key_must_be_a_parameter_the_model_cannot_send() -> None:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    with pytest.raises(ValueError, match=r"^tool 'a': idempotency_key 'key' is also in the schema"):
        registry.register("a", "", schema, lambda key: key, idempotency_key="key")
    with pytest.raises(ValueError, match=r"^tool 'b': fn takes no keyword argument 'key'"):
        registry.register("b", "", {"type": "object"}, lambda: 1, idempotency_key="key")
    tool = registry.register("c", "", {"type": "object"}, lambda key: key, idempotency_key="key")
    assert tool.spec()["parameters"] == {"type": "object"}


def test_a_second_resume_keeps_the_limits_the_first_one_set(store: RunStore) -> None:
    script: list[ModelReply | str] = [PARIS, OSLO, reply("", call("c3", "get_weather", city="Paris")), "done at last"]
    stopped = run_agent("t", ScriptedModel(script), weather_registry(), store=store, max_steps=1,
                        max_identical_calls=5)
    again = resume(store, stopped.run_id, ScriptedModel(script[1:]), weather_registry(), max_steps=2)
    last = resume(store, stopped.run_id, ScriptedModel(script[2:]), weather_registry(), token_budget=50_000)
    assert [(r.status, r.steps) for r in (stopped, again, last)] == [("step_limit", 1), ("step_limit", 2),
                                                                     ("step_limit", 2)]
    final = resume(store, stopped.run_id, ScriptedModel(script[2:]), weather_registry(), max_steps=4)
    assert (final.status, final.steps, final.answer) == ("done", 4, "done at last")
    resumed = [e.data["limits"] for e in store.get_run(stopped.run_id).events if e.kind == "run_resumed"]
    assert [(lim["max_steps"], lim["token_budget"], lim["max_identical_calls"]) for lim in resumed] == [
        (2, 4000, 5), (2, 50_000, 5), (4, 50_000, 5)]


def _killed_in_its_first_model_call(store: RunStore, run_id: str) -> None:
    """The log a process leaves when it dies while the model of step 1 is thinking."""
    from runner._log.limits import Limits
    from runner.events import MessageAppended, RunStarted, StepStarted

    recorder = store.recorder()
    for fact in (RunStarted(run_id=run_id, task="t", system="s", limits=Limits(max_steps=1).to_dict(),
                            tool_specs=weather_registry().specs(), model="scripted"),
                 MessageAppended(index=0, message={"role": "system", "content": "s"}),
                 MessageAppended(index=1, message={"role": "user", "content": "t"}), StepStarted(step=1)):
        recorder.record(fact)
    recorder.sync()
    with store.engine.begin() as conn:  # its owner is gone
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner="gone:1@1/boot",
                                                                         heartbeat_at=datetime(2000, 1, 1,
                                                                                               tzinfo=UTC)))


def test_a_model_call_that_never_came_back_is_asked_again_as_the_same_step_within_max_steps(
        store: RunStore) -> None:
    _killed_in_its_first_model_call(store, "m" * 32)
    result = resume(store, "m" * 32, ScriptedModel(["hi"]), weather_registry())
    assert (result.status, result.steps, result.answer) == ("done", 1, "hi")  # max_steps=1 still allows it
    _killed_in_its_first_model_call(store, "n" * 32)
    stopped = resume(store, "n" * 32, ScriptedModel([]), weather_registry(), max_steps=0)
    assert (stopped.status, stopped.error) == ("step_limit", "made 0 model calls (max_steps=0)")


def test_a_heartbeat_skips_a_run_whose_row_a_commit_holds_instead_of_waiting(store: RunStore,
                                                                             store_url: str) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite locks the whole file, not rows: a beat waits its turn as any writer does")
    held, free = "held" + "0" * 28, "free" + "0" * 28
    for run_id in (held, free):
        run_agent("t", ScriptedModel(["ok"]), ToolRegistry(), store=store, run_id=run_id)
    old = datetime(2026, 1, 1, tzinfo=UTC)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id.in_([held, free])).values(
            status="running", owner=owner_id(), heartbeat_at=old))
    store.heartbeat.interval_s = 3600.0  # no beat of its own thread: this test calls beat() itself
    store.heartbeat.add(held)
    store.heartbeat.add(free)
    locker = create_engine(store_url)
    try:
        with locker.connect() as conn:  # what a group commit carrying the run holds until it commits
            conn.execute(select(runs.c.run_id).where(runs.c.run_id == held).with_for_update())
            beat = threading.Thread(target=store.heartbeat.beat)
            beat.start()
            beat.join(timeout=5)
            still_waiting = beat.is_alive()
            conn.rollback()
        beat.join(timeout=30)
    finally:
        store.heartbeat.stop()
        locker.dispose()
    assert not still_waiting
    assert store.get_run(held).heartbeat_at == old  # skipped: its own commit refreshes it
    assert store.get_run(free).heartbeat_at != old
