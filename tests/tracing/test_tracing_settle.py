"""A run's end waits for its spans on its own thread, never inside a commit other runs' rows share."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from runner import AgentResult, ScriptedModel, ToolRegistry, arun_agent, run_agent
from runner.store import RunStore
from runner.tracing import pump

HANG_S = 20.0  # how long the stuck processor holds the span thread at most (the test releases it sooner)


class StuckOnRoot(SpanProcessor):
    """Holds the span thread on the run's root span until released."""

    def __init__(self) -> None:
        self.arrived, self.release = threading.Event(), threading.Event()

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == "invoke_agent":
            self.arrived.set()
            self.release.wait(HANG_S)


def _in_thread(fn: Callable[[], AgentResult]) -> tuple[threading.Thread, list[AgentResult]]:
    results: list[AgentResult] = []
    thread = threading.Thread(target=lambda: results.append(fn()), daemon=True)
    thread.start()
    return thread, results


def _check_other_run_commits_meanwhile(store: RunStore, first: Callable[[TracerProvider], AgentResult]) -> None:
    stuck, exporter = StuckOnRoot(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(stuck)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    slow, slow_result = _in_thread(lambda: first(provider))
    try:
        assert stuck.arrived.wait(10), "the first run's root never reached its processor"
        other, other_result = _in_thread(lambda: run_agent("t", ScriptedModel(["other"]), ToolRegistry(), store=store,
                                                           tracer_provider=NoOpTracerProvider()))
        other.join(10)
        assert not other.is_alive(), "another run's commit waited on the first run's span processor"
        assert other_result[0].status == "done"
        assert slow.is_alive()  # the first run's end still waits for its spans
    finally:
        stuck.release.set()
    slow.join(HANG_S)
    assert not slow.is_alive()
    assert slow_result[0].status == "done"
    assert "invoke_agent" in [span.name for span in exporter.get_finished_spans()]
    provider.shutdown()


def test_a_stuck_span_processor_holds_up_no_other_runs_commit(store: RunStore) -> None:
    _check_other_run_commits_meanwhile(
        store, lambda provider: run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store,
                                          tracer_provider=provider))


def test_an_async_runs_stuck_span_processor_holds_up_no_other_runs_commit(store: RunStore) -> None:
    _check_other_run_commits_meanwhile(
        store, lambda provider: asyncio.run(arun_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store,
                                                       tracer_provider=provider)))


def test_an_async_run_with_no_store_waits_for_its_spans_without_blocking_its_event_loop() -> None:
    stuck = StuckOnRoot()
    provider = TracerProvider()
    provider.add_span_processor(stuck)
    other_done = threading.Event()
    results: list[AgentResult] = []

    async def other() -> None:
        arrived = await asyncio.get_running_loop().run_in_executor(None, stuck.arrived.wait, 10)
        assert arrived, "the first run's root never reached its processor"
        results.append(await arun_agent("t", ScriptedModel(["other"]), ToolRegistry(),
                                        tracer_provider=NoOpTracerProvider()))
        other_done.set()

    async def both() -> None:
        first, _ = await asyncio.gather(arun_agent("t", ScriptedModel(["hi"]), ToolRegistry(),
                                                   tracer_provider=provider), other())
        results.append(first)

    loop = threading.Thread(target=lambda: asyncio.run(both()), daemon=True)
    loop.start()
    try:
        assert other_done.wait(10), "another run on the event loop waited on the first run's span processor"
        assert loop.is_alive()  # the first run's end still waits for its spans
    finally:
        stuck.release.set()
    loop.join(HANG_S)
    assert not loop.is_alive()
    assert [result.status for result in results] == ["done", "done"]
    provider.shutdown()


def test_once_a_processor_hangs_later_runs_do_not_each_wait_for_it(monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The first run's end gives up on its spans after the wait; the next ones do not wait again on a stuck thread."""
    stuck = StuckOnRoot()
    provider = TracerProvider()
    provider.add_span_processor(stuck)
    try:
        monkeypatch.setattr(pump, "WAIT_S", 0.2)
        assert run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), tracer_provider=provider).status == "done"
        assert stuck.arrived.is_set()
        monkeypatch.setattr(pump, "WAIT_S", 10 * HANG_S)  # a run that waited again would hang the test
        later, results = _in_thread(lambda: run_agent("t", ScriptedModel(["hi"]), ToolRegistry(),
                                                      tracer_provider=provider))
        later.join(HANG_S / 2)
        assert not later.is_alive(), "a later run waited again on the stuck span thread"
        assert results[0].status == "done"
        later_async = asyncio.run(asyncio.wait_for(arun_agent("t", ScriptedModel(["hi"]), ToolRegistry(),
                                                              tracer_provider=provider), HANG_S / 2))
        assert later_async.status == "done"
    finally:
        stuck.release.set()
        for _ in range(int(HANG_S / 0.05)):  # the thread gets past the point the first wait gave up on
            if not pump.pump().stuck:
                break
            time.sleep(0.05)
    assert not pump.pump().stuck
    assert pump.pump().wait(HANG_S)
    assert "its spans were not all handed over" in caplog.text
    provider.shutdown()


class ExitsOnFirst(SpanProcessor):
    """Calls ``sys.exit`` on its first span, as a processor that gives up might."""

    def __init__(self) -> None:
        self.exited = False

    def on_end(self, span: ReadableSpan) -> None:
        if not self.exited:
            self.exited = True
            sys.exit("processor gave up")


def test_a_processor_raising_system_exit_does_not_stop_the_span_thread(store: RunStore) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ExitsOnFirst())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store, tracer_provider=provider)
    second = run_agent("t", ScriptedModel(["again"]), ToolRegistry(), store=store, tracer_provider=provider)
    assert pump.pump().wait(HANG_S)
    runs = {span.attributes.get("runner.run_id") for span in exporter.get_finished_spans() if span.attributes}
    assert second.run_id in runs
    provider.shutdown()
