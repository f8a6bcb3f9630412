"""arun_agent: the same decisions as run_agent, awaited; limits cancel the awaited call."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolRegistry, run_agent
from runner._run.agent import arun_agent
from tests.loop.helpers import Calls, call, reply, weather_registry


def _script() -> list[ModelReply | str]:
    return [reply("Let me check.", call("c1", "get_weather", city="Paris")),
            reply("", call("c2", "c_to_f", celsius=21)), "69.8 F"]


def test_async_run_gives_the_same_messages_as_the_sync_run() -> None:
    sync = run_agent("t", ScriptedModel(_script()), weather_registry())
    calls = Calls()
    result = asyncio.run(arun_agent("t", ScriptedModel(_script()), weather_registry(calls)))
    assert (result.status, result.answer, result.steps, result.tokens) == ("done", "69.8 F", 3, sync.tokens)
    assert result.messages == sync.messages
    assert calls.names() == ["get_weather", "c_to_f"]


def test_coroutine_model_and_tools_are_awaited() -> None:
    script = ScriptedModel([*_script()[:1], "21 C"])

    async def model(messages: Any, specs: Any) -> ModelReply:
        await asyncio.sleep(0)
        return script(messages, specs)

    registry = ToolRegistry()

    async def get_weather(city: str) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"celsius": 21}

    registry.register("get_weather", "d", {"type": "object", "properties": {"city": {"type": "string"}}},
                      get_weather)
    result = asyncio.run(arun_agent("t", model, registry))
    assert result.status == "done"
    assert result.messages[3]["content"] == '{"celsius": 21}'


def test_hanging_async_model_stops_at_the_deadline_and_is_cancelled() -> None:
    cancelled: list[bool] = []
    returned: list[bool] = []

    async def model(messages: Any, specs: Any) -> ModelReply:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        returned.append(True)
        return ModelReply("late")

    result = asyncio.run(arun_agent("t", model, ToolRegistry(), timeout_s=0.2))
    assert returned == []  # the run ended at its deadline, not once the model's wait was over
    assert result.status == "deadline"
    assert result.error == "run deadline of 0.2 s passed while waiting on the model"
    assert cancelled == [True]


def test_async_tool_timeout_gives_an_observation() -> None:
    registry = ToolRegistry()

    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    registry.register("slow", "d", {"type": "object"}, slow, timeout_s=0.05)
    result = asyncio.run(arun_agent("t", ScriptedModel([reply("", call("c1", "slow")), "ok"]), registry))
    assert result.status == "done"
    assert result.messages[3]["content"] == "ERROR: slow timed out after 0.05 s"


def test_asyncio_event_cancels_while_waiting_on_a_tool() -> None:
    registry = ToolRegistry()

    async def hang() -> None:
        await asyncio.sleep(30)

    registry.register("hang", "d", {"type": "object"}, hang)

    async def main() -> Any:
        cancel = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, cancel.set)
        return await arun_agent("t", ScriptedModel([reply("", call("c1", "hang"))]), registry, cancel=cancel)

    result = asyncio.run(main())
    assert result.status == "cancelled"
    assert result.error == "cancelled by the caller while waiting on tool hang"


class LetsToolsFinish(threading.Event):
    """A cancel like the worker pool's: it never cuts a tool call."""

    lets_tools_finish = True


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(("parallel", "answered"), [(1, ['"slept"']), (8, ['"slept"', '"slept"'])],
                         ids=["one-by-one", "together"])
def test_a_cancel_that_lets_tools_finish_waits_for_the_tool_then_stops_before_the_next_call(
        driver: str, parallel: int, answered: list[str]) -> None:
    """One by one, c2 never starts; together, both were running when the cancel came, and both finish."""
    cancel = LetsToolsFinish()
    running = threading.Barrier(min(parallel, 2), timeout=30)  # every call that runs together has started

    def slow() -> str:
        running.wait()
        cancel.set()  # while the calls run
        return "slept"

    registry = ToolRegistry()
    registry.register("slow", "d", {"type": "object"}, slow)
    model = ScriptedModel([reply("", call("c1", "slow"), call("c2", "slow")), "never"])
    if driver == "sync":
        result = run_agent("t", model, registry, cancel=cancel, max_parallel_tools=parallel)
    else:
        result = asyncio.run(arun_agent("t", model, registry, cancel=cancel, max_parallel_tools=parallel))
    assert (result.status, model.calls) == ("cancelled", 1)
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == answered


def test_cancel_before_start_calls_nothing_async() -> None:
    cancel = threading.Event()
    cancel.set()
    model = ScriptedModel(["never"])
    result = asyncio.run(arun_agent("t", model, ToolRegistry(), cancel=cancel))
    assert (result.status, model.calls) == ("cancelled", 0)


def test_many_runs_in_one_event_loop_overlap() -> None:
    in_flight = [0]
    peak = [0]

    async def model(messages: Any, specs: Any) -> ModelReply:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.05)
        in_flight[0] -= 1
        return ModelReply("ok")

    async def main() -> list[Any]:
        return await asyncio.gather(*(arun_agent(f"t{i}", model, ToolRegistry()) for i in range(50)))

    results = asyncio.run(main())
    assert [r.status for r in results] == ["done"] * 50
    assert len({r.run_id for r in results}) == 50
    assert peak[0] == 50


