"""Hostile text and values on the loop's paths: a run always finishes and its log keeps what happened.

Lone surrogates and NUL cannot be stored as text everywhere (UTF-8 drivers refuse
surrogates, PostgreSQL refuses NUL): the event log keeps them exactly (JSON escapes
them), the summary columns hold a rendering: NUL dropped, a lone surrogate as U+FFFD.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from sqlalchemy import select

from runner import ModelReply, ScriptedModel, StoreError, ToolCall, ToolRegistry, replay, resume, run_agent
from runner._text import describe_exception, escape_surrogates, storable
from runner.cli import cli
from runner.events import Event, RunFinished, StepFinished, ToolStarted
from runner.recorder import NullRecorder
from runner.store import RunStore, open_store
from runner.store.tables import run_labels, run_tools, runs
from tests.loop.helpers import Calls, call, reply, weather_registry

RUN_ID = "hostile0" + "0" * 24
# A lone surrogate (JSON "\ud800" from a server) and NUL (PostgreSQL refuses it), with their summary rendering.
BAD = [pytest.param("\ud800", "\ufffd", id="surrogate"), pytest.param("\x00", "", id="nul")]


def column_row(store: RunStore, run_id: str = RUN_ID) -> dict[str, Any]:
    with store.engine.connect() as conn:
        row = dict(conn.execute(select(runs).where(runs.c.run_id == run_id)).mappings().one())
        row["labels"] = dict(conn.execute(select(run_labels.c.key, run_labels.c.value)
                                          .where(run_labels.c.run_id == run_id)).all())
        row["tools"] = sorted(conn.execute(select(run_tools.c.name).where(run_tools.c.run_id == run_id))
                              .scalars().all())
    return row


def hostile_run(store: RunStore, bad: str) -> Any:
    model = ScriptedModel([reply("", call(f"c1{bad}", f"t{bad}"), call("c2", "get_weather", city="Paris")),
                           f"answer {bad}"])
    return run_agent(f"task {bad}", model, weather_registry(), system=f"sys {bad}", store=store, run_id=RUN_ID,
                     labels={f"k{bad}": f"v{bad}"}, agent_name=f"agent{bad}")


# -- defect 1: text that is not valid Unicode ------------------------------------------------------


@pytest.mark.parametrize(("bad", "shown"), BAD)
def test_invalid_unicode_text_finishes_the_run_and_the_log_keeps_it_exactly(
        store: RunStore, bad: str, shown: str) -> None:
    result = hostile_run(store, bad)
    assert (result.status, result.answer, result.error) == ("done", f"answer {bad}", None)
    assert (result.messages[3]["tool_call_id"], result.messages[3]["content"]) == (
        f"c1{bad}", f"ERROR: unknown tool {'t' + bad!r}. Available tools: ['c_to_f', 'get_weather']")
    run = store.get_run(RUN_ID)
    assert run.messages == result.messages
    assert [e.kind for e in run.events][-4:] == ["message", "model_call", "step_finished", "run_finished"]
    assert (run.status, run.task, run.system, run.answer, run.agent_name, run.labels) == (
        "done", f"task {bad}", f"sys {bad}", f"answer {bad}", f"agent{bad}", {f"k{bad}": f"v{bad}"})
    row = column_row(store)
    assert (row["status"], row["task"], row["system"], row["answer"], row["agent_name"]) == (
        "done", f"task {shown}", f"sys {shown}", f"answer {shown}", f"agent{shown}")
    assert row["labels"] == {f"k{shown}": f"v{shown}"}
    assert row["tools"] == sorted(["get_weather", f"t{shown}"])
    assert [r.run_id for r in store.list_runs(text=f"answer {shown}")] == [RUN_ID]
    for found in (store.list_runs(text=f"answer {bad}"), store.list_runs(tool=f"t{bad}"),
                  store.list_runs(label=(f"k{bad}", f"v{bad}")), store.list_runs(label={f"k{bad}": f"v{bad}"})):
        assert [r.run_id for r in found] == [RUN_ID]


@pytest.mark.parametrize(("bad", "shown"), BAD)
def test_a_model_error_message_that_is_not_valid_unicode_is_logged(store: RunStore, bad: str, shown: str) -> None:
    def model(messages: Any, specs: Any) -> ModelReply:
        raise ValueError(f"server said {bad}")

    result = run_agent("t", model, ToolRegistry(), store=store, run_id=RUN_ID)
    assert (result.status, result.error) == ("model_error", f"ValueError: server said {bad}")
    run = store.get_run(RUN_ID)
    assert (run.status, run.error) == ("model_error", f"ValueError: server said {bad}")
    assert [e.kind for e in run.events][-3:] == ["model_call", "step_finished", "run_finished"]
    assert column_row(store)["error"] == f"ValueError: server said {shown}"


def test_tool_results_and_arguments_that_are_not_valid_unicode_reach_the_log(store: RunStore) -> None:
    registry = ToolRegistry()
    registry.register("echo", "d", {"type": "object", "properties": {"x": {"type": "string"}}},
                      lambda x: x + "\ud800")
    model = ScriptedModel([reply("", call("c1", "echo", x="\udfff\x00")), "ok"])
    result = run_agent("t", model, registry, store=store, run_id=RUN_ID)
    assert result.status == "done"
    assert result.messages[3]["content"] == '"\\udfff\\u0000\\ud800"'
    run = store.get_run(RUN_ID)
    assert run.messages == result.messages
    assert run.events[6].data["args"] == {"x": "\udfff\x00"}


def test_show_export_and_replay_work_on_a_run_with_invalid_unicode(store_url: str, tmp_path: Path) -> None:
    with open_store(store_url) as store:
        hostile_run(store, "\ud800\x00")
    shown = CliRunner().invoke(cli, ["show", RUN_ID[:8], "--db", store_url], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "answer \\ud800\n" in shown.stdout  # shown as its escape; NUL, a control character, is not shown
    as_json = CliRunner().invoke(cli, ["show", RUN_ID[:8], "--db", store_url, "--json"], catch_exceptions=False)
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["events"][-1]["data"]["answer"] == "answer \ud800\x00"
    target = tmp_path / "hostile.json"
    exported = CliRunner().invoke(cli, ["export", RUN_ID[:8], "-o", str(target), "--db", store_url],
                                  catch_exceptions=False)
    assert exported.exit_code == 0, exported.output
    fixture = json.loads(target.read_text(encoding="utf-8"))
    assert (fixture["task"], fixture["outcome"]["answer"]) == ("task \ud800\x00", "answer \ud800\x00")
    report = replay(target, weather_registry())
    assert (report.ok, report.result.answer) == (True, "answer \ud800\x00")
    replayed = CliRunner().invoke(cli, ["replay", str(target), "--tools", "tests.loop.helpers:weather_registry"],
                                  catch_exceptions=False)
    assert replayed.exit_code == 0, replayed.output


def test_names_longer_than_their_column_are_cut_in_the_summary_only(store: RunStore) -> None:
    class Model:
        model_name = "m" * 300

        def __call__(self, messages: Any, specs: Any) -> ModelReply:
            return ModelReply("" if len(messages) == 2 else "ok", [] if len(messages) > 2 else [
                ToolCall("c1", "t" * 300, {})])

    labels = {"k" * 200 + "1": "first", "k" * 200 + "2": "second"}
    result = run_agent("t", Model(), ToolRegistry(), store=store, run_id=RUN_ID, agent_name="a" * 300, labels=labels)
    assert result.status == "done"
    run = store.get_run(RUN_ID)
    assert (run.status, run.model, run.agent_name, run.labels) == ("done", "m" * 300, "a" * 300, labels)
    row = column_row(store)
    assert (row["model"], row["agent_name"], row["labels"], row["tools"]) == (
        "m" * 200, "a" * 200, {"k" * 200: "first"}, ["t" * 200])
    assert [r.run_id for r in store.list_runs(tool="t" * 300, label=("k" * 201, "first"))] == [RUN_ID]


def test_a_stop_reason_that_is_not_a_string_is_an_invalid_reply() -> None:
    result = run_agent("t", ScriptedModel([ModelReply("hi", stop_reason=["length"])]),  # type: ignore[arg-type]
                       ToolRegistry())
    assert (result.status, result.error) == ("invalid_reply", "reply stop_reason must be a string or None, got list")


def test_escape_surrogates_keeps_the_json_and_makes_it_encodable() -> None:
    data = {"a\ud800": ["\udfff x", "é\U0001f600"]}
    written = escape_surrogates(json.dumps(data, ensure_ascii=False))
    assert written == '{"a\\ud800": ["\\udfff x", "é\U0001f600"]}'
    assert json.loads(written.encode("utf-8").decode("utf-8")) == data


@pytest.mark.parametrize(("text", "expected"), [
    ("plain", "plain"), ("a\x00b\x00", "ab"), ("\x00\ud800", "\ufffd"), ("\ud800\udc00", "\ufffd\ufffd"),
    ("é\U0001f600", "é\U0001f600"),
    (None, None)])
def test_storable_replaces_what_a_backend_cannot_store(text: str | None, expected: str | None) -> None:
    assert storable(text) == expected


# -- defect 1: a failure while closing a run still closes it ---------------------------------------


class RaisingAtClose(NullRecorder):
    """A recorder that raises on ``step_finished``: the close of a one-step run fails half way."""

    def record(self, event: Event) -> None:
        if isinstance(event, StepFinished):
            raise RuntimeError("recorder broke")


def test_a_recorder_failing_while_the_run_closes_still_closes_it(store: RunStore) -> None:
    with pytest.raises(RuntimeError, match=r"^recorder broke$"):
        run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store, run_id=RUN_ID, recorder=RaisingAtClose())
    run = store.get_run(RUN_ID)
    assert (run.status, run.answer, run.error) == ("done", "hi", None)
    assert [e.kind for e in run.events][-3:] == ["model_call", "step_finished", "run_finished"]


class RaisingOn(NullRecorder):
    """A caller's recorder that raises on one kind of fact (the store, listed first, has taken it)."""

    def __init__(self, kind: type[Event]) -> None:
        self.kind = kind

    def record(self, event: Event) -> None:
        if isinstance(event, self.kind):
            raise RuntimeError("dashboard down")


