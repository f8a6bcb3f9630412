"""Live spans equal the spans rebuilt from the log, for every shape a run takes, on both backends.

One builder makes both (``runner/tracing/builder.py``): live from the facts the store commits, on
its own thread; rebuilt from the stored facts. Compared whole: trace and span ids, parents, names,
kinds, statuses, attributes, links and times. The shapes: a done run, calls run together, a run
awaiting approval decided and resumed, a stop resumed, a fork, a follow-up, a run whose process died
mid-call resumed (its dead part's spans go out first), and a sub-agent's child run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from runner import (
    ModelReply,
    RunStore,
    ScriptedModel,
    ToolCall,
    ToolRegistry,
    follow_up,
    fork,
    open_store,
    rebuild_spans,
    resume,
    run_agent,
)
from runner.tracing import derived_span_id
from tests.resume.durable_child import PlanModel, tools
from tests.resume.helpers import RUN_ID, killed_in
from tests.tracing.helpers import delegate, mail_bob, planner, registry, weather

Key = tuple[Any, ...]


def whole(span: ReadableSpan) -> Key:
    """Everything a span says, ids and times included."""
    assert span.context is not None
    attrs = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (span.attributes or {}).items()))
    links = tuple((format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) for link in span.links)
    return (format(span.context.trace_id, "032x"), format(span.context.span_id, "016x"),
            format(span.parent.span_id, "016x") if span.parent is not None else None, span.name, span.kind,
            span.status.status_code, span.status.description, attrs, links, span.start_time, span.end_time)


def rebuilt_all(store: RunStore, run_ids: Sequence[str], content: bool) -> list[Key]:
    """Every span rebuilt from the log of the runs and the runs below them (child runs, forks), each once."""
    found: list[Key] = []
    seen: set[str] = set()
    todo = list(run_ids)
    while todo:
        run_id = todo.pop()
        if run_id not in seen:
            seen.add(run_id)
            found += [whole(s) for s in rebuild_spans(store.get_run(run_id), record_content=content)]
            todo += [child.run_id for child in store.children(run_id)]
    return found


def two_together() -> tuple[ScriptedModel, ToolRegistry]:
    model = ScriptedModel([ModelReply("", [ToolCall("a", "get_weather", {"city": "Paris"}),
                                           ToolCall("b", "get_weather", {"city": "Paris"})]), "21C twice"])
    return model, registry()


def paying() -> ToolRegistry:
    reg = registry()
    reg.register("pay", "Pays.", {"type": "object", "properties": {"amount": {"type": "number"}}},
                 lambda amount: "paid", needs_approval=True)
    return reg


Shape = Callable[[RunStore, TracerProvider, bool], list[str]]


def done(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    result = run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), store=store,
                       tracer_provider=provider, record_content=content, agent_name="forecaster",
                       labels={"team": "ops"})
    return [result.run_id]


def together(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    model, reg = two_together()
    return [run_agent("Twice?", model, reg, store=store, tracer_provider=provider, record_content=content).run_id]


def approved(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    first = run_agent("Pay", ScriptedModel([ModelReply("", [ToolCall("p1", "pay", {"amount": 5})])]), paying(),
                      store=store, tracer_provider=provider, record_content=content)
    assert first.status == "awaiting_approval"
    store.decide(first.run_id, "p1", True)
    final = resume(store, first.run_id, ScriptedModel(["Paid."]), paying(), tracer_provider=provider,
                   record_content=content)
    assert final.status == "done"
    return [first.run_id]


def stopped(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    first = run_agent("Weather?", ScriptedModel([weather("c1", "Paris")]), registry(), store=store, max_steps=1,
                      tracer_provider=provider, record_content=content)
    assert first.status == "step_limit"
    resume(store, first.run_id, ScriptedModel(["21C"]), registry(), max_steps=3, tracer_provider=provider,
           record_content=content)
    return [first.run_id]


def forked(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    first = run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), store=store,
                      tracer_provider=provider, record_content=content)
    again = fork(store, first.run_id, at_step=2, model=ScriptedModel(["Warm."]), registry=registry(),
                 tracer_provider=provider, record_content=content)
    assert again.status == "done"
    return [first.run_id, again.run_id]


def followed(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    first = run_agent("Weather?", ScriptedModel(["21C"]), registry(), store=store, tracer_provider=provider,
                      record_content=content)
    then = follow_up(store, first.run_id, "And Oslo?", ScriptedModel([weather("c2", "Paris"), "Also 21C"]),
                     registry(), tracer_provider=provider, record_content=content)
    assert then.status == "done"
    return [first.run_id, then.run_id]


def subagent(store: RunStore, provider: TracerProvider, content: bool) -> list[str]:
    result = run_agent("Mail Bob.", ScriptedModel([delegate(), "Mailed."]), planner([mail_bob(), "Sent."]),
                       store=store, approve=lambda call: True, tracer_provider=provider, record_content=content)
    assert result.status == "done"
    return [result.run_id]


SHAPES: dict[str, Shape] = {"done": done, "together": together, "approved": approved, "stopped": stopped,
                            "forked": forked, "followed": followed, "subagent": subagent}


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_live_spans_are_the_spans_rebuilt_from_the_log(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], shape: str, content: bool) -> None:
    provider, exporter = live
    run_ids = SHAPES[shape](store, provider, content)
    sent = [whole(s) for s in exporter.get_finished_spans()]
    assert len({key[1] for key in sent}) == len(sent)  # no span went out twice
    assert sorted(sent, key=repr) == sorted(rebuilt_all(store, run_ids, content), key=repr)


def test_a_run_inside_a_caller_span_rebuilds_under_that_span(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    with provider.get_tracer("app").start_as_current_span("request") as request:
        result = run_agent("Weather?", ScriptedModel(["21C"]), registry(), store=store, tracer_provider=provider)
        assert trace.get_current_span() is request
    sent = [whole(s) for s in exporter.get_finished_spans() if s.name != "request"]
    assert sorted(sent, key=repr) == sorted(rebuilt_all(store, [result.run_id], False), key=repr)
    (root,) = [key for key in sent if key[3] == "invoke_agent"]
    assert root[2] == format(request.get_span_context().span_id, "016x")


@pytest.mark.process
@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
def test_a_run_whose_process_died_mid_call_sends_its_dead_part_first_when_resumed(
        store_url: str, tmp_path: Path, live: tuple[TracerProvider, InMemorySpanExporter], content: bool) -> None:
    """A run SIGKILLed inside its tool call, then resumed traced: its dead part's spans go out first."""
    provider, exporter = live
    plan = [[["c1", "lookup", {"ref": "r1"}]]]
    killed_in(store_url, tmp_path, plan, "r1", "lookup r1")
    with open_store(store_url) as store:
        again = resume(store, RUN_ID, PlanModel(plan), tools(tmp_path), tracer_provider=provider,
                       record_content=content)
        assert again.status == "done"
        sent = [whole(s) for s in exporter.get_finished_spans()]
        assert sorted(sent, key=repr) == sorted(rebuilt_all(store, [RUN_ID], content), key=repr)
    (dead,) = [key for key in sent if key[3] == "execute_tool lookup" and key[5] == trace.StatusCode.ERROR]
    attrs = dict(dead[7])
    assert (dead[6], attrs["runner.tool.in_doubt"], attrs["error.type"]) == ("cut_short", True, "cut_short")
    assert ("input.value" in attrs) == content  # its arguments, with content on
    assert [key[3] for key in sent if key[2] is None] == ["invoke_agent"]  # the dead part's root went out
    # only the call is in doubt: its step and the dead part's root were cut short, not failed
    assert [key[3] for key in sent if key[5] == trace.StatusCode.ERROR] == ["execute_tool lookup"]
    assert [key[3] for key in sent if ("runner.tool.in_doubt", True) in key[7]] == ["execute_tool lookup"]
    assert [key[3] for key in sent if key[3].startswith("invoke_agent (resumed")] == [
        "invoke_agent (resumed: its process is gone (dead))"]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "denied"])
