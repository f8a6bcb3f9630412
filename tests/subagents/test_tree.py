"""Sub-agents as child runs: the tree runs, waits for approvals, spends one budget, cancels and nests as one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from runner import Limits, ModelReply, ScriptedModel, Status, ToolCall, ToolRegistry, arun_agent, resume, run_agent
from runner._tools.agents import child_run_id
from runner.errors import CannotResume
from runner.events import RunStarted, ToolFinished, ToolStarted
from runner.store import RunStore


def calls(*made: tuple[str, str, dict[str, Any]]) -> ModelReply:
    return ModelReply("", [ToolCall(call_id, name, args) for call_id, name, args in made])


def paying(paid: list[str], *, needs_approval: bool = False) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(side_effects=True, needs_approval=needs_approval)
    def pay(ref: str) -> str:
        """Pay ``ref``."""
        paid.append(ref)
        return f"paid {ref}"

    return registry


def test_a_parent_with_a_sub_agent_finishes_and_the_child_is_a_run_of_its_own(store: RunStore) -> None:
    paid: list[str] = []
    child_model = ScriptedModel([calls(("k1", "pay", {"ref": "a"})), "paid a"])
    registry = ToolRegistry()
    registry.add_agent("payer", model=child_model, registry=paying(paid), description="Pays bills.")
    parent = ScriptedModel([calls(("p1", "payer", {"task": "pay bill a"})), "all paid"])
    result = run_agent("pay my bills", parent, registry, store=store)
    assert (result.status, result.answer, paid) == (Status.DONE, "all paid", ["a"])
    offered = {spec["name"]: spec["parameters"] for spec in store.get_run(result.run_id).tool_specs}
    assert list(offered["payer"]["properties"]) == ["task"]
    assert offered["payer"]["properties"]["task"]["type"] == "string"
    assert offered["payer"]["required"] == ["task"]
    child_id = child_run_id(result.run_id, "p1")
    child = store.get_run(child_id)
    started = child.facts[0]
    assert isinstance(started, RunStarted)
    assert (child.status, child.parent_run_id, child.task, child.agent_name) == (
        Status.DONE, result.run_id, "pay bill a", "payer")
    assert (started.origin, started.parent_call_id) == ("subagent", "p1")
    assert [f.call_id for f in child.facts if isinstance(f, ToolStarted)] == ["k1"]
    assert parent.seen[1][-1]["content"] == "paid a"  # the parent's model read the child's answer
    finished = next(f for f in store.get_run(result.run_id).facts if isinstance(f, ToolFinished))
    assert (finished.child_run_id, finished.child_tokens) == (child_id, child.tokens)
    assert [run.run_id for run in store.children(result.run_id)] == [child_id]


def test_a_typed_child_answers_its_parent_with_its_result_as_json() -> None:
    class Vendor(BaseModel):
        name: str
        score: int

    child_model = ScriptedModel([calls(("f1", "final_result", {"name": "Acme", "score": 7}))])
    registry = ToolRegistry()
    registry.add_agent("rate", model=child_model, registry=ToolRegistry(), description="Rates.", output_type=Vendor)
    parent = ScriptedModel([calls(("p1", "rate", {"task": "rate acme"})), "rated"])
    assert run_agent("rate", parent, registry).status == Status.DONE
    assert parent.seen[1][-1]["content"] == '{"name": "Acme", "score": 7}'


def test_a_child_that_stops_on_its_own_limit_is_an_error_the_parent_reads() -> None:
    looping = ScriptedModel([calls((f"k{i}", "pay", {"ref": str(i)})) for i in range(5)])
    paid: list[str] = []
    registry = ToolRegistry()
    registry.add_agent("payer", model=looping, registry=paying(paid), description="Pays.",
                       limits=Limits(max_steps=2))
    parent = ScriptedModel([calls(("p1", "payer", {"task": "pay"})), "gave up"])
    result = run_agent("pay", parent, registry)
    assert result.status == Status.DONE
    shown = parent.seen[1][-1]["content"]
    assert shown.startswith("ERROR: sub-agent payer stopped: step_limit (made 2 model calls")


def test_an_approval_inside_a_child_waits_in_both_and_one_decision_and_a_resume_finish_both(store: RunStore) -> None:
    paid: list[str] = []
    child_model = ScriptedModel([calls(("k1", "pay", {"ref": "a"})), "paid a"])
    registry = ToolRegistry()
    registry.add_agent("payer", model=child_model, registry=paying(paid, needs_approval=True), description="Pays.")
    parent = ScriptedModel([calls(("p1", "payer", {"task": "pay a"})), "done paying"])
    first = run_agent("pay", parent, registry, store=store)
    child_id = child_run_id(first.run_id, "p1")
    assert first.status == Status.AWAITING_APPROVAL
    assert store.get_run(child_id).status == Status.AWAITING_APPROVAL
    assert child_id in (first.error or "")
    assert "k1" in (first.error or "")
    assert paid == []
    with pytest.raises(CannotResume, match=f"waits on sub-agent run {child_id}"):
        resume(store, first.run_id, parent, registry)  # nobody decided yet
    store.decide(child_id, "k1", True, decided_by="alice")
    result = resume(store, first.run_id, parent, registry)
    assert (result.status, result.answer, paid) == (Status.DONE, "done paying", ["a"])
    assert store.get_run(child_id).status == Status.DONE
    assert [r.run_id for r in store.children(first.run_id)] == [child_id]  # the same child went on
    assert child_model.calls == 2  # asked once per reply: the logged one was not asked again


def test_a_chatty_child_stops_on_the_parents_token_budget_and_so_does_the_parent(store: RunStore) -> None:
    chatty = ScriptedModel([calls((f"k{i}", "echo", {"text": "x" * 400})) for i in range(30)] + ["finally"])
    tools = ToolRegistry()

    @tools.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    registry = ToolRegistry()
    registry.add_agent("chatty", model=chatty, registry=tools, description="Talks a lot.",
                       limits=Limits(token_budget=1_000_000, max_steps=100))  # its own: far above the parent's
    parent = ScriptedModel([calls(("p1", "chatty", {"task": "talk"})), "done"])
    result = run_agent("talk", parent, registry, store=store, token_budget=3000)
    child_id = child_run_id(result.run_id, "p1")
    child = store.get_run(child_id)
    assert (result.status, child.status) == (Status.TOKEN_BUDGET, Status.TOKEN_BUDGET)
    assert child.limits["token_budget"] < 3000  # the parent's remaining, not the child's default
    assert result.tokens + child.tokens <= 3000
    again = resume(store, result.run_id, parent, registry, token_budget=100_000)
    assert (again.status, store.get_run(child_id).status) == (Status.DONE, Status.DONE)
    assert [r.run_id for r in store.children(result.run_id)] == [child_id]


def test_two_sub_agent_calls_in_one_reply_run_together(store: RunStore) -> None:
    barrier = threading.Barrier(2, timeout=10)

    def agent_tools() -> ToolRegistry:
        tools = ToolRegistry()

        @tools.tool
        def meet() -> str:
            """Wait for the other sub-agent to get here too."""
            barrier.wait()
            return "met"

        return tools

    registry = ToolRegistry()
    for name in ("left", "right"):
        registry.add_agent(name, model=ScriptedModel([calls((f"{name}-k", "meet", {})), f"{name} met"]),
                           registry=agent_tools(), description=f"The {name} one.")
    parent = ScriptedModel([calls(("p1", "left", {"task": "meet"}), ("p2", "right", {"task": "meet"})), "both met"])
    result = run_agent("meet", parent, registry, store=store)
    assert (result.status, result.answer) == (Status.DONE, "both met")  # one at a time, the barrier breaks
    assert [m["content"] for m in parent.seen[1] if m["role"] == "tool"] == ["left met", "right met"]


def test_cancelling_the_parent_cancels_its_running_child(store: RunStore) -> None:
    started = threading.Event()
    tools = ToolRegistry()

    @tools.tool
    def wait_a_bit(n: int) -> str:
        """Take a moment."""
        started.set()
        time.sleep(0.2)
        return "waited"

    slow = ScriptedModel([calls((f"k{i}", "wait_a_bit", {"n": i})) for i in range(50)])
    registry = ToolRegistry()
    registry.add_agent("slow", model=slow, registry=tools, description="Slow.", limits=Limits(max_steps=50))
    parent = ScriptedModel([calls(("p1", "slow", {"task": "go slowly"})), "never"])
    run_id = "cancel-tree"
    worker = threading.Thread(target=run_agent, args=("go", parent, registry), kwargs={"store": store,
                                                                                      "run_id": run_id})
    worker.start()
    assert started.wait(10)
    store.request_cancel(run_id, by="bob")
    worker.join(20)
    assert not worker.is_alive()
    child = store.get_run(child_run_id(run_id, "p1"))
    assert (store.get_run(run_id).status, child.status) == (Status.CANCELLED, Status.CANCELLED)
    assert child.steps < 50
    assert "bob" in (child.error or "")


def test_children_nest_and_the_async_driver_runs_the_tree(store: RunStore) -> None:
    paid: list[str] = []
    inner = paying(paid)
    middle = paying(paid)
    middle.add_agent("inner", model=ScriptedModel([calls(("i1", "pay", {"ref": "inner"})), "inner paid"]),
                     registry=inner, description="Inner.")
    registry = ToolRegistry()
    registry.add_agent("middle", model=ScriptedModel([calls(("m1", "inner", {"task": "pay inside"}),
                                                            ("m2", "pay", {"ref": "middle"})), "middle paid"]),
                       registry=middle, description="Middle.")
    parent = ScriptedModel([calls(("p1", "middle", {"task": "pay all"})), "top done"])
    result = asyncio.run(arun_agent("pay everything", parent, registry, store=store))
    assert (result.status, sorted(paid)) == (Status.DONE, ["inner", "middle"])
    middle_id = child_run_id(result.run_id, "p1")
    inner_id = child_run_id(middle_id, "m1")
    assert store.get_run(inner_id).parent_run_id == middle_id
    assert store.get_run(inner_id).status == Status.DONE


def test_the_parents_deadline_stops_a_slow_child_and_leaves_the_call_open_for_a_resume(store: RunStore) -> None:
    tools = ToolRegistry()

    @tools.tool
    def wait_a_bit(n: int) -> str:
        """Take a moment."""
        time.sleep(0.1)
        return "waited"

    slow = ScriptedModel([calls((f"k{i}", "wait_a_bit", {"n": i})) for i in range(8)] + ["slow done"])
    registry = ToolRegistry()
    registry.add_agent("slow", model=slow, registry=tools, description="Slow.", limits=Limits(max_steps=20))
    parent = ScriptedModel([calls(("p1", "slow", {"task": "go slowly"})), "parent done"])
    result = run_agent("go", parent, registry, store=store, timeout_s=0.35)
    child_id = child_run_id(result.run_id, "p1")
    deadline = time.monotonic() + 10
    while store.get_run(child_id).status == Status.RUNNING:  # the child logs its own stop, just after
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert (result.status, store.get_run(child_id).status) == (Status.DEADLINE, Status.DEADLINE)
    parent_log = store.get_run(result.run_id)
    assert not [f for f in parent_log.facts if isinstance(f, ToolFinished)]  # the call stays open
    again = resume(store, result.run_id, parent, registry, timeout_s=30)
    assert (again.status, again.answer) == (Status.DONE, "parent done")
    assert store.get_run(child_id).status == Status.DONE
    assert parent.seen[-1][-1]["content"] == "slow done"


def test_a_decision_given_to_the_parents_resume_is_logged_on_the_child_that_waits_for_it(store: RunStore) -> None:
    from runner.events import ApprovalDecided

    paid: list[str] = []
    inner = paying(paid, needs_approval=True)
    middle = ToolRegistry()
    middle.add_agent("inner", model=ScriptedModel([calls(("k1", "pay", {"ref": "deep"})), "inner paid"]),
                     registry=inner, description="Inner.")
    registry = ToolRegistry()
    registry.add_agent("middle", model=ScriptedModel([calls(("m1", "inner", {"task": "pay"})), "middle done"]),
                       registry=middle, description="Middle.")
    parent = ScriptedModel([calls(("p1", "middle", {"task": "pay deep"})), "top done"])
    first = run_agent("pay", parent, registry, store=store)
    inner_id = child_run_id(child_run_id(first.run_id, "p1"), "m1")
    assert (first.status, store.get_run(inner_id).status) == (Status.AWAITING_APPROVAL, Status.AWAITING_APPROVAL)
    result = resume(store, first.run_id, parent, registry, decisions={"k1": True}, decided_by="carol")
    assert (result.status, paid) == (Status.DONE, ["deep"])
    decided = [f for f in store.get_run(inner_id).facts if isinstance(f, ApprovalDecided)]
    assert [(d.call_id, d.approved, d.decided_by) for d in decided] == [("k1", True, "carol")]


def test_a_sub_agent_that_calls_itself_stops_growing_the_tree_ten_deep(store: RunStore) -> None:
    registry = ToolRegistry()
    again = ModelReply("", [ToolCall("again", "myself", {"task": "go deeper"})])
    deeper = ScriptedModel([again] * 11 + ["bottom"] * 11)
    registry.add_agent("myself", model=deeper, registry=registry, description="Calls itself.",
                       limits=Limits(token_budget=10**9))
    parent = ScriptedModel([calls(("p1", "myself", {"task": "go deep"})), "top"])
    result = run_agent("go", parent, registry, store=store, token_budget=10**9)
    assert result.status == Status.DONE
    run_id, depth = result.run_id, 0
    while below := store.children(run_id):
        run_id, depth = below[0].run_id, depth + 1
    assert depth == 10
    deepest = store.get_run(run_id)
    assert deepest.messages[3]["content"] == "ERROR: sub-agent myself was not run: the tree of sub-agents is 10 deep " \
        "already"


def test_the_callers_recorder_and_stream_hear_the_parent_alone() -> None:
    from runner.streaming import ToolStarted as Started
    from runner.streaming import stream_agent

    tools = ToolRegistry()

    @tools.tool
    def note(text: str) -> str:
        """Note."""
        return text

    registry = ToolRegistry()
    registry.add_agent("child", model=ScriptedModel([calls(("k1", "note", {"text": "x"})), "child done"]),
                       registry=tools, description="A child.")
    parent = ScriptedModel([calls(("p1", "child", {"task": "note x"})), "parent done"])
    started = [event.call.id for event in stream_agent("go", parent, registry) if isinstance(event, Started)]
    assert started == ["p1"]
