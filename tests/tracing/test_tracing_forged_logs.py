"""Forged or damaged logs rebuild into sensible span trees: a span whose parent is not open goes under
the run's root, or is a root itself; never a traceback (``rebuild_spans``, ``runner spans``, a resume)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import insert, select

from runner import ModelReply, ScriptedModel, ToolCall, resume, run_agent
from runner.cli import cli
from runner.events import (
    Event,
    EventDecodeError,
    ModelCalled,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
    decode,
    encode,
)
from runner.store import RunStore
from runner.store.tables import events, runs
from runner.tracing import derived_span_id, rebuild_spans
from tests.tracing.helpers import RUN_ID, Receiver, registry

Rows = list[dict[str, Any]]
FORGED = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"


def _run(store: RunStore) -> Rows:
    """A two-step run with a tool call, stored; its ``events`` rows."""
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})]), "21C"])
    assert run_agent("Weather?", model, registry(), store=store, run_id=RUN_ID).status == "done"
    with store.engine.connect() as conn:
        found = conn.execute(select(events).where(events.c.run_id == RUN_ID).order_by(events.c.seq))
        return [dict(row._mapping) for row in found]


def _rewrite(store: RunStore, rows: Rows, **run_columns: Any) -> None:
    """Store the run again as ``FORGED`` with the log ``rows``, numbered from 1 (as something other than runner).

    The log is append-only: the forged copy is a run of its own.
    """
    with store.engine.begin() as conn:
        run = conn.execute(select(runs).where(runs.c.run_id == RUN_ID)).one()
        conn.execute(insert(runs), [dict(run._mapping, run_id=FORGED, **{"trace_id": FORGED, **run_columns})])
        conn.execute(insert(events), [dict(row, run_id=FORGED, seq=seq) for seq, row in enumerate(rows, 1)])


def _row(after: dict[str, Any], fact: Event) -> dict[str, Any]:
    kind, data = encode(fact)
    return dict(after, step=getattr(fact, "step", 0), kind=kind, data=json.dumps(data), span_id=None)


def _kinds_removed(*kinds: str) -> Callable[[Rows], Rows]:
    return lambda rows: [row for row in rows if row["kind"] not in kinds]


def _step_after_the_end(rows: Rows) -> Rows:
    """A third step's facts after ``run_finished``: their root is closed."""
    last = rows[-1]
    return [*rows, _row(last, StepStarted(step=3)), _row(last, ModelCalled(step=3, prompt_tokens=5, latency_s=0.5)),
            _row(last, ToolStarted(step=3, call_id="c9", name="get_weather", args={})),
            _row(last, ToolFinished(step=3, call_id="c9", name="get_weather", observation="x", ok=True)),
            _row(last, StepFinished(step=3))]


def _a_part_without_run_resumed(rows: Rows) -> Rows:
    """The first step's rows again after ``run_finished``, span ids and all: a part no ``run_resumed`` began."""
    first_step = [row for row in rows if row["step"] == 1 and row["kind"] != "run_started"]
    return [*rows, *(dict(row, at=rows[-1]["at"]) for row in first_step)]


FORGERIES: dict[str, Callable[[Rows], Rows]] = {
    "no step_started nor tool_started": _kinds_removed("step_started", "tool_started"),
    "no run_started": _kinds_removed("run_started"),
    "facts after run_finished": _step_after_the_end,
    "a part without run_resumed": _a_part_without_run_resumed,
}


def _check_tree(spans: list[ReadableSpan]) -> None:
    """Every span's parent is one of the run's spans, or it is a root; every span ended."""
    ids = {span.context.span_id for span in spans if span.context is not None}
    for span in spans:
        assert span.parent is None or span.parent.span_id in ids, span.name
        assert span.end_time is not None