def test_a_call_awaiting_approval_has_a_span_and_its_decision_is_on_the_call_it_let_run(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], approved: bool) -> None:
    provider, exporter = live
    first = run_agent("Pay", ScriptedModel([ModelReply("", [ToolCall("p1", "pay", {"amount": 5})])]), paying(),
                      store=store, tracer_provider=provider, record_content=True)
    store.decide(first.run_id, "p1", approved, reason=None if approved else "too much", decided_by="ann")
    final = resume(store, first.run_id, ScriptedModel(["Done."]), paying(), tracer_provider=provider,
                   record_content=True)
    assert final.status == "done"
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert sorted(map(whole, spans), key=repr) == sorted(rebuilt_all(store, [first.run_id], True), key=repr)
    waited, ran = [dict(s.attributes or {}) for s in spans if s.name == "execute_tool pay"]
    assert (waited["runner.tool.awaiting_approval"], waited["input.value"]) == (True, '{"amount": 5}')
    decided = {"runner.approval.decision": "approved" if approved else "denied", "runner.approval.decided_by": "ann"}
    if not approved:
        decided["runner.approval.reason"] = "too much"
    assert {k: v for k, v in ran.items() if k.startswith("runner.approval.")} == decided
    assert ran["runner.tool.ran"] is approved


