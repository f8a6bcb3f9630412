"""The limits and stops hold with a reply's calls in flight together.

A deadline or a cancel stops waiting and logs each call still running as cut short (its outcome
unknown); the tool budget and the repeat guard decide in the reply's order; calls needing approval
wait while the others run; an abort while the starts are committed logs every one of them not run.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolRegistry, arun_agent, replay, resume, run_agent
from runner.events import Event, ToolStarted
from runner.recorder import NullRecorder
from runner.store import RunStore
from tests.loop.helpers import Gate, call, fan_out, numbered, reply

CUT = "ERROR: work was abandoned while it ran ({}); its outcome is unknown"


def hanging(release: threading.Event, arrived: threading.Barrier | None = None, driver: str = "sync") -> Any:
    """A tool that waits until ``release`` is set (after all meet at ``arrived``, if given).

    For ``arun_agent`` it is a coroutine, which the stop cancels: a plain function on
    ``asyncio.to_thread`` would hold ``asyncio.run`` until it returned.
    """
    def work(n: int) -> str:
        if arrived is not None:
            arrived.wait()
        release.wait(30)
        return f"r{n}"

    async def awork(n: int) -> str:
        if arrived is not None:
            await asyncio.to_thread(arrived.wait)
        while not release.is_set():
            await asyncio.sleep(0.01)
        return f"r{n}"

    return work if driver == "sync" else awork


def drive(driver: str, model: Any, registry: ToolRegistry, **options: Any) -> Any:
    if driver == "sync":
        return run_agent("t", model, registry, **options)
    return asyncio.run(arun_agent("t", model, registry, **options))


def tool_facts(store: RunStore, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in store.get_run(run_id).events if e.kind == kind]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_deadline_with_three_calls_in_flight_cuts_each_short_and_a_resume_tells_the_model(
        store: RunStore, driver: str) -> None:
    release = threading.Event()
    try:  # the tools return only once the resume is done: their results are never logged late
        stopped = drive(driver, ScriptedModel([fan_out(3)]), numbered(hanging(release, driver=driver)), store=store,
                        timeout_s=0.5)
        assert (stopped.status, stopped.error) == ("deadline", "run deadline of 0.5 s passed while waiting on "
                                                               "tools work, work, work")
        finished = tool_facts(store, stopped.run_id, "tool_finished")
        assert sorted((f["call_id"], f["ok"], f["observation"]) for f in finished) == [
            (f"c{n}", False, CUT.format("deadline")) for n in (1, 2, 3)]
        assert [m for m in stopped.messages if m["role"] == "tool"] == []  # none answered: the model never saw them
        model = ScriptedModel(["told"])
        result = resume(store, stopped.run_id, model, numbered(lambda n: f"again {n}"))
    finally:
        release.set()
    assert result.status == "done"
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [CUT.format("deadline")] * 3
    assert len(tool_facts(store, stopped.run_id, "tool_started")) == 3  # not run again


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_cancel_with_calls_in_flight_stops_waiting_and_cuts_each_short(store: RunStore, driver: str) -> None:
    release, cancel = threading.Event(), threading.Event()
    arrived = threading.Barrier(3, timeout=10, action=cancel.set)  # the cancel comes once all three run
    try:
        stopped = drive(driver, ScriptedModel([fan_out(3)]), numbered(hanging(release, arrived, driver)), store=store,
                        cancel=cancel)
    finally:
        release.set()
    assert (stopped.status, stopped.error) == ("cancelled", "cancelled by the caller while waiting on tools "
                                                            "work, work, work")
    finished = tool_facts(store, stopped.run_id, "tool_finished")
    assert sorted((f["call_id"], f["observation"]) for f in finished) == [
        (f"c{n}", CUT.format("cancelled")) for n in (1, 2, 3)]


def test_calls_that_returned_before_the_deadline_keep_their_results(store: RunStore) -> None:
    release = threading.Event()

    def work(n: int) -> str:
        if n == 2:
            release.wait(30)
        return f"r{n}"

    try:
        stopped = run_agent("t", ScriptedModel([fan_out(3)]), numbered(work), store=store, timeout_s=1.0)
    finally:
        release.set()
    finished = {f["call_id"]: f["observation"] for f in tool_facts(store, stopped.run_id, "tool_finished")}
    assert (stopped.status, finished) == ("deadline", {"c1": '"r1"', "c3": '"r3"', "c2": CUT.format("deadline")})
    assert [m["content"] for m in stopped.messages if m["role"] == "tool"] == ['"r1"']  # c2 holds c3 back


@pytest.mark.parametrize("parallel", [1, 8], ids=["one-by-one", "together"])
def test_a_run_cut_short_by_its_deadline_then_resumed_replays_strictly_at_any_parallelism(
        store: RunStore, parallel: int) -> None:
    """Replay starts each call the recorded deadline cut short and cuts it short again: the resume read that."""
    release = threading.Event()

    def work(n: int) -> str:
        if n > 1:
            release.wait(30)
        return f"r{n}"

    try:  # the cut calls return only once the resume is done: their results are never logged late
        stopped = run_agent("t", ScriptedModel([fan_out(3)]), numbered(work), store=store, timeout_s=0.5,
                            max_parallel_tools=parallel)
        result = resume(store, stopped.run_id, ScriptedModel(["done"]), numbered(lambda n: f"r{n}"))
    finally:
        release.set()
    cut = [m["tool_call_id"] for m in result.messages if m["role"] == "tool" and m["content"] == CUT.format("deadline")]
    assert (stopped.status, result.status, cut) == ("deadline", "done", ["c2", "c3"] if parallel > 1 else ["c2"])
    ran: list[str] = []
    report = replay(stopped.run_id, numbered(noting(ran, "work", "r")), source_store=store)  # at the logged limit
    assert report.ok, report.explain()
    assert (report.result.messages, sorted(ran)) == (result.messages, ["work 1", "work 3"] if parallel == 1
                                                     else ["work 1"])


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_tool_past_its_own_timeout_times_out_while_the_others_return(driver: str) -> None:
    release = threading.Event()
    registry = numbered(hanging(release, driver=driver), name="slow", timeout_s=0.2)
    registry.register("quick", "Quick.", {"type": "object", "properties": {"n": {"type": "integer"}}},
                      lambda n: f"q{n}")
    model = ScriptedModel([reply("", call("s1", "slow", n=1), call("q1", "quick", n=1)), "done"])
    try:
        result = drive(driver, model, registry)
    finally:
        release.set()
    assert result.status == "done"
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == [
        "ERROR: slow timed out after 0.2 s", '"q1"']


def test_the_tool_budget_lets_the_calls_before_it_run_together_then_stops(store: RunStore) -> None:
    gate = Gate(meet=2)
    stopped = run_agent("t", ScriptedModel([fan_out(4), "done"]), numbered(gate.sync_tool), store=store,
                        max_tool_calls=2)
    assert (stopped.status, stopped.error) == ("tool_budget", "call c3 (work) would be tool call 3 "
                                                              "(max_tool_calls=2); not run")
    assert (gate.peak, sorted(gate.ran)) == (2, ["n1", "n2"])
    alone = run_agent("t", ScriptedModel([fan_out(4), "done"]), numbered(lambda n: f"r{n}"), max_tool_calls=2,
                      max_parallel_tools=1)
    assert (alone.status, alone.error, alone.messages) == (stopped.status, stopped.error, stopped.messages)
    result = resume(store, stopped.run_id, ScriptedModel(["done"]), numbered(gate.sync_tool), max_tool_calls=4)
    assert (result.status, sorted(gate.ran)) == ("done", ["n1", "n2", "n3", "n4"])


def noting(ran: list[str], name: str, result: str) -> Any:
    """A tool that notes ``name n`` in ``ran`` and returns ``result`` with n."""
    def work(n: int) -> str:
        ran.append(f"{name} {n}")
        return f"{result}{n}"

    return work


def approvals_registry(ran: list[str]) -> ToolRegistry:
    registry = numbered(noting(ran, "work", "r"))
    registry.register("transfer", "Move money.", {"type": "object", "properties": {"n": {"type": "integer"}}},
                      noting(ran, "transfer", "moved "), side_effects=True, needs_approval=True)
    return registry


APPROVALS = reply("", call("c1", "work", n=1), call("t1", "transfer", n=1), call("c2", "work", n=2),
                  call("t2", "transfer", n=2))


def test_calls_needing_approval_wait_while_the_others_run_then_the_run_stops_awaiting_approval(
        store: RunStore) -> None:
    ran: list[str] = []
    stopped = run_agent("t", ScriptedModel([APPROVALS]), approvals_registry(ran), store=store)
    assert (stopped.status, stopped.error) == ("awaiting_approval", "call t1 (transfer) needs approval (and 1 more)")
    assert sorted(ran) == ["work 1", "work 2"]  # the others ran, and their results are logged
    assert [f["call_id"] for f in tool_facts(store, stopped.run_id, "approval_requested")] == ["t1", "t2"]
    assert sorted(f["call_id"] for f in tool_facts(store, stopped.run_id, "tool_finished")) == ["c1", "c2"]
    assert [m["tool_call_id"] for m in stopped.messages if m["role"] == "tool"] == ["c1"]  # t1 holds c2 back
    result = resume(store, stopped.run_id, ScriptedModel(["done"]), approvals_registry(ran),
                    decisions={"t1": True, "t2": "not today"})
    assert (result.status, sorted(ran)) == ("done", ["transfer 1", "work 1", "work 2"])
    assert [(m["tool_call_id"], m["content"]) for m in result.messages if m["role"] == "tool"] == [
        ("c1", '"r1"'), ("t1", '"moved 1"'), ("c2", '"r2"'),
        ("t2", "ERROR: the call to transfer was denied by the approver: not today; do not retry it")]


def test_an_approve_callback_decides_each_call_in_the_replys_order_and_the_approved_run_together() -> None:
    ran: list[str] = []
    asked: list[str] = []

    def approve(tool_call: Any) -> bool | str:
        asked.append(tool_call.id)
        return tool_call.id == "t1" or "no"

    result = run_agent("t", ScriptedModel([APPROVALS, "done"]), approvals_registry(ran), approve=approve)
    assert (result.status, asked, sorted(ran)) == ("done", ["t1", "t2"], ["transfer 1", "work 1", "work 2"])
    assert [m["content"] for m in result.messages if m["role"] == "tool"][-1] == (
        "ERROR: the call to transfer was denied by the approver: no; do not retry it")


class RaisingOnSecondStart(NullRecorder):
    """A caller's recorder that raises on the second ``tool_started`` (the store, first, has taken it)."""

    def __init__(self) -> None:
        self.starts = 0

    def record(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            self.starts += 1
            if self.starts == 2:
                raise RuntimeError("dashboard down")


def test_an_abort_while_the_starts_are_committed_logs_every_call_of_the_wave_not_run(store: RunStore) -> None:
    ran: list[str] = []
    registry = numbered(noting(ran, "work", "r"), side_effects=True)
    with pytest.raises(RuntimeError, match=r"^dashboard down$"):
        run_agent("t", ScriptedModel([fan_out(3)]), registry, store=store, run_id="aborted",
                  recorder=RaisingOnSecondStart())
    run = store.get_run("aborted")
    told = "ERROR: not run: the run was aborted by RuntimeError: dashboard down before the call was made"
    assert (run.status, ran) == ("cancelled", [])
    assert [(f["call_id"], f["refused"], f["observation"]) for f in tool_facts(store, "aborted", "tool_finished")] == [
        (f"c{n}", "not_run", told) for n in (1, 2, 3)]
    assert [m["tool_call_id"] for m in run.messages if m["role"] == "tool"] == ["c1", "c2", "c3"]
    model = ScriptedModel([ModelReply("all told")])
    assert resume(store, "aborted", model, registry).status == "done"
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [told] * 3
    assert ran == []
