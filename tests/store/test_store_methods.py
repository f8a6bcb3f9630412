"""The RunStore methods the CLI and the pool read and write through: the queue, short ids, refused
calls, activity, run starts, decoded facts, and their errors (RunNotFound, StoreError), on each backend."""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, insert, select

from runner import RunNotFound, ScriptedModel, StoreError, fork, run_agent
from runner._log.statuses import Status
from runner._log.tally import RUN, STATUS, STEP, TOOL, Key
from runner.events import (
    MessageAppended,
    RunFinished,
    RunQueued,
    RunStarted,
    ToolFinished,
    decode_all,
)
from runner.pool.agents import PoolError
from runner.pool.queued import record_queued, request_cancel
from runner.store import DEFAULT_QUEUE, RunFilter, RunStore, derived_trace_id, open_store
from runner.store.tables import runs
from tests.loop.helpers import call, reply, weather_registry

RUNNER = Path(__file__).resolve().parents[2] / "runner"


def weather_run(store: RunStore, run_id: str, *calls: str) -> str:
    """A run whose model calls ``calls`` (tool names) in one reply, then answers."""
    first = reply("", *(call(f"c{i}", name, city="Paris") for i, name in enumerate(calls)))
    return run_agent("Weather?", ScriptedModel([first, "done"]), weather_registry(), run_id=run_id,
                     store=store).run_id


def queued(run_id: str, *, queue: str | None = None, agent: str = "tipper") -> RunQueued:
    return RunQueued(run_id=run_id, task="job", agent_name=agent, limits={"max_steps": 3}, labels={"team": "a"},
                     queue=queue)


def test_find_run_and_resolve_run_id_raise_run_not_found_for_a_missing_run(store: RunStore) -> None:
    weather_run(store, "ab" + "0" * 30)
    for missing in ("ff", "ab1", "a\ud800"):
        with pytest.raises(RunNotFound, match=f"^{re.escape(f'no run {missing!r} in ')}"):
            store.find_run(missing)
        with pytest.raises(RunNotFound):
            store.resolve_run_id(missing)
    weather_run(store, "ab" + "1" * 30)
    with pytest.raises(StoreError, match="is ambiguous") as ambiguous:
        store.find_run("ab")
    assert not isinstance(ambiguous.value, RunNotFound)  # both runs exist: it is not "no such run"


def test_get_run_decodes_the_log_once_into_facts_in_event_order(store: RunStore) -> None:
    run = store.get_run(weather_run(store, "f" * 32, "get_weather"))
    assert isinstance(run.facts, tuple)
    assert list(run.facts) == decode_all(run.events, run.run_id)
    assert [type(fact) for fact in run.facts][:2] == [RunStarted, MessageAppended]
    assert isinstance(run.facts[-1], RunFinished)
    assert run.messages == [fact.message for fact in run.facts if isinstance(fact, MessageAppended)]


def test_queue_run_records_a_queued_row_like_a_started_one_and_its_fact(store: RunStore) -> None:
    long_agent = "a" * 250  # cut to the name column's width, as the recorder cuts a started run's
    store.queue_run(RunQueued(run_id="q" * 32, task="job\ud800", agent_name=long_agent, limits={"max_steps": 3},
                              labels={"team": "a"}, queue="gpu"))
    run = store.get_run("q" * 32)
    assert (run.status, run.owner, run.steps, run.heartbeat_at, run.finished_at) == (Status.QUEUED, None, 0, None, None)
    assert (run.trace_id, run.limits, run.tool_specs, run.model) == (derived_trace_id("q" * 32), {"max_steps": 3},
                                                                       [], "")
    listed = store.list_runs(label=("team", "a"))
    assert [(r.run_id, r.agent_name, r.task) for r in listed] == [("q" * 32, "a" * 200, "job\ufffd")]
    assert run.facts == (RunQueued(run_id="q" * 32, task="job\ud800", agent_name=long_agent,
                                   limits={"max_steps": 3}, labels={"team": "a"}, queue="gpu"),)