def test_a_fork_is_named_a_fork_and_says_where_it_forked(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    forked(store, provider, False)
    roots = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans() if s.name.startswith("invoke")}
    assert set(roots) == {"invoke_agent", "invoke_agent (fork at step 2)"}
    fork_root = roots["invoke_agent (fork at step 2)"]
    assert (fork_root["runner.origin"], fork_root["runner.forked_at_step"]) == ("fork", 2)
    assert "runner.origin" not in roots["invoke_agent"]


class Seen(SpanProcessor):
    """A span processor that notes the thread each finished span reached it on."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.threads.append(threading.current_thread().name)


def test_spans_are_made_off_the_step_and_all_handed_over_when_the_run_returns(store: RunStore) -> None:
    seen, exporter = Seen(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(seen)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    result = run_agent("Weather?", ScriptedModel([weather("c1", "Paris"), "21C"]), registry(), store=store,
                       tracer_provider=provider)
    assert set(seen.threads) == {"runner-spans"}  # not the run's thread
    assert len(seen.threads) == len(rebuild_spans(store.get_run(result.run_id)))  # every one, as run_agent returned
    provider.force_flush()
    assert len(exporter.get_finished_spans()) == len(seen.threads)
    provider.shutdown()


def test_the_providers_sampler_resource_and_id_generator_are_honoured(store: RunStore) -> None:
    class Counting(RandomIdGenerator):
        def __init__(self) -> None:
            self.drawn: set[str] = set()

        def generate_span_id(self) -> int:
            found = super().generate_span_id()
            self.drawn.add(format(found, "016x"))
            return found

    ids, exporter = Counting(), InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "billing"}), id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = run_agent("Weather?", ScriptedModel(["21C"]), registry(), store=store, tracer_provider=provider)
    spans = exporter.get_finished_spans()
    assert {s.resource.attributes["service.name"] for s in spans} == {"billing"}
    assert {format(s.context.span_id, "016x") for s in spans if s.context} <= ids.drawn
    assert {e.span_id for e in store.get_run(result.run_id).events} <= ids.drawn

    dropped, nothing = InMemorySpanExporter(), TracerProvider(sampler=ALWAYS_OFF)
    nothing.add_span_processor(SimpleSpanProcessor(dropped))
    off = run_agent("Weather?", ScriptedModel(["21C"]), registry(), store=store, tracer_provider=nothing)
    assert dropped.get_finished_spans() == ()
    run = store.get_run(off.run_id)
    assert run.trace_id == off.run_id  # nothing recorded it: ids derived from the run id
    assert run.events[0].span_id == derived_span_id(off.run_id, "run")