def test_a_recorder_failing_on_run_finished_still_leaves_the_run_closed_in_the_log(store: RunStore) -> None:
    calls = Calls()
    registry = weather_registry(calls)
    with pytest.raises(RuntimeError, match=r"^dashboard down$"):
        run_agent("t", ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "warm"]), registry,
                  store=store, run_id=RUN_ID, recorder=RaisingOn(RunFinished))
    run = store.get_run(RUN_ID)
    assert (run.status, run.answer, run.liveness, run.steps) == ("done", "warm", "finished", 2)
    assert [e.kind for e in run.events][-4:] == ["message", "model_call", "step_finished", "run_finished"]
    assert [e.kind for e in run.events].count("run_finished") == 1
    assert calls.names() == ["get_weather"]


def test_a_recorder_failing_on_tool_started_leaves_the_call_not_run_and_a_resume_runs_it_once(
        store: RunStore) -> None:
    paid: list[int] = []
    registry = ToolRegistry()
    def pay(cents: int) -> str:
        paid.append(cents)
        return "paid"

    registry.register("pay", "Pay.", {"type": "object", "properties": {"cents": {"type": "integer"}},
                                      "required": ["cents"]}, pay, side_effects=True)
    with pytest.raises(RuntimeError, match=r"^dashboard down$"):
        run_agent("t", ScriptedModel([reply("", call("c1", "pay", cents=5))]), registry, store=store, run_id=RUN_ID,
                  recorder=RaisingOn(ToolStarted))
    run = store.get_run(RUN_ID)
    assert (run.status, run.error) == ("cancelled", "aborted by RuntimeError: dashboard down")
    finished = [e.data for e in run.events if e.kind == "tool_finished"]
    assert [(f["call_id"], f["ran"], f["refused"]) for f in finished] == [("c1", False, "not_run")]
    assert paid == []
    seen: list[str] = []

    def model(messages: Any, specs: Any) -> ModelReply:
        seen.append(messages[-1]["content"])
        return reply("", call("c2", "pay", cents=5)) if len(seen) == 1 else ModelReply("paid once")

    result = resume(store, RUN_ID, model, registry)
    assert (result.status, result.answer, paid) == ("done", "paid once", [5])
    assert seen[0] == ("ERROR: not run: the run was aborted by RuntimeError: dashboard down before the call was made")


