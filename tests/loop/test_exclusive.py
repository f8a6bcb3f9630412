"""An exclusive tool's call runs alone among its reply's calls: it waits for those in flight, and none starts meanwhile.

Proved from the log, not a clock: a call's ``tool_started`` is logged before its tool is handed over and its
``tool_finished`` after it returns, so the calls started and not finished when a tool is entered are those
that may be running beside it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolRegistry, arun_agent, replay, run_agent
from runner.events import Event, RunStarted, ToolFinished, ToolStarted
from runner.store import RunStore
from tests.loop.helpers import call, reply

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class InFlight:
    """A recorder noting the calls started and not finished, and what each tool saw of them when it was entered."""

    def __init__(self, meet: int) -> None:
        self.lock = threading.Lock()
        self.open: set[str] = set()
        self.seen: dict[int, set[str]] = {}
        self.barrier = threading.Barrier(meet, timeout=10)  # the calls that must overlap meet here

    def record(self, event: Event) -> None:
        with self.lock:
            match event:
                case ToolStarted(call_id=call_id):
                    self.open.add(call_id)
                case ToolFinished(call_id=call_id):
                    self.open.discard(call_id)

    def sync(self) -> None:
        pass

    def enter(self, n: int) -> None:
        with self.lock:
            self.seen[n] = set(self.open)

    def registry(self, meeting: set[int]) -> ToolRegistry:
        """``work(n)`` and ``solo(n)``, the exclusive one; the calls in ``meeting`` wait for each other."""
        registry = ToolRegistry()

        def work(n: int) -> str:
            self.enter(n)
            if n in meeting:
                self.barrier.wait()
            return f"r{n}"

        def solo(n: int) -> str:
            self.enter(n)
            return f"s{n}"

        registry.register("work", "Work on n.", SCHEMA, work)
        registry.register("solo", "Work on n alone.", SCHEMA, solo, exclusive=True)
        return registry


def _reply(*names: str) -> ModelReply:
    return reply("", *(call(f"c{n}", name, n=n) for n, name in enumerate(names, start=1)))


def test_an_exclusive_call_waits_for_the_calls_in_flight_and_none_starts_until_it_ends(store: RunStore) -> None:
    flight = InFlight(meet=2)
    result = run_agent("t", ScriptedModel([_reply("work", "solo", "work", "work"), "done"]),
                       flight.registry({3, 4}), store=store, recorder=flight, max_parallel_tools=4)
    assert result.status == "done"
    assert flight.seen[1] == {"c1"}  # the exclusive call next in the reply holds back the calls after it
    assert flight.seen[2] == {"c2"}  # alone: c1 ended before it started, and c3, c4 wait for it
    assert flight.seen[3] <= {"c3", "c4"}  # then together (they met at the barrier)
    assert flight.seen[4] <= {"c3", "c4"}
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"r1"', '"s2"', '"r3"', '"r4"']
    started = next(fact for fact in store.get_run(result.run_id).facts if isinstance(fact, RunStarted))
    assert started.tool_traits == {"solo": {"side_effects": False, "needs_approval": False, "idempotency_key": None,
                                            "exclusive": True}}


def test_an_exclusive_call_first_in_its_reply_runs_before_the_others_run_together() -> None:
    flight = InFlight(meet=2)

    async def go() -> Any:
        return await arun_agent("t", ScriptedModel([_reply("solo", "work", "work"), "done"]), flight.registry({2, 3}),
                                recorder=flight, max_parallel_tools=8)

    result = asyncio.run(go())
    assert result.status == "done"
    assert flight.seen[1] == {"c1"}
    assert flight.seen[2] <= {"c2", "c3"}
    assert flight.seen[3] <= {"c2", "c3"}


def test_two_exclusive_calls_run_one_after_the_other() -> None:
    flight = InFlight(meet=1)
    result = run_agent("t", ScriptedModel([_reply("solo", "solo", "solo"), "done"]), flight.registry(set()),
                       recorder=flight, max_parallel_tools=8)
    assert result.status == "done"
    assert flight.seen == {1: {"c1"}, 2: {"c2"}, 3: {"c3"}}


@pytest.mark.parametrize("parallel", [1, 8])
def test_a_run_with_an_exclusive_tool_replays(store: RunStore, parallel: int) -> None:
    recorded = run_agent("t", ScriptedModel([_reply("work", "solo", "work"), "done"]), InFlight(1).registry(set()),
                         store=store)
    assert recorded.status == "done"
    report = replay(recorded.run_id, InFlight(1).registry(set()), source_store=store, max_parallel_tools=parallel)
    assert report.ok, report.explain()
    assert report.result.messages == recorded.messages