@pytest.mark.parametrize("forge", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forged_log_rebuilds_into_a_sensible_tree(store: RunStore, forge: Callable[[Rows], Rows]) -> None:
    _rewrite(store, forge(_run(store)))
    spans = rebuild_spans(store.get_run(FORGED))
    _check_tree(spans)
    assert "chat scripted" in [span.name for span in spans]


def test_spans_whose_step_is_not_open_go_under_the_root(store: RunStore) -> None:
    _rewrite(store, _kinds_removed("step_started", "tool_started")(_run(store)))
    spans = rebuild_spans(store.get_run(FORGED))
    root = next(span for span in spans if span.name == "invoke_agent")
    assert root.parent is None
    assert root.context is not None
    under_root = sorted(span.name for span in spans if span.parent is not None
                        and span.parent.span_id == root.context.span_id)
    assert under_root == ["chat scripted", "chat scripted", "execute_tool get_weather"]


def test_a_step_after_the_runs_end_is_a_root_of_its_own(store: RunStore) -> None:
    _rewrite(store, _step_after_the_end(_run(store)))
    spans = rebuild_spans(store.get_run(FORGED))
    roots = sorted(span.name for span in spans if span.parent is None)
    assert roots == ["invoke_agent", "step 3"]
    step3 = next(span for span in spans if span.name == "step 3")
    assert step3.context is not None
    assert sorted(span.name for span in spans if span.parent is not None
                  and span.parent.span_id == step3.context.span_id) == ["chat scripted", "execute_tool get_weather"]


@pytest.mark.parametrize("forge", FORGERIES.values(), ids=FORGERIES.keys())
def test_runner_spans_sends_a_forged_log_without_a_traceback(store: RunStore, store_url: str, receiver: Receiver,
                                                             forge: Callable[[Rows], Rows]) -> None:
    _rewrite(store, forge(_run(store)))
    result = CliRunner().invoke(cli, ["spans", FORGED, "--db", store_url, "--json",
                                      "--endpoint", f"{receiver.url}/v1/traces"])
    assert result.exit_code == 0, result.output
    sent = json.loads(result.stdout)
    assert [(item["run_id"], item["spans"]) for item in sent] == [(FORGED, len(receiver.spans()))]
    assert sent[0]["spans"] > 0


def _resumed_cleanly(store: RunStore, provider: TracerProvider, exporter: InMemorySpanExporter,
                     caplog: pytest.LogCaptureFixture) -> list[ReadableSpan]:
    """Resume the forged run traced: it ends ``done`` with no error logged; its spans, a well-formed tree."""
    with caplog.at_level(logging.ERROR, logger="runner"):
        result = resume(store, FORGED, ScriptedModel(["again"]), registry(), tracer_provider=provider)
    assert result.status == "done"
    assert [record.getMessage() for record in caplog.records] == []
    spans = list(exporter.get_finished_spans())
    _check_tree(spans)
    return spans


# The run row of a run whose process died long ago, mid-run: a resume takes it over.
KILLED: dict[str, object] = {"status": "running", "answer": None, "finished_at": None, "owner": "a-host-long-gone:1@0",
                             "heartbeat_at": dt.datetime(2000, 1, 1, tzinfo=dt.UTC)}


def test_resuming_a_forged_log_with_tracing_sends_its_dead_parts_spans(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture) -> None:
    """The live builder replays the stored part first (on the span thread): a forged one must not stop it."""
    provider, exporter = live
    _rewrite(store, _kinds_removed("step_started", "run_finished")(_run(store)), **KILLED)
    spans = _resumed_cleanly(store, provider, exporter, caplog)
    assert sorted(span.name for span in spans if span.parent is None) == ["invoke_agent"]
    assert sorted(span.name for span in spans).count("chat scripted") >= 2


BAD_SPAN_IDS = ["zz", "0000000000000000", "ABCDEF0123456789", "0123456789abcdeg", "", "-123456789abcdef"]


def _bad_span_ids(rows: Rows) -> Rows:
    """Each row's span id one of ``BAD_SPAN_IDS`` in turn; ``run_started``'s parent span and link all zeros."""
    out = []
    for n, row in enumerate(rows):
        row = dict(row, span_id=BAD_SPAN_IDS[n % len(BAD_SPAN_IDS)])
        if row["kind"] == "run_started":
            data = json.loads(row["data"])
            data.update(parent_span_id="0" * 16, linked_span=f"{'0' * 32}:{'0' * 16}")
            row["data"] = json.dumps(data)
        out.append(row)
    return out


def test_span_and_trace_ids_that_are_not_valid_are_derived_instead(store: RunStore) -> None:
    _rewrite(store, _bad_span_ids(_run(store)), trace_id="zz")
    spans = rebuild_spans(store.get_run(FORGED))
    _check_tree(spans)
    assert {span.context.trace_id for span in spans if span.context is not None} == {int(FORGED, 16)}
    root = next(span for span in spans if span.name == "invoke_agent")
    assert root.context is not None
    assert (root.parent, root.links) == (None, ())
    assert format(root.context.span_id, "016x") == derived_span_id(FORGED, "run")
    assert all(span.context is not None and span.context.is_valid for span in spans)


def test_resuming_a_run_whose_logged_ids_are_not_valid_traces_it_under_derived_ones(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture) -> None:
    provider, exporter = live
    _rewrite(store, _bad_span_ids(_kinds_removed("run_finished")(_run(store))), **KILLED, trace_id="zz")
    spans = _resumed_cleanly(store, provider, exporter, caplog)
    assert {span.context.trace_id for span in spans if span.context is not None} == {int(FORGED, 16)}
    roots = [span for span in spans if span.name.startswith("invoke_agent")]
    assert [format(span.context.span_id, "016x") for span in roots if span.parent is None and span.context] == [
        derived_span_id(FORGED, "run")]


@pytest.mark.parametrize("latency", ["1e300", "NaN", "-Infinity", "-5"])
def test_a_forged_model_call_latency_is_one_error_line_not_a_traceback(store: RunStore, store_url: str,
                                                                       receiver: Receiver, latency: str) -> None:
    def forged(rows: Rows) -> Rows:
        return [dict(row, data=row["data"].replace('"latency_s":', f'"latency_s":{latency},"was":'))
                if row["kind"] == "model_call" else row for row in rows]

    _rewrite(store, forged(_run(store)))
    result = CliRunner().invoke(cli, ["spans", FORGED, "--db", store_url, "--endpoint", f"{receiver.url}/v1/traces"])
    assert result.exit_code == 3, result.output
    assert len(result.stderr.splitlines()) == 1
    assert "latency_s must be a number of seconds from 0 to a year" in result.stderr
    assert receiver.spans() == []


WRONG_TYPES = {
    "tool specs that are not objects": ("run_started", {"tool_specs": [1, "x"]}, "tool_specs"),
    "tool specs that are a string": ("run_started", {"tool_specs": "abc"}, "tool_specs"),
    "a model that is an object": ("run_started", {"model": {"x": 1}}, "model"),
    "labels that are a list": ("run_started", {"labels": [1]}, "labels"),
    "a tool name that is a list": ("tool_started", {"name": [1]}, "name"),
    "a step that is text": ("step_started", {"step": "x"}, "step"),
    "a reason that is a number": ("run_resumed", {"reason": 5}, "reason"),
}


@pytest.mark.parametrize(("kind", "data", "field"), WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_field_of_the_wrong_type_is_one_malformed_line_not_a_traceback(kind: str, data: dict[str, Any],
                                                                         field: str) -> None:
    """What the spans are made of must have the type the fact says: else the row is not one of its facts."""
    base: dict[str, dict[str, Any]] = {
        "run_started": {"task": "t", "system": "s", "limits": {}, "tool_specs": [], "model": "m"},
        "tool_started": {"call_id": "c1", "name": "n", "args": {}}, "step_started": {"step": 1},
        "run_resumed": {"owner": "o", "reason": "r", "limits": {}, "decisions": {}}}
    assert decode(kind, base[kind])  # well-formed without the forged field
    with pytest.raises(EventDecodeError, match=f"^{kind} event is malformed: {field} must be "):
        decode(kind, {**base[kind], **data})


def test_runner_spans_of_a_log_with_tool_specs_that_are_not_objects_is_one_error_line(
        store: RunStore, store_url: str, receiver: Receiver) -> None:
    def forged(rows: Rows) -> Rows:
        return [dict(row, data=json.dumps({**json.loads(row["data"]), "tool_specs": [1]}))
                if row["kind"] == "run_started" else row for row in rows]

    _rewrite(store, forged(_run(store)))
    result = CliRunner().invoke(cli, ["spans", FORGED, "--db", store_url, "--endpoint", f"{receiver.url}/v1/traces"])
    assert (result.exit_code, len(result.stderr.splitlines())) == (3, 1), result.output
    assert "run_started event is malformed: tool_specs must be" in result.stderr


def test_a_span_started_twice_loses_neither(store: RunStore) -> None:
    """A forged second ``tool_started`` of a call still open: the first span ends where the second starts."""
    def twice(rows: Rows) -> Rows:
        at = next(n for n, row in enumerate(rows) if row["kind"] == "tool_started")
        return [*rows[:at + 1], dict(rows[at], span_id="1111111111111111"), *rows[at + 1:]]

    _rewrite(store, twice(_run(store)))
    spans = rebuild_spans(store.get_run(FORGED))
    _check_tree(spans)
    assert [span.name for span in spans].count("execute_tool get_weather") == 2