def test_a_resume_with_something_that_is_not_a_recorder_is_refused_before_it_takes_the_run(
        store: RunStore) -> None:
    registry = weather_registry()
    stopped = run_agent("t", ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))]), registry,
                        store=store, run_id=RUN_ID, max_tool_calls=0)
    before = [e.kind for e in store.get_run(RUN_ID).events]
    with pytest.raises(TypeError, match=r"^recorder must have record\(event\) and sync\(\) methods, got object$"):
        resume(store, stopped.run_id, ScriptedModel(["warm"]), registry, recorder=object())  # type: ignore[arg-type]
    run = store.get_run(RUN_ID)
    assert (run.status, [e.kind for e in run.events]) == ("tool_budget", before)
    assert resume(store, RUN_ID, ScriptedModel(["warm"]), registry, max_tool_calls=1).status == "done"


class RaisingOnRunEnd(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("invoke_agent"):
            raise RuntimeError("span processor broke")


def test_a_tracer_failing_to_end_the_run_span_still_closes_the_stored_run(
        store: RunStore, caplog: pytest.LogCaptureFixture) -> None:
    """Spans are handed over off the run's thread: a processor's failure is logged, never the run's."""
    provider = TracerProvider()
    provider.add_span_processor(RaisingOnRunEnd())
    with caplog.at_level(logging.ERROR, logger="runner"):
        result = run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store, run_id=RUN_ID,
                           tracer_provider=provider)
    provider.shutdown()
    assert (result.status, result.answer) == ("done", "hi")
    run = store.get_run(RUN_ID)
    assert (run.status, run.answer) == ("done", "hi")
    assert [e.kind for e in run.events].count("run_finished") == 1
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"run {RUN_ID}: a span processor failed: RuntimeError: span processor broke"]