def test_a_queue_statement_that_fails_in_the_database_is_a_store_error_not_a_pool_error(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    with pytest.raises(StoreError, match=rf"^cannot queue run {run_id}: ") as caught:
        record_queued(store, "again", "tipper", run_id=run_id)  # the id is taken
    assert not isinstance(caught.value, PoolError)
    assert "\n" not in str(caught.value)
    with pytest.raises(StoreError, match=r"^cannot cancel run nobody: "):
        store.request_cancel("nobody")  # no such run: its cancel row has no run to belong to
    assert [run.task for run in store.list_runs()] == ["job"]


@pytest.mark.parametrize("statement", ["queue_run", "request_cancel", "cancel_queued", "cancel_requested",
                                       "due_for_publish", "untouch", "record_queued", "request_cancel (pool)"])
def test_every_queue_statement_on_a_closed_store_is_a_store_error(store: RunStore, statement: str) -> None:
    run_id = record_queued(store, "job", "tipper")
    store.close()
    calls: dict[str, Callable[[], object]] = {
        "queue_run": lambda: store.queue_run(queued("n" * 32)),
        "request_cancel": lambda: store.request_cancel(run_id),
        "cancel_queued": lambda: store.cancel_queued(run_id, "no"),
        "cancel_requested": lambda: store.cancel_requested(run_id),
        "due_for_publish": lambda: store.due_for_publish(0.0),
        "untouch": lambda: store.untouch([]),
        "record_queued": lambda: record_queued(store, "job", "tipper"),
        "request_cancel (pool)": lambda: request_cancel(store, run_id),
    }
    with pytest.raises(StoreError, match=r"is closed$") as caught:
        calls[statement]()
    assert not isinstance(caught.value, PoolError)


def test_a_read_only_store_refuses_the_queues_writes(store: RunStore, store_url: str) -> None:
    run_id = record_queued(store, "job", "tipper")
    with open_store(store_url, read_only=True) as reader:
        with pytest.raises(StoreError, match=r"is open read-only: it cannot queue runs$"):
            reader.queue_run(queued("n" * 32))
        with pytest.raises(StoreError, match=r"is open read-only: it cannot sweep runs$"):
            reader.due_for_publish(0.0)
        assert reader.cancel_requested(run_id) is False  # reading is fine


def test_a_cancel_request_is_recorded_once_and_read_back(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    other = record_queued(store, "other", "tipper")
    assert store.cancel_requested(run_id) is False
    assert store.request_cancel(run_id) is True
    assert store.request_cancel(run_id) is False  # asked before: that request stands
    assert (store.cancel_requested(run_id), store.cancel_requested(other)) == (True, False)


def test_cancel_queued_ends_only_a_run_still_queued(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    assert store.cancel_queued(run_id, "not wanted") is True
    run = store.get_run(run_id)
    assert (run.status, run.error, run.finished_at is not None) == (Status.CANCELLED, "not wanted", True)
    assert [event.seq for event in run.events] == [1, 2]
    assert run.facts[-1] == RunFinished(status=Status.CANCELLED, error="not wanted")
    assert store.cancel_queued(run_id, "again") is False  # no longer queued
    started = weather_run(store, "s" * 32)
    assert store.cancel_queued(started, "no") is False
    assert len(store.get_run(run_id).events) == 2


def test_due_for_publish_takes_the_default_queue_for_none_and_touches_each_run_once(store: RunStore) -> None:
    plain = record_queued(store, "plain", "tipper")
    named = record_queued(store, "named", "tipper", queue=DEFAULT_QUEUE)
    gpu = record_queued(store, "gpu", "tipper", queue="gpu")
    weather_run(store, "w" * 32)  # not a pool's run
    time.sleep(0.01)
    later = datetime.now(UTC) + timedelta(seconds=1)
    touched = store.due_for_publish(0.0)
    assert sorted(t.run_id for t in touched) == sorted([plain, named])
    assert all(t.was < t.at < later for t in touched)
    assert store.get_run(plain).updated_at == next(t.at for t in touched if t.run_id == plain)
    assert store.due_for_publish(3600.0) == []
    assert [t.run_id for t in store.due_for_publish(0.0, "gpu")] == [gpu]


def test_short_ids_are_the_shortest_prefixes_no_other_run_shares(store: RunStore) -> None:
    ids = ["abcdef0123" + "0" * 22, "abcdef0124" + "0" * 22, "9" * 32]
    for run_id in ids:
        weather_run(store, run_id)
    assert store.short_ids(ids) == {ids[0]: "abcdef0123", ids[1]: "abcdef0124", ids[2]: "99999999"}
    assert store.short_ids([]) == {}


def test_short_ids_of_many_runs_take_one_statement_and_match_a_scan_of_every_id(store: RunStore) -> None:
    """200 runs' short ids in one statement, built once (two subqueries per id cost the inbox 40 ms)."""
    weather_run(store, "ab" + "0" * 30)
    ids = [f"{n // 16:07x}{n % 16:x}{n % 3}" + "e" * 23 for n in range(200)]  # neighbours share 7 to 9 characters
    ids += [f"{n // 16:07x}{n % 16:x}" + "f" * 24 for n in range(0, 200, 7)]
    with store.engine.begin() as conn:
        row = dict(conn.execute(select(runs).where(runs.c.run_id == "ab" + "0" * 30)).mappings().one())
        conn.execute(insert(runs), [{**row, "run_id": run_id} for run_id in ids])
    everyone = [*ids, "ab" + "0" * 30]

    def scanned(run_id: str) -> str:
        size = 8
        while any(other != run_id and other.startswith(run_id[:size]) for other in everyone):
            size += 1
        return run_id[:size]

    asked = ids[:200]
    seen: list[str] = []

    def count(*args: object) -> None:
        seen.append(str(args[2]))

    event.listen(store.engine, "before_cursor_execute", count)
    shorts = store.short_ids(asked)
    event.remove(store.engine, "before_cursor_execute", count)
    assert len([statement for statement in seen if "FROM runs" in statement]) == 1, seen
    assert shorts == {run_id: scanned(run_id) for run_id in asked}
    absent = f"{3:07x}{5:x}" + "0" * 24  # no such run: read on its own, its neighbours all the same
    assert store.short_ids([absent, ids[0], ids[0]]) == {absent: scanned(absent), ids[0]: scanned(ids[0])}


def test_refused_calls_count_the_tool_finished_facts_that_did_not_run(store: RunStore) -> None:
    refused = weather_run(store, "r" * 32, "get_forecast", "get_weather", "nope")  # two unknown tools
    ran = weather_run(store, "o" * 32, "get_weather")
    counted = store.refused_calls([refused, ran, "missing"])
    assert counted == {refused: 2, ran: 0, "missing": 0}
    run = store.get_run(refused)
    assert counted[refused] == sum(1 for f in run.facts if isinstance(f, ToolFinished) and not f.ran)


def test_stats_count_the_window_from_the_rollups_and_the_log_alike(store: RunStore) -> None:
    first = weather_run(store, "1" * 32, "get_weather")
    before = datetime.now(UTC)
    second = weather_run(store, "2" * 32)
    every = store.stats()
    assert every.total(Key(STATUS, "done")).number == 2
    assert every.total(Key(RUN, "")).tokens == sum(store.get_run(r).tokens for r in (first, second)) > 0
    assert every.total(Key(RUN, "")).number == 1  # tool calls that ran
    assert sum(figures[0] for key, figures in every.totals.items() if key.kind == STEP) == 3
    recent = store.stats(RunFilter(since=before))  # a ragged hour: read from the log
    assert recent.total(Key(STATUS, "done")).number == 1
    assert not any(key.kind == TOOL for key in recent.totals)
    assert store.stats(RunFilter(until=before - timedelta(days=1))).totals == {}


def test_run_starts_give_each_started_runs_run_started_fact(store: RunStore) -> None:
    parent = weather_run(store, "p" * 32, "get_weather")
    child = fork(store, parent, at_step=2, model=ScriptedModel(["other"]), registry=weather_registry()).run_id
    waiting = record_queued(store, "job", "tipper")
    starts = store.run_starts([parent, child, waiting])
    assert sorted(starts) == sorted([parent, child])  # the queued run has not started
    assert (starts[child].origin, starts[child].forked_at_step, starts[child].parent_run_id) == ("fork", 2, parent)
    assert starts[parent].origin is None


def test_a_running_run_is_not_cancelled_as_a_queued_one(store: RunStore) -> None:
    run_id = record_queued(store, "job", "tipper")
    store.claim_run(store.get_run(run_id))
    assert store.get_run(run_id).status == Status.RUNNING
    assert store.cancel_queued(run_id, "no") is False
    assert store.get_run(run_id).status == Status.RUNNING


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found += [base] + [base + alias.name if base.endswith(".") else f"{base}.{alias.name}"
                               for alias in node.names]
    return found


def test_only_the_store_imports_sqlalchemy_and_cli_and_pool_use_only_its_exports() -> None:
    outside = [path for path in RUNNER.rglob("*.py") if RUNNER / "store" not in path.parents]
    assert outside
    talks_sql = [str(p.relative_to(RUNNER)) for p in outside if any(
        name.split(".")[0] == "sqlalchemy" for name in _imports(p))]
    assert talks_sql == []
    reaching = sorted({f"{p.relative_to(RUNNER)}: {name}" for folder in ("cli", "pool")
                       for p in (RUNNER / folder).rglob("*.py") for name in _imports(p)
                       if name.startswith(("..store.", "runner.store."))
                       and name.removeprefix("..store.").removeprefix("runner.store.") not in _exports()})
    assert reaching == []


def _exports() -> set[str]:
    import runner.store

    return set(runner.store.__all__)
