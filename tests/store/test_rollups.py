"""The stats' rollups answer what a full read of the log answers, as runs are added, resumed, forked and pruned.

Two thousand varied runs (done, tool errors, calls run together, refused calls, step limits,
model errors, approvals, priced and unpriced models, forks), each started at its own time over
about three weeks (the recorder's clock moved back), on each backend. After each phase every
filter's stats from the rollups equal those worked out from the log alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from alembic import command
from sqlalchemy import select

from runner import ModelReply, RunStore, ScriptedModel, ToolCall, ToolRegistry, Usage, fork, resume, run_agent
from runner._log.statuses import Status
from runner._log.tally import MODEL, STATUS, Figures, Key, nusd
from runner._view import stats as view_stats
from runner.errors import StoreError
from runner.store import RunFilter, open_store, recording, rolled_up, rollups
from runner.store.migrate import alembic_config
from runner.store.tables import rollups as rollups_table
from runner.store.transaction import Parts, Writer
from tests.loop.helpers import call, reply, weather_registry

RUNS = 2000
SPACING = timedelta(minutes=17, seconds=7)  # between two runs' starts: 2,000 runs over 24 days, at any second
PRICES = {"priced": {"input_mtok": 0.15, "output_mtok": 0.6}}


def registry() -> ToolRegistry:
    """The weather tools, one that fails, and a payment that waits for approval."""
    tools = weather_registry()

    def flaky(n: int) -> str:
        raise RuntimeError(f"flaky {n}")

    def pay(cents: int) -> str:
        return f"paid {cents}"

    tools.register("flaky", "Fails.", {"type": "object", "properties": {"n": {"type": "integer"}}}, flaky)
    tools.register("pay", "Pays.", {"type": "object", "properties": {"cents": {"type": "integer"}}}, pay,
                   side_effects=True, needs_approval=True)
    return tools


def model(name: str, *replies: ModelReply | str) -> ScriptedModel:
    scripted = ScriptedModel(list(replies))
    scripted.model_name, scripted.provider_name = name, "test"
    return scripted


def used(tokens: int, content: str = "", *calls: Any) -> ModelReply:
    return ModelReply(content, list(calls), Usage(tokens, tokens // 4))


@contextmanager
def started_back(by: timedelta) -> Iterator[None]:
    """Record with the recorder's clock ``by`` in the past."""
    def clock_for(dialect: str) -> Callable[[], datetime | str]:
        def now() -> datetime | str:
            moment = datetime.now(UTC) - by
            return moment.replace(tzinfo=None).isoformat(" ", "microseconds") if dialect == "sqlite" else moment
        return now

    with mock.patch.object(recording, "clock_for", clock_for):
        yield


def record(store: RunStore, k: int) -> str:
    """Run ``k`` of the store: one of ten shapes, started ``k`` spacings ago."""
    tools = registry()
    name = "priced" if k % 3 else "unpriced"
    labels = {"team": "ab"[k % 2], "shape": str(k % 10)}
    options: dict[str, Any] = {"store": store, "labels": labels, "prices": PRICES, "run_id": f"{k:032x}"}
    match k % 10:
        case 0:
            script: list[ModelReply | str] = [used(100 + k % 7, "hello")]
        case 1:
            script = [used(200, "", call("c1", "get_weather", city="Paris")), used(50, "21C")]
        case 2:
            script = [used(120, "", call("c1", "flaky", n=k)), used(30, "it failed")]
        case 3:
            script = [used(90, "", call("c1", "get_weather", city="Oslo"), call("c2", "c_to_f", celsius=3)), "ok"]
        case 4:
            script, options["max_steps"] = [used(70, "", call("c1", "get_weather", city="Paris"))], 1
        case 5:
            script = []  # the model fails
        case 6:
            script = [used(40, "", call("c1", "no_such_tool")), used(40, "sorry")]
        case 7:
            script = [used(60, "", call("c1", "pay", cents=k))]  # waits for approval
        case 8:
            script = [reply("", call("c1", "get_weather", city="Paris")), reply("no usage reported")]
        case _:
            script = [used(10 ** 6, "", call("c1", "c_to_f", celsius=k), call("c2", "flaky", n=1)), used(5, "big")]
    with started_back(SPACING * k):
        return run_agent(f"task {k}", model(name, *script), tools, **options).run_id