def test_a_store_that_fails_the_closing_commit_once_is_closed_by_the_retry(tmp_path: Path) -> None:
    """The closing commit meets a locked database; the lock is gone when the loop retries."""
    import sqlite3

    path = tmp_path / "runs.db"
    store = open_store(path, busy_timeout_s=0.05)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)  # a stored run calls its model off
    # this thread (a cancel request may abandon the call), and the model takes the lock

    def model(messages: Any, specs: Any) -> ModelReply:
        holder.execute("BEGIN IMMEDIATE")  # held while the run closes
        return ModelReply("hi")

    class Release(NullRecorder):
        """Lets the lock go when the loop retries closing the run (the second ``run_finished``)."""

        told = 0

        def record(self, event: Event) -> None:
            if isinstance(event, RunFinished):
                self.told += 1
                if self.told == 2 and holder.in_transaction:
                    holder.execute("ROLLBACK")

    with pytest.raises(StoreError, match=rf"^cannot write run {RUN_ID} to the store: database is locked$"):
        run_agent("t", model, ToolRegistry(), store=store, run_id=RUN_ID, recorder=Release())
    holder.close()
    run = store.get_run(RUN_ID)
    assert (run.status, run.answer) == ("done", "hi")
    assert [e.kind for e in run.events].count("run_finished") == 1
    store.close()


