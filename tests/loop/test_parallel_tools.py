"""A reply's tool calls run together (``max_parallel_tools``), as durably as one at a time.

Overlap is proven without a clock: the tools meet at a barrier that releases only when all of
them are running, and count how many ran at once. The stops (deadline, cancel, budgets,
approvals) with calls in flight are in ``test_parallel_stops.py``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, ScriptedModel, arun_agent, fold, open_store, replay, resume, run_agent
from runner.events import Event, MessageAppended, ToolFinished, ToolStarted
from runner.store import RunStore
from runner.tracing import rebuild_spans
from tests.loop.helpers import Gate, call, fan_out, numbered, reply


class Tape:
    """A recorder noting each tool fact (kind and call id) and each commit, in order."""

    def __init__(self) -> None:
        self.tape: list[str] = []

    def record(self, event: Event) -> None:
        if isinstance(event, (ToolStarted, ToolFinished)):
            self.tape.append(f"{'started' if isinstance(event, ToolStarted) else 'finished'} {event.call_id}")
        elif isinstance(event, MessageAppended) and event.message["role"] == "tool":
            self.tape.append(f"answered {event.message['tool_call_id']}")

    def sync(self) -> None:
        self.tape.append("commit")


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_five_sync_calls_run_at_once_by_default(driver: str) -> None:
    gate = Gate(meet=5)  # no call returns before all five run: one at a time, the first would wait in vain
    model = ScriptedModel([fan_out(5), "done"])
    if driver == "sync":
        result = run_agent("t", model, numbered(gate.sync_tool))
    else:
        result = asyncio.run(arun_agent("t", model, numbered(gate.sync_tool)))
    assert (result.status, gate.peak, sorted(gate.ran)) == ("done", 5, ["n1", "n2", "n3", "n4", "n5"])
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"r1"', '"r2"', '"r3"', '"r4"', '"r5"']


def test_five_async_calls_run_at_once_in_arun_agent() -> None:
    async def main() -> Any:
        barrier = asyncio.Barrier(5)  # releases once all five wait here

        async def work(n: int) -> str:
            await barrier.wait()
            return f"r{n}"

        return await asyncio.wait_for(arun_agent("t", ScriptedModel([fan_out(5), "done"]), numbered(work)), 10)

    result = asyncio.run(main())
    assert result.status == "done"
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"r1"', '"r2"', '"r3"', '"r4"', '"r5"']


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_one_at_a_time_the_calls_never_overlap_and_run_in_the_replys_order(driver: str) -> None:
    gate = Gate()
    model = ScriptedModel([fan_out(5), "done"])
    if driver == "sync":
        result = run_agent("t", model, numbered(gate.sync_tool), max_parallel_tools=1)
    else:
        result = asyncio.run(arun_agent("t", model, numbered(gate.sync_tool), max_parallel_tools=1))
    assert (result.status, gate.peak, gate.ran) == ("done", 1, ["n1", "n2", "n3", "n4", "n5"])


def test_at_most_max_parallel_tools_run_at_once() -> None:
    gate = Gate(meet=2)  # pairs meet: two run at once, never a third
    result = run_agent("t", ScriptedModel([fan_out(4), "done"]), numbered(gate.sync_tool), max_parallel_tools=2)
    assert (result.status, gate.peak, sorted(gate.ran)) == ("done", 2, ["n1", "n2", "n3", "n4"])


def reverse_finishers() -> tuple[Any, list[threading.Event]]:
    """A tool whose call n returns only after call n + 1 has: calls 1-5 run together end 5, 4, 3, 2, 1."""
    done = [threading.Event() for _ in range(10)]

    def work(n: int) -> str:
        if n < 5:
            assert done[n + 1].wait(10)
        done[n].set()
        return f"r{n}"

    return work, done


def test_observations_enter_the_conversation_in_the_replys_order_whatever_order_the_calls_end(
        store: RunStore) -> None:
    work, _ = reverse_finishers()
    tape = Tape()
    result = run_agent("t", ScriptedModel([fan_out(5), "done"]), numbered(work), store=store, recorder=tape)
    assert result.status == "done"
    run = store.get_run(result.run_id)
    finished = [e.data["call_id"] for e in run.events if e.kind == "tool_finished"]
    answered = [m["tool_call_id"] for m in run.messages if m["role"] == "tool"]
    assert (finished, answered) == (["c5", "c4", "c3", "c2", "c1"], ["c1", "c2", "c3", "c4", "c5"])
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ['"r1"', '"r2"', '"r3"', '"r4"', '"r5"']
    # All five starts in one commit before any tool runs; each result committed as its call returns.
    assert tape.tape == [
        "commit", *(f"started c{n}" for n in range(1, 6)), "commit",
        "finished c5", "commit", "finished c4", "commit", "finished c3", "commit", "finished c2", "commit",
        "finished c1", "commit", *(f"answered c{n}" for n in range(1, 6)), "commit", "commit"]
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))


def test_no_tool_runs_before_its_start_is_committed(store: RunStore, store_url: str) -> None:
    seen: dict[int, list[str]] = {}
    with open_store(store_url) as reader:
        def work(n: int) -> str:
            events = reader.get_run("parallel-1").events
            seen[n] = sorted(e.data["call_id"] for e in events if e.kind == "tool_started")
            return f"r{n}"

        result = run_agent("t", ScriptedModel([fan_out(3), "done"]), numbered(work), store=store,
                           run_id="parallel-1")
    assert result.status == "done"
    assert seen == {n: ["c1", "c2", "c3"] for n in (1, 2, 3)}  # every start of the reply, committed at once


@pytest.mark.parametrize("parallel", [1, 8])
def test_a_run_with_calls_run_together_replays_strictly_one_at_a_time_or_together(store: RunStore,
                                                                                  parallel: int) -> None:
    work, _ = reverse_finishers()
    recorded = run_agent("t", ScriptedModel([fan_out(5), fan_out(2, first=6), "done"]), numbered(work), store=store)
    assert recorded.status == "done"
    report = replay(recorded.run_id, numbered(lambda n: f"r{n}"), source_store=store, max_parallel_tools=parallel)
    assert report.ok, report.explain()
    assert report.result.messages == recorded.messages


def test_the_repeat_guard_counts_calls_in_the_replys_order_as_one_by_one(store: RunStore) -> None:
    """A, A, A, B, A with two identical calls allowed: the third A is refused, together as one by one."""
    calls = [("c1", 1), ("c2", 1), ("c3", 1), ("c4", 2), ("c5", 1)]
    script: list[ModelReply | str] = [reply("", *(call(cid, "work", n=n) for cid, n in calls)), "done"]
    together = run_agent("t", ScriptedModel(script), numbered(lambda n: f"r{n}"), store=store)
    alone = run_agent("t", ScriptedModel(script), numbered(lambda n: f"r{n}"), max_parallel_tools=1)
    assert together.messages == alone.messages
    refused = [e.data["call_id"] for e in store.get_run(together.run_id).events
               if e.kind == "tool_finished" and e.data.get("refused") == "repeat"]
    assert refused == ["c3"]
    state = fold(store.get_run(together.run_id).facts)
    assert (state.last_call_key, state.repeats) == ('work\x00{"n": 1}', 1)


def overlapping(spans: list[ReadableSpan]) -> bool:
    """Whether every span started before any of them ended."""
    return max(s.start_time or 0 for s in spans) < min(s.end_time or 0 for s in spans)


def test_a_steps_tool_spans_overlap_live_and_rebuilt_from_the_log(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    gate = Gate(meet=3)
    result = run_agent("t", ScriptedModel([fan_out(3), "done"]), numbered(gate.sync_tool), store=store,
                       tracer_provider=provider)
    assert result.status == "done"
    live_tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool work"]
    rebuilt = [s for s in rebuild_spans(store.get_run(result.run_id)) if s.name == "execute_tool work"]
    assert (len(live_tools), overlapping(live_tools), len(rebuilt), overlapping(rebuilt)) == (3, True, 3, True)
    assert sorted(s.context.span_id for s in rebuilt if s.context) == sorted(
        s.context.span_id for s in live_tools if s.context)
    assert {s.parent.span_id for s in rebuilt if s.parent} == {s.parent.span_id for s in live_tools if s.parent}


@pytest.mark.parametrize(("bad", "error"), [
    (0, "max_parallel_tools must be at least 1"),
    (-1, "max_parallel_tools must be a non-negative integer, got -1"),
    (True, "max_parallel_tools must be a non-negative integer, got True"),
    (2.0, "max_parallel_tools must be a non-negative integer, got 2.0"),
    ("2", "max_parallel_tools must be a non-negative integer, got '2'"),
])
def test_max_parallel_tools_must_be_a_positive_integer_before_anything_is_recorded(store: RunStore, bad: Any,
                                                                                   error: str) -> None:
    with pytest.raises(ValueError, match=r"^max_parallel_tools must be ") as refused:
        run_agent("t", ScriptedModel(["never"]), numbered(lambda n: n), store=store, max_parallel_tools=bad)
    assert (str(refused.value), store.list_runs()) == (error, [])


def test_max_parallel_tools_is_logged_with_the_limits_and_a_resume_keeps_it(store: RunStore) -> None:
    gate = Gate()
    stopped = run_agent("t", ScriptedModel([fan_out(3)]), numbered(gate.sync_tool), store=store, max_steps=1,
                        max_parallel_tools=1)
    assert (stopped.status, store.get_run(stopped.run_id).limits["max_parallel_tools"]) == ("step_limit", 1)
    result = resume(store, stopped.run_id, ScriptedModel([fan_out(3, first=4), "done"]), numbered(gate.sync_tool),
                    max_steps=3)
    assert (result.status, gate.peak) == ("done", 1)  # the resumed step's calls ran one by one too
    assert [e.data["limits"]["max_parallel_tools"] for e in store.get_run(stopped.run_id).events
            if e.kind == "run_resumed"] == [1]
