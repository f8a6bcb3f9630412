"""The worker pool's store side, without a broker: queued runs, the task body, cancel, the sweep.

Every test runs on SQLite and PostgreSQL; the broker, where one is touched, is an
address nothing listens on (publishing fails, the run stays queued).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from runner import (
    CannotResume,
    ModelReply,
    RunStore,
    ScriptedModel,
    StoreError,
    ToolRegistry,
    resume,
    run_agent,
    submit,
)
from runner._loop.actions import CallModel, CallTool, RunTools
from runner._loop.sync import drive_until
from runner.events import ModelCalled, ToolFinished, ToolStarted, decode_all
from runner.pool.agents import PoolError, build_agent
from runner.pool.queued import CANCELLED_QUEUED, StoreCancel, record_queued, request_cancel
from runner.pool.submission import BROKER_ENV, submit_run
from runner.pool.take import _start, take
from runner.store.owner import owner_id
from runner.store.tables import run_labels, runs
from tests.cli.helpers import invoke
from tests.loop.helpers import call, reply
from tests.pool import agents

RUNNER = str(Path(sys.executable).parent / "runner")
NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_NAP_S", "0.01")
    monkeypatch.delenv("POOL_LEDGER_URL", raising=False)


def kinds(store: RunStore, run_id: str) -> list[str]:
    return [event.kind for event in store.get_run(run_id).events]


def test_a_run_submitted_while_the_broker_is_unreachable_is_recorded_queued(store: RunStore, store_url: str) -> None:
    run_id, unpublished = submit_run(store, "job 1", agent="tipper", broker=NOWHERE, labels={"team": "a"},
                                     max_steps=5)
    assert unpublished is not None
    assert "Connection refused" in unpublished
    run = store.get_run(run_id)
    assert (run.status, run.task, run.agent_name, run.steps, run.owner) == ("queued", "job 1", "tipper", 0, None)
    assert [(e.kind, e.data) for e in run.events] == [
        ("run_queued", {"task": "job 1", "agent_name": "tipper", "limits": {"max_steps": 5}, "labels": {"team": "a"},
                        "queue": None})]
    listed = invoke("runs", "--db", store_url, "--status", "queued", "--json")
    assert listed.exit_code == 0, listed.output
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "queued")]
    refused = rf"^run {run_id} has not started \(queued\); a worker of its pool starts it$"
    with pytest.raises(CannotResume, match=refused):
        resume(store, run_id, ScriptedModel(["x"]), ToolRegistry())
    assert store.get_run(run_id).status == "queued"  # refused before taking it over


def test_submit_needs_a_broker_and_records_nothing_without_one(store: RunStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BROKER_ENV, raising=False)
    with pytest.raises(PoolError, match=r"^no broker: pass broker= \(--broker\) or set RUNNER_BROKER_URL$"):
        submit(store, "job", agent="tipper")
    with pytest.raises(TypeError, match=r"^unknown limit\(s\): max_stepz "):
        submit(store, "job", agent="tipper", broker=NOWHERE, max_stepz=3)
    assert store.list_runs() == []


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A ``redis://`` address whose server accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    listener.close()
    for conn in accepted:
        conn.close()


@pytest.mark.process
def test_submit_to_a_broker_that_never_answers_gives_up_and_leaves_the_run_queued(store: RunStore, store_url: str,
                                                                                  silent_broker: str) -> None:
    # Publishing gives up after one quick retry, each try bounded by the socket timeouts: a hang is the timeout.
    done = subprocess.run([RUNNER, "submit", "job 1", "--agent", "tipper", "--db", store_url, "--broker",
                           silent_broker], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert re.fullmatch(r"note: the broker did not take the run \(OperationalError: [^\n]+\); it stays queued "
                        r"and a worker's sweep publishes it when the broker is back\n", done.stderr), done.stderr
    assert store.get_run(run_id).status == "queued"


def test_a_worker_starts_a_queued_run_under_its_own_id(store: RunStore) -> None:
    run_id = record_queued(store, "job 7", "tipper", labels={"team": "a"}, max_steps=6)
    assert take(store, run_id, agents.agents) == "done"
    run = store.get_run(run_id)
    assert (run.status, run.answer, run.steps, run.tool_calls) == ("done", "finished job 7", 4, 5)
    assert kinds(store, run_id)[:4] == ["run_queued", "run_started", "message", "message"]
    assert kinds(store, run_id).count("run_started") == 1
    assert (run.model, run.agent_name, run.labels) == ("plan_model", "tipper", {"agent": "tipper", "team": "a"})
    assert (run.limits["max_steps"], run.limits["token_budget"]) == (6, 100_000)  # submitted, then the agent's
    assert [spec["name"] for spec in run.tool_specs] == ["nap", "charge", "notify"]
    assert [m["role"] for m in run.messages[:2]] == ["system", "user"]


def test_a_queued_runs_labels_find_it_while_it_waits_and_after_it_started(store: RunStore) -> None:
    run_id = record_queued(store, "job 8", "tipper", labels={"team": "a"})
    other = record_queued(store, "job 9", "tipper", labels={"team": "b"})
    assert [(r.run_id, r.status) for r in store.list_runs(label=("team", "a"))] == [(run_id, "queued")]
    assert store.get_run(run_id).labels == {"team": "a"}
    assert take(store, run_id, agents.agents) == "done"
    assert [(r.run_id, r.status) for r in store.list_runs(label=("team", "a"))] == [(run_id, "done")]
    assert [r.run_id for r in store.list_runs(label={"agent": "tipper", "team": "a"})] == [run_id]
    assert [r.run_id for r in store.list_runs(label=("team", "b"))] == [other]
    with store.engine.connect() as conn:  # the label rows carry the run's own start, as a direct run's do
        started = {row.key: row.started_at for row in conn.execute(
            select(run_labels).where(run_labels.c.run_id == run_id))}
    assert started == {"agent": store.get_run(run_id).started_at, "team": store.get_run(run_id).started_at}


def test_a_delivery_for_a_finished_run_is_dropped(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    assert take(store, run_id, agents.agents) == "done"
    before = kinds(store, run_id)
    assert take(store, run_id, agents.agents) == "dropped"
    assert take(store, "no-such-run", agents.agents) == "dropped"
    assert kinds(store, run_id) == before


def test_a_delivery_for_a_run_live_in_another_worker_is_dropped(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    with store.engine.begin() as conn:  # another host's worker claimed it and beats
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(
            status="running", owner="elsewhere:7@1/b", heartbeat_at=store.get_run(run_id).updated_at.now()))
    assert take(store, run_id, agents.agents) == "dropped"
    assert kinds(store, run_id) == ["run_queued"]


def test_a_run_whose_worker_died_is_resumed_not_started_again(store: RunStore) -> None:
    run_id = record_queued(store, "job 3", "tipper")
    run = store.get_run(run_id)
    store.claim_run(run)
    calls: list[int] = []

    def second_model_call(action: Any) -> bool:
        calls.append(isinstance(action, CallModel))
        return sum(calls) == 2

    agent = build_agent(agents.agents, "tipper")
    assert drive_until(_start(store, run, agent, StoreCancel(store, run_id)), second_model_call) is None
    store.heartbeat.discard(run_id)
    with store.engine.begin() as conn:  # its worker is gone: a pid on this host that runs nothing
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=f"{socket.gethostname()}:4194999"))
    assert take(store, run_id, agents.agents) == "done"
    logged = kinds(store, run_id)
    assert (logged.count("run_started"), logged.count("run_resumed"), logged.count("run_finished")) == (1, 1, 1)
    resumed = next(e for e in store.get_run(run_id).events if e.kind == "run_resumed")
    assert resumed.data["reason"] == "its process is gone (dead)"
    assert store.get_run(run_id).steps == 4


def test_a_run_whose_worker_died_between_its_claim_and_its_first_commit_is_started_once_afresh(
        store: RunStore) -> None:
    run_id = record_queued(store, "job 4", "tipper")
    with store.engine.begin() as conn:  # claimed (running, owned) by a worker killed before run_started
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(
            status="running", owner=f"{socket.gethostname()}:4194999"))
    assert take(store, run_id, agents.agents) == "done"
    run = store.get_run(run_id)
    logged = kinds(store, run_id)
    assert (logged[:2], logged.count("run_started"), logged.count("run_resumed")) == (
        ["run_queued", "run_started"], 1, 0)
    assert (run.status, run.steps, run.owner) == ("done", 4, owner_id())  # this worker, not the dead one
    assert take(store, run_id, agents.agents) == "dropped"  # a redelivery after that finds it finished


def test_an_unknown_agent_leaves_the_run_queued(store: RunStore) -> None:
    run_id = record_queued(store, "job", "nobody")
    with pytest.raises(PoolError, match=r"^unknown agent 'nobody' \(this worker knows: \['sleeper', 'tipper'\]\)$"):
        take(store, run_id, agents.agents)
    assert (store.get_run(run_id).status, kinds(store, run_id)) == ("queued", ["run_queued"])


@pytest.mark.parametrize(("options", "why"), [
    ({"max_step": 10}, "unknown run option(s): max_step"),
    ({"labels": "team=a"}, "dictionary update sequence element #0 has length 1; 2 is required"),
    ({"max_steps": "ten"}, "max_steps must be a non-negative integer, got 'ten'"),
], ids=["unknown-option", "labels-not-a-mapping", "bad-limit"])
def test_an_agent_whose_options_are_wrong_leaves_the_run_queued_and_cancellable(
        store: RunStore, options: dict[str, Any], why: str) -> None:
    run_id = record_queued(store, "job", "typo")
    typo = {"typo": lambda: (agents.plan_model, agents.registry(), options)}
    with pytest.raises(PoolError, match=rf"^agent 'typo' cannot start run {run_id}: {re.escape(why)}$"):
        take(store, run_id, typo)
    run = store.get_run(run_id)
    assert (run.status, run.owner, kinds(store, run_id)) == ("queued", None, ["run_queued"])  # not claimed
    assert request_cancel(store, run_id) == "cancelled"


@pytest.mark.parametrize(("limits", "error", "why"), [
    ({"max_steps": "ten"}, ValueError, "max_steps must be a non-negative integer, got 'ten'"),
    ({"token_budget": -1}, ValueError, "token_budget must be a non-negative integer, got -1"),
    ({"max_tool_calls": "3"}, ValueError, "max_tool_calls must be a non-negative integer or None, got '3'"),
    ({"timeout_s": 0}, ValueError, "timeout_s must be positive or None, got 0"),
    ({"max_identical_calls": 0}, ValueError, "max_identical_calls must be at least 1"),
])
def test_a_limit_a_worker_would_refuse_is_refused_at_submission(store: RunStore, limits: dict[str, Any],
                                                               error: type[Exception], why: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(why)}$"):
        record_queued(store, "job", "tipper", **limits)
    assert store.list_runs(limit=10) == []


def test_a_delivery_the_store_cannot_answer_fails_the_task_instead_of_being_dropped(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        take(store, run_id, agents.agents)


def test_the_sweep_publishes_only_its_own_queues_pool_runs_and_gives_back_what_it_could_not_publish(
        store: RunStore) -> None:
    default = record_queued(store, "default", "tipper")
    other = record_queued(store, "other", "tipper", queue="gpu")
    crashed = run_agent("not a pool's", ScriptedModel(["x"]), ToolRegistry(), store=store).run_id
    with store.engine.begin() as conn:  # a run of a plain run_agent whose process died
        conn.execute(update(runs).where(runs.c.run_id == crashed).values(
            status="running", owner=f"{socket.gethostname()}:4194999"))
    time.sleep(0.01)
    assert [t.run_id for t in store.due_for_publish(0.0)] == [default]
    assert store.due_for_publish(60.0, "celery") == []  # touched just now
    submitted_at = store.get_run(other).updated_at
    touched = store.due_for_publish(0.0, "gpu")
    assert [t.run_id for t in touched] == [other]
    assert store.get_run(other).updated_at > submitted_at
    store.untouch(touched)  # its publish failed: not pushed back a whole interval for the other workers
    assert store.get_run(other).updated_at == submitted_at


def test_cancel_ends_a_queued_run_cancelled_at_once(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    assert request_cancel(store, run_id) == "cancelled"
    run = store.get_run(run_id)
    assert (run.status, run.error) == ("cancelled", CANCELLED_QUEUED)
    assert [(e.kind, e.data.get("status")) for e in run.events] == [("run_queued", None), ("run_finished", "cancelled")]
    assert take(store, run_id, agents.agents) == "dropped"
    with pytest.raises(PoolError, match=rf"^run {run_id} has already finished \(cancelled\); nothing to cancel$"):
        request_cancel(store, run_id)


def test_cancel_stops_a_running_run_at_its_next_step_boundary(store: RunStore) -> None:
    run_id = record_queued(store, "job", "sleeper")
    ended: list[str] = []
    # The worker reads the cancel at most every 0.25 s (a step naps 0.2-0.25 s), so request_cancel's own read,
    # right after its insert, still sees the run running even on a loaded machine (at 0.05 s it raced).
    worker = threading.Thread(target=lambda: ended.append(take(store, run_id, agents.agents, cancel_poll_s=0.25)))
    worker.start()
    deadline = time.monotonic() + 10
    while store.get_run(run_id).steps < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert request_cancel(store, run_id) == "running"
    worker.join(10)
    assert ended == ["cancelled"]
    run = store.get_run(run_id)
    assert run.status == "cancelled"
    assert 2 <= run.steps <= 5


def make_slow_napper(parallel: int = 1) -> tuple[Any, ToolRegistry, dict[str, Any]]:
    """One reply asking for a 1 s nap, then a short one, then an answer the run never gets to.

    The agent's ``max_parallel_tools`` is ``parallel``: 1 naps one by one, more naps together.
    """
    model = ScriptedModel([reply("", call("c1", "nap", seconds=1.0), call("c2", "nap", seconds=0.1)), "rested"])
    return model, agents.registry(), {"max_parallel_tools": parallel}


@pytest.mark.parametrize(("parallel", "started"), [(1, ["c1"]), (2, ["c1", "c2"])], ids=["one-by-one", "together"])
def test_cancel_lets_a_running_tool_call_finish_then_stops_before_the_next_call(store: RunStore, parallel: int,
                                                                                started: list[str]) -> None:
    """One by one, c2 never starts; together, both naps were running and both are waited for."""
    run_id = record_queued(store, "job", "napper")
    ended: list[str] = []
    worker = threading.Thread(target=lambda: ended.append(
        take(store, run_id, {"napper": lambda: make_slow_napper(parallel)}, cancel_poll_s=0.02)))
    worker.start()
    deadline = time.monotonic() + 10
    while "tool_started" not in kinds(store, run_id) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert request_cancel(store, run_id) == "running"  # while c1's nap runs
    worker.join(10)
    assert ended == ["cancelled"]
    facts = decode_all(store.get_run(run_id).events, run_id)
    finished = {fact.call_id: fact for fact in facts if isinstance(fact, ToolFinished)}
    assert sorted(finished) == started
    assert (finished["c1"].ran, finished["c1"].ok, finished["c1"].observation) == (True, True, '"rested"')
    assert finished["c1"].duration_s >= 1.0  # the nap was waited for, not cut
    assert [fact.call_id for fact in facts if isinstance(fact, ToolStarted)] == started
    assert sum(isinstance(fact, ModelCalled) for fact in facts) == 1  # nor was the model asked again
    assert store.get_run(run_id).status == "cancelled"

def make_quick_napper(parallel: int | None, asked_before: int = 0) -> tuple[Any, ToolRegistry, dict[str, Any]]:
    """Two short naps in one reply, then an answer (the replies after ``asked_before``); ``parallel`` calls at once."""
    replies: list[ModelReply | str] = [reply("", call("c1", "nap", seconds=0.01), call("c2", "nap", seconds=0.02)),
                                       "rested"]
    return ScriptedModel(replies[asked_before:]), agents.registry(), {} if parallel is None else {
        "max_parallel_tools": parallel}


@pytest.mark.parametrize(("parallel", "order"), [(1, ["tool_started", "tool_finished"] * 2),
                                                 (2, ["tool_started"] * 2 + ["tool_finished"] * 2)],
                         ids=["one-by-one", "together"])
def test_a_worker_resumes_a_run_with_the_max_parallel_tools_it_started_with(store: RunStore, parallel: int,
                                                                           order: list[str]) -> None:
    """The agent's ``max_parallel_tools`` is a limit: logged at the start, kept by the worker that resumes it."""
    run_id = record_queued(store, "job", "napper")
    first = build_agent({"napper": lambda: make_quick_napper(parallel)}, "napper")
    core = _start(store, store.get_run(run_id), first, StoreCancel(store, run_id))
    assert drive_until(core, lambda action: isinstance(action, (CallTool, RunTools))) is None  # the worker died
    store.heartbeat.discard(run_id)
    with store.engine.begin() as conn:  # its worker is gone: a pid on this host that runs nothing
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=f"{socket.gethostname()}:4194999"))
    assert take(store, run_id, {"napper": lambda: make_quick_napper(None, asked_before=1)}) == "done"
    logged = kinds(store, run_id)
    resumed = logged[logged.index("run_resumed"):]
    assert ([k for k in resumed if k.startswith("tool_")], store.get_run(run_id).limits["max_parallel_tools"]) == (
        order, parallel)


