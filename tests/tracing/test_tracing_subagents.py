"""A sub-agent's child run is traced in its parent's trace, under the parent's span of the call.

Live (the real OpenTelemetry SDK, an in-memory exporter) and rebuilt from the log, the tree is the
same: ids, names and parents; the call's span names the agent it hands the task to and the child run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from sqlalchemy import create_engine, insert, select

from runner import (
    RunStore,
    ScriptedModel,
    StoredRun,
    arun_agent,
    open_store,
    rebuild_spans,
    run_agent,
)
from runner._run.resume import resume
from runner.events import RunStarted, ToolStarted
from runner.store.tables import events, runs
from runner.tracing import derived_span_id
from tests.cli.helpers import invoke
from tests.tracing.helpers import Receiver, delegate, ids_of, mail_bob, planner, tree

TRANSFER = {"gen_ai.transfer.mode": "return_to_caller", "gen_ai.transfer.target.name": "mailer"}


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


def parent_id(span: ReadableSpan) -> str | None:
    return format(span.parent.span_id, "016x") if span.parent is not None else None


def started(run: StoredRun) -> RunStarted:
    return next(f for f in run.facts if isinstance(f, RunStarted))


def test_a_childs_spans_hang_under_the_call_in_one_trace_live_and_rebuilt_across_an_approval_and_resume(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    first = run_agent("Mail Bob the report.", ScriptedModel([delegate()]), planner([mail_bob()]), store=store,
                      tracer_provider=provider, agent_name="planner")
    assert first.status == "awaiting_approval"
    (child,) = store.children(first.run_id)
    store.decide(child.run_id, "m1", True)
    mailed: list[str] = []
    done = resume(store, first.run_id, ScriptedModel(["Mailed Bob."]), planner(["Sent it."], mailed),
                  tracer_provider=provider)
    assert (done.status, done.answer, mailed) == ("done", "Mailed Bob.", ["bob"])
    spans = list(exporter.get_finished_spans())

    parent, kid = store.get_run(first.run_id), store.get_run(child.run_id)
    assert {format(s.context.trace_id, "032x") for s in spans if s.context} == {parent.trace_id}
    assert kid.trace_id == parent.trace_id
    calls = sorted((s for s in spans if s.name == "execute_tool mailer"), key=lambda s: s.start_time or 0)
    roots = sorted((s for s in spans if s.name.startswith("invoke_agent mailer")), key=lambda s: s.start_time or 0)
    assert [s.name for s in roots] == ["invoke_agent mailer", "invoke_agent mailer (resumed: awaiting_approval)"]
    assert len(calls) == len(roots) == 2  # the call is performed again on resume; the child resumes
    assert parent_id(roots[0]) == span_id(calls[0])  # the child's first root is under the call's first span
    assert parent_id(roots[1]) == span_id(roots[0])  # its resumed part is under its first root
    assert started(kid).parent_span_id == span_id(calls[0])
    for call in calls:
        assert {k: v for k, v in (call.attributes or {}).items() if k.startswith(("gen_ai.transfer", "runner.child"))
                } == {**TRANSFER, "runner.child_run_id": kid.run_id}
    under_child = {s.name for s in spans if (s.attributes or {}).get("runner.run_id") == kid.run_id}
    assert under_child == {"invoke_agent mailer", "invoke_agent mailer (resumed: awaiting_approval)", "step 1",
                           "step 2", "chat scripted", "execute_tool send_mail"}

    rebuilt = rebuild_spans(parent) + rebuild_spans(kid)
    assert ids_of(rebuilt) == ids_of(spans)


def test_a_child_started_by_a_call_performed_again_after_a_crash_goes_under_that_calls_new_span(
        tmp_path: Path, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """The parent died after logging the call and before the child started: the resume starts it, in segment 1."""
    whole = f"sqlite:///{tmp_path / 'whole.db'}"
    with open_store(whole) as store:
        done = run_agent("Mail Bob.", ScriptedModel([delegate(), "Mailed."]), planner([mail_bob(), "Sent."]),
                         store=store, approve=lambda call: True)
    assert done.status == "done"
    engine = create_engine(whole)
    with engine.connect() as conn:
        row = dict(conn.execute(select(runs).where(runs.c.run_id == done.run_id)).mappings().one())
        rows = [dict(r) for r in conn.execute(select(events).where(events.c.run_id == done.run_id)
                                              .order_by(events.c.seq)).mappings()]
    engine.dispose()
    cut = next(i for i, r in enumerate(rows) if r["kind"] == "tool_started") + 1
    url = f"sqlite:///{tmp_path / 'cut.db'}"
    open_store(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:  # the parent as its dead process left it: the call started, no child yet
        conn.execute(insert(runs), [dict(row, status="running", answer=None, finished_at=None,
                                         owner="a-host-long-gone:1@0", heartbeat_at=dt.datetime(2000, 1, 1))])
        conn.execute(insert(events), rows[:cut])
    engine.dispose()

    provider, exporter = live
    with open_store(url) as store:
        again = resume(store, done.run_id, ScriptedModel(["Mailed."]), planner([mail_bob(), "Sent."]),
                       tracer_provider=provider, approve=lambda call: True)
        assert again.status == "done"
        (child,) = store.children(done.run_id)
        parent, kid = store.get_run(done.run_id), store.get_run(child.run_id)
    spans = list(exporter.get_finished_spans())
    calls = [e for e, f in zip(parent.events, parent.facts, strict=True) if isinstance(f, ToolStarted)]
    assert len(calls) == 2  # tool:p1, then tool:p1@1
    assert calls[0].span_id != calls[1].span_id
    (root,) = [s for s in spans if s.name == "invoke_agent mailer"]
    assert parent_id(root) == calls[1].span_id == started(kid).parent_span_id
    # The dead part's spans went out first, rebuilt from the log: its call cut short, then the new call.
    dead, new_call = sorted((s for s in spans if s.name == "execute_tool mailer"), key=lambda s: s.start_time or 0)
    assert (span_id(dead), span_id(new_call)) == (calls[0].span_id, calls[1].span_id)
    assert (dead.status.description, (dead.attributes or {}).get("runner.tool.in_doubt")) == ("cut_short", True)
    rebuilt = rebuild_spans(parent) + rebuild_spans(kid)
    assert ids_of(spans) == ids_of(rebuilt)  # the dead process's part too
    (rebuilt_root,) = [s for s in rebuilt if s.name == "invoke_agent mailer"]
    assert parent_id(rebuilt_root) == calls[1].span_id


def test_with_nothing_recording_the_ids_are_derived_and_the_rebuilt_child_still_hangs_under_the_call(
        store: RunStore) -> None:
    result = run_agent("Mail Bob.", ScriptedModel([delegate(), "Mailed."]), planner([mail_bob(), "Sent."]),
                       store=store, approve=lambda call: True, tracer_provider=NoOpTracerProvider())
    assert result.status == "done"
    (child,) = store.children(result.run_id)
    parent, kid = store.get_run(result.run_id), store.get_run(child.run_id)
    assert kid.trace_id == parent.trace_id
    call = derived_span_id(result.run_id, "tool:p1")
    assert started(kid).parent_span_id == call
    rebuilt_parent, rebuilt_kid = rebuild_spans(parent), rebuild_spans(kid)
    (rebuilt_call,) = [s for s in rebuilt_parent if s.name == "execute_tool mailer"]
    (root,) = [s for s in rebuilt_kid if s.parent is None or s.name == "invoke_agent mailer"]
    assert span_id(rebuilt_call) == call == parent_id(root)
    assert rebuilt_call.attributes is not None
    assert rebuilt_call.attributes["runner.child_run_id"] == kid.run_id


def test_a_refused_call_of_a_sub_agent_names_its_target_but_no_child_run_live_and_rebuilt(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    model = ScriptedModel([delegate("bad", {"task": 5}), delegate(), "Mailed."])
    result = run_agent("Mail Bob.", model, planner([mail_bob(), "Sent."]), store=store, approve=lambda call: True,
                       tracer_provider=provider, agent_name="planner")
    assert result.status == "done"
    (child,) = store.children(result.run_id)
    spans = list(exporter.get_finished_spans())
    refused, performed = sorted((s for s in spans if s.name == "execute_tool mailer"), key=lambda s: s.start_time or 0)
    assert refused.attributes is not None
    assert performed.attributes is not None
    assert {k: refused.attributes.get(k) for k in (*TRANSFER, "runner.child_run_id", "runner.tool.ran")} == {
        **TRANSFER, "runner.child_run_id": None, "runner.tool.ran": False}
    assert performed.attributes["runner.child_run_id"] == child.run_id
    rebuilt = rebuild_spans(store.get_run(result.run_id)) + rebuild_spans(store.get_run(child.run_id))
    assert tree(rebuilt) == tree(spans)  # names, statuses, attributes and nesting, the child's under its call
    assert ids_of(rebuilt) == ids_of(spans)


def test_runner_spans_sends_a_run_with_its_sub_agents_runs_as_one_trace(
        tmp_path: Path, receiver: Receiver) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        result = run_agent("Mail Bob.", ScriptedModel([delegate(), "Mailed."]), planner([mail_bob(), "Sent."]),
                           store=store, approve=lambda call: True, tracer_provider=NoOpTracerProvider())
        (child,) = store.children(result.run_id)
        trace_id = store.get_run(result.run_id).trace_id
    sent = invoke("spans", result.run_id[:8], "--db", db, "--endpoint", f"{receiver.url}/v1/traces")
    assert sent.exit_code == 0, sent.output
    assert sent.stdout.splitlines() == [
        f"sent 6 spans of run {result.run_id} (trace {trace_id})",
        f"sent 6 spans of run {child.run_id}, sub-agent of run {result.run_id} (trace {trace_id})"]
    spans = receiver.spans()
    assert {s["trace_id"] for s in spans} == {trace_id}
    (call,) = [s for s in spans if s["name"] == "execute_tool mailer"]
    (root,) = [s for s in spans if s["name"] == "invoke_agent mailer"]
    assert root["parent"] == call["span_id"]
    assert {k: call["attrs"][k] for k in TRANSFER} == TRANSFER
    assert call["attrs"]["runner.child_run_id"] == child.run_id

    listed = json.loads(invoke("spans", child.run_id, result.run_id, "--db", db, "--json",
                               "--endpoint", f"{receiver.url}/v1/traces").stdout)
    assert [(item["run_id"], item["subagent_of"]) for item in listed] == [(child.run_id, None),
                                                                           (result.run_id, None)]


def test_a_child_run_by_the_async_driver_hangs_under_its_call_too(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    result = asyncio.run(arun_agent("Mail Bob.", ScriptedModel([delegate(), "Mailed."]),
                                    planner([mail_bob(), "Sent."]), store=store, approve=lambda call: True,
                                    tracer_provider=provider))
    assert result.status == "done"
    (child,) = store.children(result.run_id)
    spans = list(exporter.get_finished_spans())
    (call,) = [s for s in spans if s.name == "execute_tool mailer"]
    (root,) = [s for s in spans if s.name == "invoke_agent mailer"]
    assert parent_id(root) == span_id(call)
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    rebuilt = rebuild_spans(store.get_run(result.run_id)) + rebuild_spans(store.get_run(child.run_id))
    assert ids_of(rebuilt) == ids_of(spans)
