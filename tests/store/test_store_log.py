"""What a run leaves in the log: the events of the contract, in order, and the runs row."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.pool import QueuePool

from runner import Limits, ModelReply, ScriptedModel, StoreError, ToolCall, Usage, run_agent
from runner._log.decisions import decider
from runner.messages import reply_data as describe_reply
from runner.store import RunStore, derived_span_id, derived_trace_id
from runner.store.tables import events
from tests.loop.helpers import call, reply, weather_registry

RUN_ID = "0123456789abcdef0123456789abcdef"
SYSTEM = "Be brief."


def weather_run(store: RunStore, **kwargs: Any) -> Any:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "It is 21C in Paris."])
    return run_agent("Weather in Paris?", model, weather_registry(), system=SYSTEM, store=store,
                     run_id=RUN_ID, **kwargs)


def kinds(store: RunStore, run_id: str = RUN_ID) -> list[str]:
    return [e.kind for e in store.get_run(run_id).events]


def test_rebuilt_messages_equal_what_run_agent_returned(store: RunStore) -> None:
    result = weather_run(store)
    run = store.get_run(result.run_id)
    assert run.messages == result.messages
    assert len(run.messages) == 5


def test_events_are_the_contract_facts_in_order_with_contiguous_seq(store: RunStore) -> None:
    weather_run(store)
    run = store.get_run(RUN_ID)
    assert [e.kind for e in run.events] == [
        "run_started", "message", "message",
        "step_started", "message", "model_call", "tool_started", "tool_finished", "message", "step_finished",
        "step_started", "message", "model_call", "step_finished",
        "run_finished",
    ]
    assert [e.seq for e in run.events] == list(range(1, 16))
    assert [e.step for e in run.events] == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    ats = [e.at for e in run.events]
    assert ats == sorted(ats)
    assert all(at.utcoffset() == timedelta(0) for at in ats)


def test_event_payloads_follow_the_contract(store: RunStore) -> None:
    weather_run(store, labels={"env": "prod"}, agent_name="forecaster")
    run = store.get_run(RUN_ID)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in run.events:
        by_kind.setdefault(e.kind, []).append(e.data)
    specs = weather_registry().specs()
    assert by_kind["run_started"] == [{
        "task": "Weather in Paris?", "system": SYSTEM, "limits": Limits().to_dict(), "tool_specs": specs,
        "model": "scripted", "provider": "scripted", "agent_name": "forecaster", "labels": {"env": "prod"},
        "by": decider(),
    }]
    assert [d["index"] for d in by_kind["message"]] == [0, 1, 2, 3, 4]
    assert by_kind["message"][3]["message"] == {
        "role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": '{"celsius": 21}'}
    assert by_kind["step_started"] == [{"step": 1}, {"step": 2}]
    assert by_kind["step_finished"] == [{"step": 1}, {"step": 2}]
    first_call = by_kind["model_call"][0]
    assert set(first_call) == {"step", "prompt_tokens", "reply_tokens", "usage", "latency_s", "reply", "error",
                               "error_type"}
    assert first_call["step"] == 1
    assert first_call["usage"] is None
    assert first_call["error"] is None
    assert first_call["reply"] == describe_reply(reply("", call("c1", "get_weather", city="Paris")))
    assert by_kind["tool_started"] == [{"call_id": "c1", "name": "get_weather", "args": {"city": "Paris"}}]
    finished = by_kind["tool_finished"][0]
    assert {k: v for k, v in finished.items() if k != "duration_s"} == {
        "call_id": "c1", "name": "get_weather", "observation": '{"celsius": 21}', "ok": True, "ran": True}
    assert by_kind["run_finished"] == [{"status": "done", "answer": "It is 21C in Paris.", "steps": 2,
                                        "tokens": run.tokens, "tool_calls": 1, "error": None}]


def test_runs_row_carries_the_summary_of_a_finished_run(store: RunStore) -> None:
    result = weather_run(store, labels={"env": "prod", "team": "a"})
    run = store.get_run(RUN_ID)
    assert (run.run_id, run.status, run.answer, run.error) == (RUN_ID, "done", "It is 21C in Paris.", None)
    assert (run.steps, run.tokens, run.tool_calls) == (2, result.tokens, 1)
    assert (run.task, run.system, run.model, run.provider) == ("Weather in Paris?", SYSTEM, "scripted", "scripted")
    assert run.limits == Limits().to_dict()
    assert run.tool_specs == weather_registry().specs()
    assert run.labels == {"env": "prod", "team": "a"}
    assert run.trace_id == RUN_ID
    assert run.parent_run_id is None
    assert run.finished_at is not None
    assert run.finished_at >= run.started_at
    assert run.liveness == "finished"


def test_usage_reported_by_the_model_is_logged_and_counted(store: RunStore) -> None:
    model = ScriptedModel([ModelReply("hi", usage=Usage(100, 7))])
    result = run_agent("Say hi", model, weather_registry(), store=store)
    run = store.get_run(result.run_id)
    model_call = next(e for e in run.events if e.kind == "model_call")
    assert model_call.data["usage"] == {"input_tokens": 100, "output_tokens": 7}
    assert run.tokens == result.tokens == 107


def test_a_model_that_raises_leaves_a_model_error_run(store: RunStore) -> None:
    def broken(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down")

    result = run_agent("Anything?", broken, weather_registry(), store=store)
    run = store.get_run(result.run_id)
    assert (run.status, run.error) == ("model_error", "ConnectionError: api down")
    model_call = next(e for e in run.events if e.kind == "model_call")
    assert (model_call.data["reply"], model_call.data["error"], model_call.data["error_type"]) == (
        None, "ConnectionError: api down", "ConnectionError")
    assert run.messages == result.messages


def test_refused_calls_log_tool_finished_without_tool_started(store: RunStore) -> None:
    model = ScriptedModel([reply("", call("c1", "get_forecast", city="Paris")), "sorry"])
    result = run_agent("Forecast?", model, weather_registry(), store=store)
    run = store.get_run(result.run_id)
    assert "tool_started" not in [e.kind for e in run.events]
    finished = next(e for e in run.events if e.kind == "tool_finished")
    assert (finished.data["ran"], finished.data["ok"]) == (False, False)
    assert run.tool_calls == 0


def test_span_ids_are_derived_from_the_run_id_without_a_tracer(store: RunStore) -> None:
    weather_run(store)
    run = store.get_run(RUN_ID)
    expected_keys = ["run", "run", "run",
                     "step:1", "chat:1", "chat:1", "tool:c1", "tool:c1", "tool:c1", "step:1",
                     "step:2", "chat:2", "chat:2", "step:2",
                     "run"]
    assert [e.span_id for e in run.events] == [derived_span_id(RUN_ID, k) for k in expected_keys]
    assert run.trace_id == derived_trace_id(RUN_ID) == RUN_ID


def test_derived_ids_are_stable_hashes_of_the_run_id_and_span_key() -> None:
    assert derived_trace_id(RUN_ID) == RUN_ID  # a uuid4 hex is already a valid trace id
    assert derived_trace_id("not-hex") == hashlib.sha256(b"not-hex").hexdigest()[:32]
    assert derived_span_id(RUN_ID, "tool:c1") == hashlib.sha256(f"{RUN_ID}:tool:c1".encode()).hexdigest()[:16]
    assert derived_span_id(RUN_ID, "tool:c1") != derived_span_id(RUN_ID, "tool:c2")


def test_a_span_source_supplies_trace_and_span_ids(store: RunStore) -> None:
    class Source:
        trace_id = "f" * 32

        def __init__(self) -> None:
            self.n = 0

        def span_id_for(self, key: str) -> str:
            return {"run": "1" * 16, "step:1": "2" * 16, "chat:1": "3" * 16}[key]

    recorder = store.recorder(span_source=Source())
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), recorder=recorder)
    run = store.get_run(result.run_id)
    assert run.trace_id == "f" * 32
    assert [(e.kind, e.span_id) for e in run.events] == [
        ("run_started", "1" * 16), ("message", "1" * 16), ("message", "1" * 16), ("step_started", "2" * 16),
        ("message", "3" * 16), ("model_call", "3" * 16), ("step_finished", "2" * 16), ("run_finished", "1" * 16)]


def test_commits_once_per_model_call_and_tool_plus_the_finish(store: RunStore) -> None:
    before = store.committer.commits
    weather_run(store)
    assert store.committer.commits - before == 4  # model call 1, tool c1, model call 2, run_finished


def test_model_call_is_committed_before_the_model_is_called(store: RunStore) -> None:
    seen: list[tuple[str, list[str]]] = []

    def model(messages: Any, specs: Any) -> ModelReply:
        run = store.get_run(RUN_ID)
        seen.append((run.status, [e.kind for e in run.events]))
        return ModelReply("done")

    run_agent("Hi", model, weather_registry(), run_id=RUN_ID, store=store)
    assert seen == [("running", ["run_started", "message", "message", "step_started"])]


def test_tool_started_is_committed_before_the_tool_runs(store: RunStore) -> None:
    seen: list[str] = []
    registry = weather_registry()

    def probe() -> str:
        with store.engine.connect() as conn:
            rows = conn.execute(select(events.c.kind).where(events.c.run_id == RUN_ID)
                                .order_by(events.c.seq)).scalars().all()
        seen.extend(rows)
        return "ok"

    registry.register("probe", "Looks at the log.", {"type": "object", "properties": {}}, probe)
    model = ScriptedModel([reply("", ToolCall("p1", "probe", {})), "done"])
    run_agent("Probe", model, registry, run_id=RUN_ID, store=store, timeout_s=30)
    assert seen[-1] == "tool_started"
    assert seen[-4:] == ["step_started", "message", "model_call", "tool_started"]


def test_a_running_run_of_this_process_is_live(store: RunStore) -> None:
    liveness: list[str] = []

    def model(messages: Any, specs: Any) -> ModelReply:
        run = store.get_run(RUN_ID)
        liveness.append(run.liveness)
        liveness.append(run.status)
        return ModelReply("done")

    run_agent("Hi", model, weather_registry(), run_id=RUN_ID, store=store)
    assert liveness == ["live", "running"]
    assert store.get_run(RUN_ID).liveness == "finished"


def test_unknown_run_id_raises_store_error(store: RunStore) -> None:
    with pytest.raises(StoreError, match=r"^no run 'nope' in "):
        store.get_run("nope")


def test_find_run_resolves_a_unique_prefix(store: RunStore) -> None:
    weather_run(store)
    assert store.find_run("0123").run_id == RUN_ID
    assert store.resolve_run_id("0123456789abcdef0123456789abcdef") == RUN_ID
    with pytest.raises(StoreError, match=r"^no run 'ff' in "):
        store.find_run("ff")


def test_find_run_refuses_an_ambiguous_prefix(store: RunStore) -> None:
    for run_id in ("abc1" + "0" * 28, "abc2" + "0" * 28):
        run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), run_id=run_id, store=store)
    with pytest.raises(StoreError, match=r"^run id prefix 'abc' is ambiguous: abc10+, abc20+$"):
        store.find_run("abc")
    assert store.find_run("abc2").run_id == "abc2" + "0" * 28


def test_a_closed_store_refuses_reads(store: RunStore) -> None:
    store.close()
    with pytest.raises(StoreError, match=r"is closed$"):
        store.list_runs()


def test_a_failed_write_is_one_store_error_line(store: RunStore) -> None:
    run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), run_id=RUN_ID, store=store)
    with pytest.raises(StoreError) as caught:
        run_agent("Again", ScriptedModel(["hello"]), weather_registry(), run_id=RUN_ID, store=store)
    message = str(caught.value)
    assert message.startswith(f"cannot write run {RUN_ID} to the store: ")
    assert "\n" not in message
    assert store.get_run(RUN_ID).task == "Hi"
    pool = store.engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.checkedout() == 1  # the store's writer connection, nothing left behind by the failure
    run_agent("Third", ScriptedModel(["hello"]), weather_registry(), run_id="other", store=store)
    assert (pool.checkedout(), store.get_run("other").status) == (1, "done")
    store.close()
    assert pool.checkedout() == 0


def test_an_exact_run_id_wins_over_longer_ids_it_prefixes(store: RunStore) -> None:
    for run_id in ("1", "10", "11"):
        run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), run_id=run_id, store=store)
    assert store.find_run("1").run_id == "1"
    assert store.resolve_run_id("10") == "10"
    with pytest.raises(StoreError, match=r"^no run '12' in "):
        store.resolve_run_id("12")


def test_two_long_tool_names_sharing_the_column_width_do_not_break_the_run(store: RunStore) -> None:
    long_a, long_b = "a" * 200 + "1", "a" * 200 + "2"
    model = ScriptedModel([ModelReply("", [ToolCall("c1", long_a, {}), ToolCall("c2", long_b, {})]), "ok"])
    result = run_agent("t", model, weather_registry(), store=store)
    assert result.status == "done"
    assert store.get_run(result.run_id).status == "done"
    assert [r.run_id for r in store.list_runs(tool="a" * 200)] == [result.run_id]


def test_sqlite_timestamps_are_utc_text_whatever_zone_they_come_in() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from sqlalchemy.dialects import sqlite

    from runner.store.tables import UTCDateTime

    to_text = UTCDateTime().bind_processor(sqlite.dialect())
    paris = timezone(timedelta(hours=1))
    assert [to_text(value) for value in (
        datetime(2026, 12, 1, 2, 3, 4, 5, tzinfo=UTC), datetime(2026, 12, 1, 3, 3, 4, 5, tzinfo=paris),
        datetime(2026, 12, 1, 2, 3, 4, 5), datetime(2026, 12, 1, 2, 3, 4, tzinfo=UTC), None)] == [
        "2026-12-01 02:03:04.000005", "2026-12-01 02:03:04.000005", "2026-12-01 02:03:04.000005",
        "2026-12-01 02:03:04.000000", None]


def test_sqlite_timestamps_are_the_text_sqlalchemy_writes_even_on_a_whole_second() -> None:
    """Rows written before (by SQLAlchemy's own ``DATETIME``) and now must compare as text:
    ``02:03:04`` sorts before ``02:03:04.000000``, which broke keyset pagination on such rows."""
    from datetime import UTC, datetime

    from sqlalchemy.dialects import sqlite
    from sqlalchemy.dialects.sqlite import DATETIME

    from runner.store.tables import UTCDateTime

    ours = UTCDateTime().bind_processor(sqlite.dialect())
    theirs = DATETIME().bind_processor(sqlite.dialect())  # type: ignore[no-untyped-call]
    assert theirs is not None
    for naive in (datetime(2026, 12, 1, 2, 3, 4), datetime(2026, 12, 1, 2, 3, 4, 5), datetime(1999, 1, 2, 0, 0, 0)):
        assert ours(naive.replace(tzinfo=UTC)) == ours(naive) == theirs(naive)


def test_the_recorders_clock_gives_the_text_the_column_keeps_and_reads_back() -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy.dialects import sqlite

    from runner.store.clock import clock_for, utc_text
    from runner.store.tables import UTCDateTime

    column = UTCDateTime()
    before = datetime.now(UTC).replace(microsecond=0)
    texts = [utc_text() for _ in range(3)]
    after = datetime.now(UTC)
    read = [column.process_result_value(datetime.fromisoformat(t), sqlite.dialect()) or before for t in texts]
    assert all(len(t) == 26 and t[10] == " " and t[19] == "." for t in texts)
    assert texts == sorted(texts)
    assert all(before <= r <= after + timedelta(microseconds=1) for r in read)
    assert clock_for("sqlite") is utc_text
    server_now = clock_for("postgresql")()
    assert isinstance(server_now, datetime)
    assert server_now.tzinfo is UTC