def test_ctrl_c_from_a_tool_is_not_swallowed_and_closes_the_run_cancelled(store: RunStore) -> None:
    registry = ToolRegistry()

    def interrupt() -> None:
        raise KeyboardInterrupt

    registry.register("interrupt", "d", {"type": "object", "properties": {}}, interrupt)
    for run_id, timeout_s in ((RUN_ID, None), ("hostile1" + "0" * 24, 5.0)):
        with pytest.raises(KeyboardInterrupt):
            run_agent("t", ScriptedModel([reply("", call("c1", "interrupt"))]), registry, store=store,
                      run_id=run_id, timeout_s=timeout_s)
        run = store.get_run(run_id)
        assert (run.status, run.error) == ("cancelled", "aborted by KeyboardInterrupt")


# -- defect 4: deep or non-JSON arguments ------------------------------------------------------------


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_arguments_nested_too_deep_are_an_invalid_reply_and_no_tool_starts(store: RunStore) -> None:
    calls = Calls()
    registry = ToolRegistry()

    def take(x: list[Any]) -> int:
        calls.log.append(("take", {}))
        return 1

    registry.register("take", "d", {"type": "object", "properties": {"x": {"type": "array"}}}, take)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "take", x=nested(700))), "ok"]), registry,
                       store=store, run_id=RUN_ID)
    assert (result.status, result.error) == (
        "invalid_reply", "tool call 'c1' has arguments nested deeper than 100 levels")
    assert calls.log == []
    kinds = [e.kind for e in store.get_run(RUN_ID).events]
    assert "tool_started" not in kinds
    assert kinds[-3:] == ["model_call", "step_finished", "run_finished"]


def test_arguments_at_the_depth_limit_run_and_one_level_more_do_not() -> None:
    registry = ToolRegistry()
    registry.register("take", "d", {"type": "object", "properties": {"x": {"type": "array"}}}, lambda x: len(x))
    result = run_agent("t", ScriptedModel([reply("", call("c1", "take", x=nested(99))), "ok"]), registry)
    assert (result.status, result.messages[3]["content"]) == ("done", "1")  # the args object + 99 arrays
    result = run_agent("t", ScriptedModel([reply("", call("c1", "take", x=nested(100))), "ok"]), registry)
    assert (result.status, result.error) == (
        "invalid_reply", "tool call 'c1' has arguments nested deeper than 100 levels")


@pytest.mark.parametrize(("args", "what"), [
    ({"x": [{1: "a", "b": 2}]}, "a key that is not a string: 1"),
    ({"x": [{None: 1}]}, "a key that is not a string: None"),
    ({"x": [float("nan")]}, "a number that is not finite: nan"),
    ({"x": [object]}, "a value of type type"),
])
def test_arguments_that_are_not_json_data_are_an_invalid_reply(args: dict[str, Any], what: str) -> None:
    registry = ToolRegistry()
    registry.register("take", "d", {"type": "object", "properties": {"x": {"type": "array"}}}, lambda x: 1)
    result = run_agent("t", ScriptedModel([ModelReply("", [ToolCall("c1", "take", args)]), "ok"]), registry)
    assert (result.status, result.error) == ("invalid_reply", f"tool call 'c1' has arguments that are not JSON: {what}")


def test_a_call_whose_name_has_a_hostile_repr_is_an_invalid_reply() -> None:
    class Name:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    result = run_agent("t", ScriptedModel([ModelReply("", [ToolCall("", Name(), {})])]),  # type: ignore[arg-type]
                       ToolRegistry())
    assert (result.status, result.error) == ("invalid_reply", "tool call has no id")


