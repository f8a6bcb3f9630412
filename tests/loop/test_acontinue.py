"""aresume, afork and afollow_up: resume, fork and follow-up with async models and tools, awaited."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from sqlalchemy import update

from runner import ModelReply, ScriptedModel, ToolRegistry, afollow_up, afork, aresume, arun_agent
from runner._loop.actions import CallTool
from runner._loop.sync import drive_until
from runner._run.build import NOT_GIVEN, build_core
from runner.events import ApprovalDecided
from runner.store import RunStore
from runner.store.tables import runs
from tests.loop.helpers import call, reply

GONE = f"{socket.gethostname()}:4194999"  # a pid on this host that runs nothing: the owner is dead


def async_model(script: list[ModelReply | str]) -> Any:
    """A coroutine model answering from ``script``, and the messages it was shown each time."""
    scripted = ScriptedModel(script)

    async def model(messages: Any, specs: Any) -> ModelReply:
        await asyncio.sleep(0)
        return scripted(messages, specs)

    return model


def async_tools(ran: list[str], **options: Any) -> ToolRegistry:
    """One coroutine tool ``pay(amount)``; each call it runs notes its amount in ``ran``."""
    registry = ToolRegistry()

    async def pay(amount: int) -> str:
        await asyncio.sleep(0)
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    registry.register("pay", "Pay an amount.", {"type": "object", "properties": {"amount": {"type": "integer"}},
                                                "required": ["amount"]}, pay, **options)
    return registry


def test_aresume_goes_on_with_a_decision_taken_by_the_name_given(store: RunStore) -> None:
    ran: list[str] = []
    stopped = asyncio.run(arun_agent("t", ScriptedModel([reply("", call("c1", "pay", amount=5))]),
                                     async_tools(ran, needs_approval=True), store=store))
    assert stopped.status == "awaiting_approval"
    result = asyncio.run(aresume(store, stopped.run_id, async_model(["paid."]), async_tools(ran, needs_approval=True),
                                 decisions={"c1": True}, decided_by="alice"))
    assert (result.status, result.answer, result.run_id) == ("done", "paid.", stopped.run_id)
    assert ran == ["pay 5"]
    decided = [fact for fact in store.get_run(stopped.run_id).facts if isinstance(fact, ApprovalDecided)]
    assert [(fact.call_id, fact.approved, fact.decided_by) for fact in decided] == [("c1", True, "alice")]


def test_afork_starts_a_linked_run_from_a_step_with_an_async_model(store: RunStore) -> None:
    ran: list[str] = []
    parent = asyncio.run(arun_agent("t", ScriptedModel([reply("", call("c1", "pay", amount=1)), "one"]),
                                    async_tools(ran), store=store))
    forked = asyncio.run(afork(store, parent.run_id, at_step=2, model=async_model(["two"]), registry=async_tools(ran),
                               observations={"c1": "paid 2"}))
    assert (forked.status, forked.answer) == ("done", "two")
    assert forked.run_id != parent.run_id
    assert forked.messages[-2]["content"] == "paid 2"
    assert store.get_run(forked.run_id).parent_run_id == parent.run_id
    assert ran == ["pay 1"]  # the fork ran no step before at_step again


def test_afollow_up_continues_a_finished_conversation(store: RunStore) -> None:
    ran: list[str] = []
    parent = asyncio.run(arun_agent("t", ScriptedModel(["hello"]), async_tools(ran), store=store))
    model = async_model([reply("", call("c1", "pay", amount=3)), "done"])
    followed = asyncio.run(afollow_up(store, parent.run_id, "pay 3", model, async_tools(ran)))
    assert (followed.status, followed.answer) == ("done", "done")
    assert followed.messages[:len(parent.messages) + 1] == [*parent.messages, {"role": "user", "content": "pay 3"}]
    assert ran == ["pay 3"]
    assert store.get_run(followed.run_id).parent_run_id == parent.run_id


def test_aresume_takes_over_a_killed_run_and_runs_its_call_in_doubt_again(store: RunStore) -> None:
    ran: list[str] = []
    run_id = "k" * 32
    core = build_core("t", ScriptedModel([reply("", call("c1", "pay", amount=7))]), async_tools(ran), "s",
                      NOT_GIVEN, NOT_GIVEN, store=store, run_id=run_id)
    assert drive_until(core, lambda action: isinstance(action, CallTool)) is None  # killed as the tool started
    store.heartbeat.discard(run_id)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=GONE))
    result = asyncio.run(aresume(store, run_id, async_model(["paid."]), async_tools(ran)))
    assert (result.status, result.tool_calls) == ("done", 1)
    assert ran == ["pay 7"]  # no side effects: the call in doubt runs again, once
    resumed = next(event for event in store.get_run(run_id).events if event.kind == "run_resumed")
    assert resumed.data["reason"] == "its process is gone (dead)"


def test_aresume_stops_when_its_asyncio_event_is_set(store: RunStore) -> None:
    stopped = asyncio.run(arun_agent("t", ScriptedModel([reply("", call("c1", "pay", amount=5))]),
                                     async_tools([], needs_approval=True), store=store))

    async def go() -> Any:
        cancel = asyncio.Event()
        entered = asyncio.Event()

        async def model(messages: Any, specs: Any) -> ModelReply:
            entered.set()
            await asyncio.Event().wait()  # never answers: only the cancel ends the wait
            raise AssertionError("unreachable")

        async def set_once_entered() -> None:
            await entered.wait()
            cancel.set()

        setter = asyncio.ensure_future(set_once_entered())
        result = await aresume(store, stopped.run_id, model, async_tools([], needs_approval=True),
                               decisions={"c1": False}, cancel=cancel)
        await setter
        return result

    result = asyncio.run(go())
    assert result.status == "cancelled"
    assert result.error == "cancelled by the caller while waiting on the model"
    assert store.get_run(stopped.run_id).status == "cancelled"
