"""stream_agent and astream_agent: a run's text as it is written, its tools between steps, its end last."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, Status, ToolRegistry, run_agent
from runner._run.streaming import (
    RunEnded,
    StepFinished,
    StreamEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    astream_agent,
    stream_agent,
)
from runner.events import ModelCalled, ModelDelta
from runner.store import RunStore
from tests.streaming.helpers import AsyncStreamingModel, StreamingModel, call


def echo_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Say ``text`` back."""
        return text

    return registry


SCRIPT: list[ModelReply | str] = [call("c1", "echo", "Let me check.", text="hi"), "It said hi, all good."]


def kinds(events: list[StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


def test_the_deltas_join_to_each_reply_and_tool_events_come_between_the_steps() -> None:
    events = list(stream_agent("say hi", StreamingModel(SCRIPT), echo_registry()))
    assert kinds(events) == ["TextDelta"] * 3 + ["ToolStarted", "ToolFinished", "StepFinished"] + \
        ["TextDelta"] * 5 + ["StepFinished", "RunEnded"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta) and e.step == 1) == "Let me check."
    assert "".join(e.text for e in events if isinstance(e, TextDelta) and e.step == 2) == "It said hi, all good."
    started = next(e for e in events if isinstance(e, ToolStarted))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert (started.step, started.call.id, started.call.args) == (1, "c1", {"text": "hi"})
    assert (finished.call_id, finished.name, finished.content, finished.ok) == ("c1", "echo", '"hi"', True)
    last = events[-1]
    assert isinstance(last, RunEnded)
    assert (last.result.status, last.result.answer) == (Status.DONE, "It said hi, all good.")


def test_the_first_delta_reaches_the_caller_while_the_model_is_still_writing() -> None:
    seen = threading.Event()  # the model waits after its first piece until the caller has it
    model = StreamingModel(["one two three"], hold=seen)
    got: list[str] = []
    for event in stream_agent("count", model, ToolRegistry()):
        if isinstance(event, TextDelta):
            got.append(event.text)
            seen.set()
    assert got == ["one ", "two ", "three"]


def test_astream_agent_streams_an_async_model_and_a_sync_one_alike() -> None:
    async def collect(model: StreamingModel) -> list[StreamEvent]:
        return [event async for event in astream_agent("say hi", model, echo_registry())]

    for model in (AsyncStreamingModel(SCRIPT), StreamingModel(SCRIPT)):
        events = asyncio.run(collect(model))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me check.It said hi, all good."
        assert kinds(events)[-2:] == ["StepFinished", "RunEnded"]
        assert "ToolFinished" in kinds(events)


def test_the_deltas_are_logged_in_batches_whose_text_joins_to_the_reply(store: RunStore) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    events = list(stream_agent("write", StreamingModel([words], pause_s=0.02), ToolRegistry(), store=store,
                               delta_interval_s=0.2))
    last = events[-1]
    assert isinstance(last, RunEnded)
    run = store.get_run(last.result.run_id)
    deltas = [fact for fact in run.facts if isinstance(fact, ModelDelta)]
    assert "".join(d.text for d in deltas) == words
    offsets = [d.offset for d in deltas]
    assert offsets == [sum(len(d.text) for d in deltas[:i]) for i in range(len(deltas))]
    assert 2 <= len(deltas) <= 0.8 / 0.2 + 3  # ~0.8 s of writing, a delta per 0.2 s at most
    called = next(fact for fact in run.facts if isinstance(fact, ModelCalled))
    assert called.first_chunk_s is not None
    assert 0 <= called.first_chunk_s <= called.latency_s
    assert run.messages[-1]["content"] == words  # the reply as ever; deltas are not conversation


def test_another_reader_sees_the_text_grow_before_the_reply_ends(store: RunStore) -> None:
    release = threading.Event()
    model = StreamingModel(["first piece then the rest"], hold=release)
    stream = stream_agent("write", model, ToolRegistry(), store=store, run_id="growing", delta_interval_s=0.05)
    first = next(stream)
    assert isinstance(first, TextDelta)
    deadline = time.monotonic() + 10
    while not [e for e in store.get_run("growing").events if e.kind == "model_delta"]:
        assert time.monotonic() < deadline, "the first piece was never committed"
        time.sleep(0.01)
    run = store.get_run("growing")
    assert run.status == Status.RUNNING
    assert [e.data["text"] for e in run.events if e.kind == "model_delta"] == ["first "]
    release.set()
    assert isinstance(list(stream)[-1], RunEnded)


def test_leaving_the_iterator_early_cancels_the_run_and_logs_it(store: RunStore) -> None:
    model = StreamingModel([call(f"c{i}", "echo", f"step {i}", text=str(i)) for i in range(8)], pause_s=0.01)
    stream = stream_agent("go on", model, echo_registry(), store=store, run_id="left-early", max_steps=8)
    for event in stream:
        if isinstance(event, StepFinished):
            break
    assert isinstance(stream, Generator)
    stream.close()  # as leaving a for loop does, once the generator is dropped
    run = store.get_run("left-early")
    assert run.status == Status.CANCELLED
    assert run.steps < 8


@pytest.mark.parametrize(("items", "error"), [
    (["text", 42], "a model's stream yields text (str) and ends with its ModelReply, not int"),
    (["text"], "the model's stream ended without yielding its ModelReply"),
    ([ModelReply("x"), "more"], "the model's stream yielded text after its ModelReply"),
])
def test_a_stream_that_breaks_the_protocol_is_a_model_error(items: list[Any], error: str) -> None:
    class Broken:
        def __call__(self, messages: Any, specs: Any) -> ModelReply:
            raise AssertionError

        def stream(self, messages: Any, specs: Any) -> Any:
            yield from items

    events = list(stream_agent("x", Broken(), ToolRegistry()))
    last = events[-1]
    assert isinstance(last, RunEnded)
    assert last.result.status == Status.MODEL_ERROR
    assert error in (last.result.error or "")


def test_a_model_without_stream_streams_no_text_but_the_other_events() -> None:
    events = list(stream_agent("x", ScriptedModel(SCRIPT), echo_registry()))
    assert kinds(events) == ["ToolStarted", "ToolFinished", "StepFinished", "StepFinished", "RunEnded"]


def test_run_agent_streams_only_when_asked(store: RunStore) -> None:
    class Both(StreamingModel):
        def __call__(self, messages: Any, tool_specs: Any) -> ModelReply:
            return self.reply()

    plain = run_agent("x", Both(["plain reply"]), ToolRegistry(), store=store)
    streamed = run_agent("x", Both(["streamed reply"]), ToolRegistry(), store=store, stream=True)
    assert [e.kind for e in store.get_run(plain.run_id).events].count("model_delta") == 0
    assert [e.data["text"] for e in store.get_run(streamed.run_id).events if e.kind == "model_delta"] == [
        "streamed reply"]


@pytest.mark.parametrize("every", [0, -1, 0.6, True, "0.2", float("nan")])
def test_delta_interval_s_outside_0_to_half_a_second_is_refused(every: Any) -> None:
    with pytest.raises(TypeError, match=r"delta_interval_s must be a number of seconds above 0 and at most 0\.5"):
        run_agent("x", ScriptedModel(["y"]), ToolRegistry(), stream=True, delta_interval_s=every)


def test_a_streamed_runs_fixture_equals_a_plain_ones_and_replays_clean(store: RunStore, tmp_path: Any) -> None:
    import json

    from runner import replay

    class Both(StreamingModel):
        def __call__(self, messages: Any, tool_specs: Any) -> ModelReply:
            return self.reply()

    streamed = run_agent("say hi", Both(SCRIPT), echo_registry(), store=store, stream=True, run_id="streamed")
    plain = run_agent("say hi", Both(SCRIPT), echo_registry(), store=store, run_id="plain")
    assert [e.kind for e in store.get_run("streamed").events].count("model_delta") == 2  # one per reply
    fixtures = []
    for result in (streamed, plain):
        store.export_fixture(result.run_id, tmp_path / f"{result.run_id}.json")
        fixture = json.loads((tmp_path / f"{result.run_id}.json").read_text())
        fixtures.append({key: value for key, value in fixture.items() if key != "run_id"})
    assert fixtures[0] == fixtures[1]
    report = replay("streamed", echo_registry(), source_store=store)
    assert report.ok, report.explain()


def test_text_that_came_before_ctrl_c_is_logged_as_the_run_closes(store: RunStore) -> None:
    class Interrupted:
        def __call__(self, messages: Any, specs: Any) -> ModelReply:
            raise AssertionError

        def stream(self, messages: Any, specs: Any) -> Any:
            yield "Hello "
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_agent("x", Interrupted(), ToolRegistry(), store=store, stream=True, run_id="interrupted")
    run = store.get_run("interrupted")
    assert run.status == Status.CANCELLED
    assert [e.data["text"] for e in run.events if e.kind == "model_delta"] == ["Hello "]