# -- defect 13: exceptions whose __str__ raises --------------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_a_tool_exception_whose_str_raises_is_an_error_observation(store: RunStore) -> None:
    registry = ToolRegistry()

    def fail() -> None:
        raise Unprintable

    registry.register("fail", "d", {"type": "object", "properties": {}}, fail)
    result = run_agent("t", ScriptedModel([reply("", call("c1", "fail")), "ok"]), registry, store=store,
                       run_id=RUN_ID)
    assert result.status == "done"
    assert result.messages[3]["content"] == "ERROR: fail failed: Unprintable: <str() failed: RuntimeError>"
    assert store.get_run(RUN_ID).status == "done"


def test_a_model_exception_whose_str_raises_is_a_model_error(store: RunStore) -> None:
    def model(messages: Any, specs: Any) -> ModelReply:
        raise Unprintable

    result = run_agent("t", model, ToolRegistry(), store=store, run_id=RUN_ID)
    assert (result.status, result.error) == ("model_error", "Unprintable: <str() failed: RuntimeError>")
    assert store.get_run(RUN_ID).status == "model_error"


def test_an_unprintable_exception_that_aborts_a_run_still_closes_it(store: RunStore) -> None:
    class UnprintableInterrupt(KeyboardInterrupt):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    def model(messages: Any, specs: Any) -> ModelReply:
        raise UnprintableInterrupt

    with pytest.raises(UnprintableInterrupt):
        run_agent("t", model, ToolRegistry(), store=store, run_id=RUN_ID)
    run = store.get_run(RUN_ID)
    assert (run.status, run.error) == ("cancelled", "aborted by UnprintableInterrupt: <str() failed: RuntimeError>")


@pytest.mark.parametrize(("exc", "expected"), [
    (KeyError("Atlantis"), "KeyError: 'Atlantis'"),
    (StopIteration(), "StopIteration"),
    (Unprintable(), "Unprintable: <str() failed: RuntimeError>"),
    (ValueError("two\nlines"), "ValueError: two\nlines"),
])
def test_describe_exception(exc: BaseException, expected: str) -> None:
    assert describe_exception(exc) == expected


def test_a_tool_result_whose_encoding_raises_is_an_error_observation(store: RunStore) -> None:
    class Hostile(dict[str, int]):
        def items(self) -> Any:
            raise KeyError("boom")

    registry = ToolRegistry()
    registry.register("hostile", "d", {"type": "object", "properties": {}}, lambda: Hostile(a=1))
    result = run_agent("t", ScriptedModel([reply("", call("c1", "hostile")), "ok"]), registry, store=store,
                       run_id=RUN_ID)
    assert result.status == "done"
    assert result.messages[3]["content"] == (
        "ERROR: hostile returned a value that is not JSON-serialisable: KeyError: 'boom'")
    assert store.get_run(RUN_ID).status == "done"


def test_an_event_whose_data_is_not_json_is_one_store_error_line(store: RunStore, store_url: str) -> None:
    from sqlalchemy import insert

    from runner.store.tables import events

    run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store, run_id=RUN_ID)
    last = store.get_run(RUN_ID).events[-1]
    with store.engine.begin() as conn:  # written by something other than runner
        conn.execute(insert(events), [{"run_id": RUN_ID, "seq": last.seq + 1, "at": last.at, "step": 1,
                                       "kind": "message", "data": "{not json", "span_id": None}])
    wrong = (f"run {RUN_ID}: event {last.seq + 1} holds data that is not JSON (Expecting property name enclosed in "
             "double quotes: line 1 column 2 (char 1)); the log was written by something other than runner")
    with pytest.raises(StoreError, match=f"^{re.escape(wrong)}$"):
        store.get_run(RUN_ID)
    result = CliRunner().invoke(cli, ["show", RUN_ID, "--db", store_url])
    assert (result.exit_code, result.stderr) == (3, f"Error: {wrong}\n")
