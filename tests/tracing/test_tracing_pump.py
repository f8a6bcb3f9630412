"""The span thread: a processor's failure costs only its span, and a forked child never waits on it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Sampler, SamplingResult

from runner import ScriptedModel, run_agent
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry


class FailingOnEvery(SpanProcessor):
    def __init__(self) -> None:
        self.told = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.told += 1
        raise RuntimeError(f"broke on {span.name}")


def test_a_processor_failing_on_every_span_costs_no_other_span(store: RunStore) -> None:
    exporter, failing = InMemorySpanExporter(), FailingOnEvery()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # told first, then the failing one
    provider.add_span_processor(failing)
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21C"])
    result = run_agent("Weather?", model, weather_registry(), store=store, tracer_provider=provider)
    provider.shutdown()
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert result.status == "done"
    assert names == sorted(["invoke_agent", "step 1", "chat scripted", "execute_tool get_weather", "step 2",
                            "chat scripted"])
    assert failing.told == len(names)


CHILD = textwrap.dedent("""
    import os, sys
    from opentelemetry.sdk.trace import TracerProvider
    from runner import ScriptedModel, ToolRegistry, run_agent
    run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), tracer_provider=TracerProvider())
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # the child's interpreter exits: its exit handlers run
    _, status = os.waitpid(pid, 0)
    print("child exited", os.waitstatus_to_exitcode(status))
""")


@pytest.mark.process
def test_a_forked_child_exits_without_waiting_on_its_parents_span_thread() -> None:
    """The parent's exit handler, inherited, would wait 30 s on a thread the child does not have."""
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=20)
    assert (done.returncode, done.stdout, done.stderr) == (0, "child exited 0\n", "")


class BrokenSampler(Sampler):
    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        raise RuntimeError("sampler broke")

    def get_description(self) -> str:
        return "broken"


class IdsBreakingMidRun(RandomIdGenerator):
    def __init__(self) -> None:
        self.made = 0

    def generate_span_id(self) -> int:
        self.made += 1
        if self.made > 2:
            raise RuntimeError("ids broke")
        return super().generate_span_id()


@pytest.mark.parametrize("provider", [lambda: TracerProvider(sampler=BrokenSampler()),
                                      lambda: TracerProvider(id_generator=IdsBreakingMidRun())],
                         ids=["sampler", "id generator"])
def test_a_provider_that_raises_neither_fails_the_run_nor_leaves_it_running(
        store: RunStore, provider: Callable[[], TracerProvider], caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21C"])
    result = run_agent("Weather?", model, weather_registry(), store=store, tracer_provider=provider())
    assert (result.status, store.get_run(result.run_id).status) == ("done", "done")
    assert "broke" in caplog.text