def compare(store: RunStore, at: datetime) -> None:
    """Every filter's stats from the rollups equal the log's (``rolled_up=False`` reads only the log)."""
    ragged = at - timedelta(days=5, minutes=23)
    filters = [RunFilter(), RunFilter(since=ragged), RunFilter(until=ragged),
               RunFilter(since=ragged - timedelta(days=9, minutes=7), until=ragged),
               RunFilter(since=at - timedelta(days=3)),
               RunFilter(since=ragged.replace(minute=0, second=0, microsecond=0)),
               RunFilter(status=(Status.DONE,)), RunFilter(labels={"team": "a"}), RunFilter(tool="flaky")]
    hour = at.replace(minute=0, second=0, microsecond=0) - timedelta(days=4)
    for early, late in ((10, 50), (50, 10), (10, 10), (50, 50)):  # each edge's smaller part read from the log
        filters.append(RunFilter(since=hour + timedelta(minutes=early), until=hour + timedelta(days=2, minutes=late)))
    for early, late in ((10, 50), (50, 10)):  # each ragged minute's smaller part read from the log
        filters.append(RunFilter(since=hour + timedelta(minutes=7, seconds=early),
                                 until=hour + timedelta(days=1, minutes=41, seconds=late)))
        filters.append(RunFilter(since=hour + timedelta(minutes=7, seconds=early),
                                 until=hour + timedelta(minutes=52, seconds=late)))  # no whole hour
    filters += [RunFilter(since=hour + timedelta(minutes=5), until=hour + timedelta(minutes=55)),  # one hour
                RunFilter(since=hour + timedelta(minutes=50), until=hour + timedelta(hours=1, minutes=10)),
                RunFilter(since=hour + timedelta(minutes=3, seconds=5), until=hour + timedelta(minutes=3, seconds=59))]
    starts = [run.started_at for run in store.list_runs(limit=500)]  # a run just inside or outside each edge:
    soon = next(t for t in starts if 3 <= t.second <= 20)  # its minute's smaller part before it
    later = next(t for t in starts if 40 <= t.second <= 56)  # and after it
    moment = timedelta(seconds=3)
    filters += [RunFilter(since=soon + moment), RunFilter(since=later - moment),
                RunFilter(until=later - moment), RunFilter(until=soon + moment)]
    for where in filters:
        with store.reading() as conn:
            logged = rolled_up.answer(conn, where, rolled_up=False)
        rolled = store.stats(where)
        assert dumped(view_stats.report(rolled, where)) == dumped(view_stats.report(logged, where)), where
    with store.engine.connect() as conn:
        assert min(conn.execute(select(rollups_table.c.number)).scalars()) >= 0


def dumped(found: dict[str, Any]) -> str:
    return json.dumps(found, sort_keys=True)


def stored_rows(store: RunStore) -> set[tuple[Any, ...]]:
    """The rollups' rows that count something."""
    with store.engine.connect() as conn:
        return {tuple(row) for row in conn.execute(select(rollups_table)) if any(row[4:])}


def test_rollups_answer_what_the_log_does_as_runs_are_added_resumed_and_pruned(store_url: str) -> None:
    at = datetime.now(UTC)
    with open_store(store_url) as store:
        ids = [record(store, k) for k in range(RUNS)]
        everything = store.stats()
        assert sum(count for key, (count, *_) in everything.totals.items() if key.kind == "status") == RUNS
        compare(store, at)

        for k in range(4, RUNS, 40):  # step-limited runs resumed with another model, some hours later
            with started_back(SPACING * k - timedelta(hours=3)):
                resume(store, ids[k], model("other", used(33, "resumed")), registry(), max_steps=3, prices=PRICES)
        for k in range(7, RUNS, 50):  # approvals decided and resumed
            store.decide(ids[k], "c1", approved=k % 100 == 7)
            with started_back(SPACING * k):
                resume(store, ids[k], model("priced", used(20, "paid or not")), registry(), prices=PRICES)
        for k in range(1, RUNS, 100):  # forks at the first step, later
            fork(store, ids[k], at_step=1, model=model("other", used(11, "forked")), registry=registry())
        compare(store, at)

        result = store.prune(before=at - timedelta(days=12), status=[Status.DONE, Status.MODEL_ERROR])
        assert len(result.runs) > 100
        compare(store, at)
        kept = stored_rows(store)

    with open_store(store_url) as store, store.engine.begin() as conn:  # the migration's fill gives the same rows
        command.downgrade(alembic_config(conn), "0007")
        command.upgrade(alembic_config(conn), "head")
    with open_store(store_url) as store:
        assert stored_rows(store) == kept