def _log_shape(store: Any, run_id: str) -> list[tuple[str, int, Any]]:
    """A run's events without times, ids and latencies: what must not depend on concurrency."""
    volatile = {"latency_s", "duration_s"}
    shape = []
    for event in store.get_run(run_id).events:
        data = {k: v for k, v in event.data.items() if k not in volatile}
        shape.append((event.kind, event.step, data))
    return shape


def test_fifty_concurrent_runs_into_one_store_log_like_sequential_runs(tmp_path: Any) -> None:
    from runner import open_store

    def script(i: int) -> ScriptedModel:
        return ScriptedModel([reply(f"run {i}", call("c1", "get_weather", city="Paris")),
                              reply("", call("c2", "c_to_f", celsius=21)), f"answer {i}"])

    async def slow_tool(city: str) -> dict[str, int]:
        await asyncio.sleep(0.01)
        return {"celsius": 21}

    def registry() -> ToolRegistry:
        reg = ToolRegistry()
        reg.register("get_weather", "Current temperature in a city.",
                     {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                     slow_tool)
        reg.register("c_to_f", "Celsius to Fahrenheit.",
                     {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
                     lambda celsius: celsius * 9 / 5 + 32)
        return reg

    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        sequential = [asyncio.run(arun_agent(f"task {i}", script(i), registry(), store=store)) for i in range(3)]

        async def main() -> list[Any]:
            return await asyncio.gather(*(arun_agent(f"task {i}", script(i), registry(), store=store)
                                          for i in range(50)))

        concurrent = asyncio.run(main())
        assert [r.status for r in concurrent] == ["done"] * 50
        assert [r.answer for r in concurrent] == [f"answer {i}" for i in range(50)]
        assert len(store.list_runs(limit=100)) == 53
        for i in range(3):
            assert _log_shape(store, concurrent[i].run_id) == _log_shape(store, sequential[i].run_id)
        for result in concurrent:
            assert store.get_run(result.run_id).messages == result.messages


def test_cancelling_the_caller_cancels_the_awaited_call_and_closes_the_run(tmp_path: Any) -> None:
    from runner import open_store

    state = {"model_finished": False, "cancelled_inside": False}

    async def model(messages: Any, specs: Any) -> ModelReply:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            state["cancelled_inside"] = True
            raise
        state["model_finished"] = True
        return ModelReply("late")

    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        async def main() -> None:
            run = asyncio.ensure_future(arun_agent("t", model, ToolRegistry(), store=store))
            await asyncio.sleep(0.05)
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            await asyncio.sleep(0)

        asyncio.run(main())
        assert state == {"model_finished": False, "cancelled_inside": True}
        [summary] = store.list_runs()
        assert (summary.status, summary.error) == ("cancelled", "aborted by CancelledError")


def _no_such_item() -> Any:
    nothing: list[int] = []
    return next(x for x in nothing if x)  # raises StopIteration, which asyncio cannot carry through a Future


@pytest.mark.timeout(10)
def test_a_sync_tool_raising_stopiteration_is_an_error_observation_as_in_the_sync_driver() -> None:
    registry = ToolRegistry()
    registry.register("first", "d", {"type": "object", "properties": {}}, _no_such_item)
    script: list[ModelReply | str] = [reply("", call("c1", "first")), "none"]
    sync = run_agent("t", ScriptedModel(script), registry)
    result = asyncio.run(arun_agent("t", ScriptedModel(script), registry))
    assert (result.status, result.answer) == ("done", "none")
    assert result.messages[3]["content"] == "ERROR: first failed: StopIteration"
    assert result.messages == sync.messages


@pytest.mark.timeout(10)
def test_a_sync_model_raising_stopiteration_is_a_model_error_as_in_the_sync_driver() -> None:
    def model(messages: Any, specs: Any) -> ModelReply:
        return _no_such_item()  # type: ignore[no-any-return]

    sync = run_agent("t", model, ToolRegistry())
    result = asyncio.run(arun_agent("t", model, ToolRegistry()))
    assert (result.status, result.error) == (sync.status, sync.error) == ("model_error", "StopIteration")
    assert isinstance(result.exception, StopIteration)


@pytest.mark.timeout(10)
def test_ctrl_c_from_a_sync_or_async_tool_is_not_swallowed_by_the_async_driver(tmp_path: Any) -> None:
    from runner import open_store

    def interrupt() -> None:
        raise KeyboardInterrupt

    async def ainterrupt() -> None:
        raise KeyboardInterrupt

    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        for fn in (interrupt, ainterrupt):
            registry = ToolRegistry()
            registry.register("interrupt", "d", {"type": "object", "properties": {}}, fn)
            with pytest.raises(KeyboardInterrupt):
                asyncio.run(arun_agent("t", ScriptedModel([reply("", call("c1", "interrupt")), "no"]), registry,
                                       store=store))
        assert [(r.status, r.error) for r in store.list_runs()] == [("cancelled", "aborted by KeyboardInterrupt")] * 2