def test_the_sweep_publishes_queued_and_orphaned_runs_once_per_interval(store: RunStore) -> None:
    queued = record_queued(store, "queued", "tipper")
    orphan = record_queued(store, "orphan", "tipper")
    live = record_queued(store, "live", "tipper")
    done = record_queued(store, "done", "tipper")
    take(store, done, agents.agents)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == orphan).values(
            status="running", owner=f"{socket.gethostname()}:4194999"))
        conn.execute(update(runs).where(runs.c.run_id == live).values(status="running", owner=_this_process()))
    time.sleep(0.01)
    assert sorted(t.run_id for t in store.due_for_publish(0.0)) == sorted([queued, orphan])
    assert store.due_for_publish(60.0) == []  # touched just now: not again before the interval


def _this_process() -> str:
    from runner.store.owner import owner_id

    return owner_id()


def test_a_queued_run_is_not_finished(store: RunStore, store_url: str) -> None:
    run_id = record_queued(store, "job", "tipper")
    run = store.get_run(run_id)
    assert (run.status, run.finished, run.liveness) == ("queued", False, "waiting")
    listed = json.loads(invoke("runs", "--db", store_url, "--json").stdout)
    assert [(r["run_id"], r["status"], r["liveness"]) for r in listed] == [(run_id, "queued", "waiting")]
    assert request_cancel(store, run_id) == "cancelled"
    cancelled = store.get_run(run_id)
    assert (cancelled.finished, cancelled.liveness) == (True, "finished")


def test_the_sweep_publishes_a_decided_run_whose_publish_failed_and_not_an_undecided_one(store: RunStore) -> None:
    waiting, undecided = record_queued(store, "rent", "approver"), record_queued(store, "lease", "approver")
    assert [take(store, run_id, agents.with_approver) for run_id in (waiting, undecided)] == [
        "awaiting_approval", "awaiting_approval"]
    time.sleep(0.01)
    assert store.due_for_publish(0.0) == []  # awaiting a decision nobody has logged: nothing for a worker to do
    assert store.decide(waiting, "transfer-1", True, decided_by="alice")  # then the publish failed
    time.sleep(0.01)
    assert [t.run_id for t in store.due_for_publish(0.0)] == [waiting]
    assert store.due_for_publish(60.0) == []  # touched just now: not again before the interval
    assert take(store, waiting, agents.with_approver) == "done"  # what its delivery does
    assert store.get_run(waiting).answer == 'transfer: "transferred rent"'
    assert store.due_for_publish(0.0) == []