def test_a_failed_commits_rollup_rows_go_with_the_commit_that_retries_its_facts(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit carrying a reply and its call's start fails: the run is aborted, and the close
    commits those facts after all. Their rollup rows must come with them, not be lost."""
    monkeypatch.setattr(recording, "ROLL_EVERY_S", 0.0)  # every commit adds to the rollups
    failed: list[int] = []
    real_write = Writer.write

    def write(self: Writer, parts: Parts) -> dict[str, str]:
        if not failed and any(row[4] == "tool_started" for row in parts.events):
            failed.append(len(parts.rollups))
            raise self.dbapi_error("disk I/O error")
        return real_write(self, parts)

    monkeypatch.setattr(Writer, "write", write)
    with pytest.raises(StoreError, match="disk I/O error"):
        run_agent("t", model("priced", used(500, "", call("c1", "get_weather", city="Paris"))), registry(),
                  store=store, prices=PRICES)
    assert len(failed) == 1
    assert failed[0] > 0  # the failed commit carried rollup rows
    with store.reading() as conn:
        logged = rolled_up.answer(conn, RunFilter(), rolled_up=False)
    assert view_stats.report(store.stats(), RunFilter()) == view_stats.report(logged, RunFilter())
    cost = nusd(500 * 0.15e-6 + 125 * 0.6e-6)
    assert cost is not None
    assert store.stats().total(Key(MODEL, "test:priced")) == Figures(number=1, tokens=625, cost_nusd=cost)


def test_a_commit_the_server_undid_for_a_deadlock_is_tried_again(monkeypatch: pytest.MonkeyPatch,
                                                                   store: RunStore) -> None:
    """Writers add to the same rollup rows: PostgreSQL may break a deadlock by undoing one transaction."""
    import psycopg

    if store.engine.dialect.name == "sqlite":
        pytest.skip("SQLite has one writer: no deadlock to break")
    undone: list[int] = []
    real_attempt = Writer._attempt

    def attempt(self: Writer, parts: Parts) -> dict[str, str]:
        if len(undone) < 2:
            undone.append(len(parts.events))
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return real_attempt(self, parts)

    monkeypatch.setattr(Writer, "_attempt", attempt)
    result = run_agent("t", model("priced", used(10, "done")), registry(), store=store)
    assert (result.status, len(undone)) == (Status.DONE, 2)
    assert store.stats().total(Key(STATUS, Status.DONE)).number == 1


KILLED = """
import os, signal, sys
from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, open_store, run_agent
from runner.store import recording

recording.ROLL_EVERY_S = 3600.0  # nothing is added to the rollups after the run's start

def work(i: int) -> str:
    if i == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"worked {i}"

tools = ToolRegistry()
tools.register("work", "Work.", {"type": "object", "properties": {"i": {"type": "integer"}}}, work)
replies = [ModelReply("", [ToolCall(f"c{i}", "work", {"i": i})], Usage(100, 10)) for i in (1, 2, 3)]
with open_store(sys.argv[1]) as store:
    run_agent("t", ScriptedModel(replies), tools, store=store, run_id="d" * 32)
"""


@pytest.mark.process
def test_a_killed_runs_facts_past_its_last_addition_count_while_it_lies_dead_and_once_resumed(
        store_url: str, tmp_path: Path) -> None:
    """Its recorder adds to the rollups a second at a time: a run killed in between has facts they do not hold."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    child = subprocess.run([sys.executable, str(script), store_url], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert child.returncode == -signal.SIGKILL, child.stderr

    def same(store: RunStore) -> dict[str, Any]:
        with store.reading() as conn:
            logged = rolled_up.answer(conn, RunFilter(), rolled_up=False)
        found = view_stats.report(store.stats(), RunFilter())
        assert found == view_stats.report(logged, RunFilter())
        return found

    with open_store(store_url) as store:
        dead = same(store)
        assert (dead["by_status"], dead["tool_calls"], dead["tokens"]["total"]) == ({"running": 1}, 3, 330)
        tools = ToolRegistry()
        tools.register("work", "Work.", {"type": "object", "properties": {"i": {"type": "integer"}}},
                       lambda i: f"worked {i}")
        resumed = resume(store, "d" * 32, model("other", used(40, "end")), tools)
        assert resumed.status == Status.DONE
        done = same(store)
        assert (done["by_status"], done["tool_calls"], done["tokens"]["total"]) == ({"done": 1}, 3, 380)
        assert stored_rows(store) == stored_rows_refilled(store)


def stored_rows_refilled(store: RunStore) -> set[tuple[Any, ...]]:
    """The rollups' rows as ``refill`` works them out from the log (the table is left as it was)."""
    with store.engine.connect() as conn, conn.begin() as transaction:
        rollups.refill(conn)
        found = {tuple(row) for row in conn.execute(select(rollups_table)) if any(row[4:])}
        transaction.rollback()
    return found


def test_a_running_runs_facts_past_its_last_addition_count_under_the_names_the_rollups_keep(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool name longer than the column (or one a backend cannot store) counts as one tool, live or added."""
    monkeypatch.setattr(recording, "ROLL_EVERY_S", 3600.0)  # nothing added past the run's start
    long_name = "t" * 300 + "\ud800"
    release, asked = threading.Event(), threading.Event()

    def model(messages: Any, specs: Any) -> ModelReply:
        if asked.is_set():
            release.wait(30)
            return ModelReply("done")
        asked.set()
        return ModelReply("", [ToolCall("c1", long_name, {})], Usage(5, 1))

    running = threading.Thread(target=run_agent, args=("t", model, registry()), kwargs={"store": store})
    running.start()
    try:
        deadline = time.monotonic() + 30
        while not any(f.kind == "tool_finished" for r in store.list_runs() for f in store.get_run(r.run_id).events):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with store.reading() as conn:
            logged = rolled_up.answer(conn, RunFilter(), rolled_up=False)
        live = view_stats.report(store.stats(), RunFilter())
        assert live == view_stats.report(logged, RunFilter())
        assert [tool["calls"] for tool in live["tools"].values()] == [1]
    finally:
        release.set()
        running.join(30)
