"""Many runs sharing one store: group commit, async commits off the event loop, SIGKILL mid-flight."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, select, update
from sqlalchemy.pool import QueuePool

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner._run.agent import arun_agent
from runner._run.resume import resume
from runner.errors import StoreError
from runner.store import RunStore, open_store
from runner.store.tables import runs
from runner.store.transaction import Parts, TakenOver, Writer
from tests.store.helpers import KINDS_PER_RUN, OPENING, TOOL_STEP, CuttableProxy, store_behind_a_proxy

ROOT = Path(__file__).resolve().parents[2]


def _script(i: int) -> ScriptedModel:
    return ScriptedModel([ModelReply(f"run {i}", [ToolCall("c1", "lookup", {"ref": f"r{i}"})]),
                          ModelReply("", [ToolCall("c2", "pay", {"ref": f"p{i}", "cents": i})]), f"answer {i}"])


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("lookup", "Look up.", {"type": "object", "properties": {"ref": {"type": "string"}}},
                 lambda ref: {"ref": ref})
    reg.register("pay", "Pay (writes).", {"type": "object", "properties": {
        "ref": {"type": "string"}, "cents": {"type": "integer"}}}, lambda ref, cents: f"paid {cents}",
        side_effects=True)
    return reg


def _shape(store: RunStore, run_id: str) -> list[tuple[int, str, int, Any]]:
    """A run's events without times, ids and latencies: what must not depend on concurrency."""
    volatile = {"latency_s", "duration_s"}
    return [(e.seq, e.kind, e.step, {k: v for k, v in e.data.items() if k not in volatile})
            for e in store.get_run(run_id).events]


@pytest.mark.parametrize("driver", ["threads", "coroutines"])
def test_fifty_concurrent_runs_log_exactly_the_events_of_fifty_sequential_runs(store: RunStore, driver: str) -> None:
    sequential = [run_agent(f"task {i}", _script(i), _registry(), store=store) for i in range(50)]
    concurrent: list[Any] = [None] * 50
    if driver == "threads":
        def one(i: int) -> None:
            concurrent[i] = run_agent(f"task {i}", _script(i), _registry(), store=store)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        async def main() -> list[Any]:
            return await asyncio.gather(*(arun_agent(f"task {i}", _script(i), _registry(), store=store)
                                          for i in range(50)))

        concurrent = asyncio.run(main())
    assert [r.status for r in concurrent] == ["done"] * 50
    assert len(store.list_runs(limit=200)) == 100
    for i in range(50):
        assert [kind for _, kind, _, _ in _shape(store, concurrent[i].run_id)] == KINDS_PER_RUN
        assert _shape(store, concurrent[i].run_id) == _shape(store, sequential[i].run_id)
        assert store.get_run(concurrent[i].run_id).messages == concurrent[i].messages
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM events").scalar() == 100 * len(KINDS_PER_RUN)


@contextmanager
def _write_lock(store_url: str) -> Iterator[None]:
    """Hold the store's event log against writers (SQLite: the write lock; PostgreSQL: a table lock)."""
    engine = create_engine(store_url)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()
    engine.dispose()


@contextmanager
def _write_lock_in_thread(store_url: str) -> Iterator[threading.Event]:
    """``_write_lock`` held by another thread, so an event loop can go on while commits wait on it;
    setting the event it yields releases the lock."""
    release, locked = threading.Event(), threading.Event()

    def hold() -> None:
        with _write_lock(store_url):
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    locked.wait(30)
    try:
        yield release
    finally:
        release.set()
        holder.join()


def _until(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.005)


def test_runs_waiting_on_a_commit_are_committed_together_in_one_transaction(store: RunStore, store_url: str) -> None:
    results: list[Any] = [None] * 20

    def one(i: int) -> None:
        results[i] = run_agent(f"task {i}", ScriptedModel([f"answer {i}"]), ToolRegistry(), store=store)

    with _write_lock(store_url):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        # The first runs' commits wait on the lock (one per leader: SQLite 1, a server 2); the
        # others queue behind them.
        waiting = 20 - store.committer.leaders
        _until(lambda: store.committer.busy and store.committer.queued == waiting, f"{waiting} runs queued")
    for t in threads:
        t.join()
    assert [r.status for r in results] == ["done"] * 20
    assert store.committer.largest_group >= waiting  # the queued runs' facts went in one transaction
    for result in results:
        assert [e.seq for e in store.get_run(result.run_id).events] == list(range(1, 9))


def test_an_async_run_waiting_on_the_store_does_not_block_the_event_loop(store: RunStore, store_url: str) -> None:
    seen_busy: list[bool] = []

    async def main(release: threading.Event) -> Any:
        run = asyncio.ensure_future(arun_agent("task", ScriptedModel(["answer"]), ToolRegistry(), store=store))
        for _ in range(3000):  # this coroutine keeps running while the run's first commit waits
            if store.committer.busy:
                break
            await asyncio.sleep(0.01)
        seen_busy.append(store.committer.busy and not run.done())
        release.set()
        return await run

    with _write_lock_in_thread(store_url) as release:
        result = asyncio.run(main(release))
    assert seen_busy == [True]
    assert result.status == "done"
    assert [e.kind for e in store.get_run(result.run_id).events] == [
        "run_started", "message", "message", "step_started", "message", "model_call", "step_finished",
        "run_finished"]


def test_a_commit_carrying_many_coroutines_wakes_their_event_loop_once(store: RunStore, store_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch's own cross-thread wake-up (a write to the loop's self-pipe, a callback, a
    future chained to a future) cost the loop more than its share of the commit."""
    wakeups: list[int] = []

    async def model(messages: Any, specs: Any) -> ModelReply:
        return ModelReply(f"answer {messages[1]['content']}")

    async def main(release: threading.Event) -> list[Any]:
        loop = asyncio.get_running_loop()
        threadsafe = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any, **kwargs: Any) -> Any:
            wakeups.append(1)
            return threadsafe(callback, *args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        runs = [asyncio.ensure_future(arun_agent(f"task {i}", model, ToolRegistry(), store=store))
                for i in range(20)]
        committer = store.committer
        for _ in range(3000):  # the first group waits on the lock; the others' first batches queue behind it
            if committer.busy and committer.largest_group + committer.queued == 20:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the runs' first batches never all reached the committer")
        release.set()
        return list(await asyncio.gather(*runs))

    store.committer.leaders = 1  # one group at a time: the later runs' batches all queue behind the first
    with _write_lock_in_thread(store_url) as release:
        commits_before = store.committer.commits
        results = asyncio.run(main(release))
    assert [r.status for r in results] == ["done"] * 20
    commits = store.committer.commits - commits_before
    assert commits < 40  # 20 runs, two commits each: the queued batches went in one transaction
    assert len(wakeups) == commits  # one wake-up per commit, not one per run it carried


def test_on_a_server_database_a_commit_held_up_does_not_hold_up_the_other_runs(store: RunStore,
                                                                               store_url: str) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: its commits go one group at a time")
    engine = create_engine(store_url)
    release = threading.Event()
    row_locked = threading.Event()
    finished: list[str] = []

    def lock_row(run_id: str) -> None:
        with engine.connect() as conn:
            conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id).with_for_update())
            row_locked.set()
            release.wait(30)
            conn.rollback()

    def slow_model(messages: Any, specs: Any) -> ModelReply:
        if len(messages) == 2:  # its row exists now: lock it, so the run's next commit waits
            threading.Thread(target=lock_row, args=("held-up",)).start()
            row_locked.wait(30)
            return ModelReply("", [ToolCall("c1", "lookup", {"ref": "x"})])
        return ModelReply("answer")

    def one(run_id: str, model: Any) -> None:
        result = run_agent("t", model, _registry(), store=store, run_id=run_id)
        finished.append(f"{run_id} {result.status}")

    held_up = threading.Thread(target=one, args=("held-up", slow_model))
    held_up.start()
    try:
        _until(lambda: store.committer.busy and row_locked.is_set(), "the held-up run's commit under way")
        others = [threading.Thread(target=one, args=(f"other-{i}", _script(i))) for i in range(3)]
        for t in others:
            t.start()
        for t in others:
            t.join(timeout=30)
        assert sorted(finished) == ["other-0 done", "other-1 done", "other-2 done"]  # while one still waits
    finally:
        release.set()
        held_up.join(timeout=30)
        engine.dispose()
    assert finished[-1] == "held-up done"
    assert [e.kind for e in store.get_run("held-up").events] == [
        "run_started", "message", "message", "step_started", "message", "model_call", "tool_started",
        "tool_finished", "message", "step_finished", "step_started", "message", "model_call", "step_finished",
        "run_finished"]


CHILD = textwrap.dedent("""
    import asyncio, os, sys, threading, time
    from pathlib import Path
    from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
    from runner._run.agent import arun_agent
    from runner.store import open_store

    url, driver, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    lock = threading.Lock()

    def work(run, ref):
        with lock, open(log, "a", encoding="utf-8") as out:  # the side effect, durable before it returns
            out.write(f"{run} {ref}\\n")
            out.flush()
            os.fsync(out.fileno())
        time.sleep(0.002)
        return {"ref": ref}

    registry = ToolRegistry()
    registry.register("work", "Work (writes).", {"type": "object", "properties": {
        "run": {"type": "string"}, "ref": {"type": "string"}}}, work, side_effects=True)

    def script(n):
        run = f"{n:032x}"
        return ScriptedModel([ModelReply("", [ToolCall(f"c{k}", "work", {"run": run, "ref": f"c{k}"})])
                              for k in range(1000)] + ["never"])

    with open_store(url) as store:
        kwargs = dict(store=store, max_steps=2000, token_budget=10**9, max_identical_calls=10)
        if driver == "threads":
            threads = [threading.Thread(target=run_agent, args=("go", script(n), registry),
                                        kwargs=dict(kwargs, run_id=f"{n:032x}")) for n in range(20)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            async def main():
                await asyncio.gather(*(arun_agent("go", script(n), registry, run_id=f"{n:032x}", **kwargs)
                                       for n in range(20)))
            asyncio.run(main())
""")


@pytest.mark.process
@pytest.mark.parametrize("driver", ["threads", "coroutines"])
def test_sigkill_during_twenty_concurrent_runs_leaves_every_log_consistent_and_every_ran_tool_started(
        store: RunStore, store_url: str, tmp_path: Path, driver: str) -> None:
    log = tmp_path / "ran.log"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, store_url, driver, str(log)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def enough() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"child exited early: {proc.communicate()[1]}")
            return log.exists() and len(log.read_text().splitlines()) >= 200
        _until(enough, "200 tool executions", timeout_s=120)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    ran: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        run_id, ref = line.split()
        ran.setdefault(run_id, []).append(ref)
    assert len(ran) == 20
    for n in range(20):
        run = store.get_run(f"{n:032x}")
        kinds = [e.kind for e in run.events]
        assert [e.seq for e in run.events] == list(range(1, len(kinds) + 1))
        steps = (len(kinds) - len(OPENING) + len(TOOL_STEP) - 1) // len(TOOL_STEP)
        assert kinds == (OPENING + TOOL_STEP * steps)[:len(kinds)]
        assert run.status == "running"
        started = [e.data["call_id"] for e in run.events if e.kind == "tool_started"]
        executed = ran[f"{n:032x}"]
        # Every tool that ran had its tool_started committed first; at most the last one started is unfinished.
        assert executed == started[:len(executed)]
        assert len(started) - len(executed) in (0, 1)


def test_the_writer_keeps_one_connection_and_replaces_one_the_server_dropped(store: RunStore,
                                                                            store_url: str) -> None:
    first = run_agent("one", _script(1), _registry(), store=store)
    held = store.committer.writer.connection
    assert held is not None
    run_agent("two", _script(2), _registry(), store=store)
    assert store.committer.writer.connection is held  # one connection for every commit, not one per commit
    if store.engine.dialect.name == "postgresql":
        admin = create_engine(store_url)
        try:
            with admin.begin() as conn:  # the server ends the writer's session, as a restart would
                conn.exec_driver_sql(f"SELECT pg_terminate_backend({held.dbapi_connection.info.backend_pid})")
        finally:
            admin.dispose()
    commits = store.committer.commits
    third = run_agent("three", _script(3), _registry(), store=store)
    assert (third.status, store.get_run(third.run_id).status) == ("done", "done")
    assert [e.kind for e in store.get_run(third.run_id).events] == KINDS_PER_RUN
    assert [e.kind for e in store.get_run(first.run_id).events] == KINDS_PER_RUN
    # three model calls, two tool starts, the pay's result (a side effect), the end: nothing written twice
    assert store.committer.commits - commits == 7
    replaced = store.engine.dialect.name == "postgresql"
    assert (store.committer.writer.connection is not held) == replaced


@pytest.mark.postgres
def test_a_run_goes_on_when_the_server_drops_every_connection_of_its_store(pg_admin: Any) -> None:
    """A failover, a server restart or a proxy's restart ends the writer's session and the idle
    pooled ones alike: the commit's retry must not take one of those (the run ended cancelled)."""
    import uuid

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from tests.conftest import SESSION_PREFIX, drop_pg_schema, pg_schema_url

    schema, tag = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}", f"runner-drop-{uuid.uuid4().hex[:8]}"
    url = make_url(pg_schema_url(pg_admin, schema)).update_query_dict({"application_name": tag})
    store = open_store(url.render_as_string(hide_password=False))
    dropped: list[int] = []

    def drop_all(n: int) -> dict[str, int]:
        with pg_admin.connect() as conn:
            dropped.append(conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                             "WHERE application_name = :tag"), {"tag": tag}).scalar_one())
        return {"n": n}

    registry = ToolRegistry()
    registry.register("drop", "Drop the store's connections.", {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}, drop_all)
    try:
        warm = run_agent("warm", _script(1), _registry(), store=store)
        with store.reading() as one, store.reading() as two:  # two idle connections left in the pool
            one.exec_driver_sql("SELECT 1")
            two.exec_driver_sql("SELECT 1")
        model = ScriptedModel([ModelReply("", [ToolCall("c1", "drop", {"n": 1})]), "still here"])
        result = run_agent("t", model, registry, store=store)
        assert dropped[0] >= 3  # the writer's and both idle ones
        assert (result.status, result.answer) == ("done", "still here")
        run = store.get_run(result.run_id)
        assert (run.status, [e.seq for e in run.events]) == ("done", list(range(1, len(run.events) + 1)))
        assert [e.kind for e in run.events].count("tool_finished") == 1
        assert store.get_run(warm.run_id).status == "done"
    finally:
        store.close()
        drop_pg_schema(pg_admin, schema)


def _cutting(proxy: CuttableProxy, seconds: float) -> ToolRegistry:
    registry = ToolRegistry()

    def cut(n: int) -> dict[str, int]:
        proxy.cut(seconds)
        return {"n": n}

    registry.register("cut", "Cut the server off.", {"type": "object", "properties": {"n": {"type": "integer"}},
                                                     "required": ["n"]}, cut)
    return registry


@pytest.mark.postgres
def test_a_commit_waits_out_a_server_restart_and_the_run_goes_on(pg_admin: Any) -> None:
    with store_behind_a_proxy(pg_admin) as (store, proxy):
        model = ScriptedModel([ModelReply("", [ToolCall("c1", "cut", {"n": 1})]), "still here"])
        result = run_agent("t", model, _cutting(proxy, 2.0), store=store)  # a restart of 2 s after the tool
        assert proxy.refused >= 1  # the commit after the tool met a server refusing connections
        assert (result.status, result.answer) == ("done", "still here")
        run = store.get_run(result.run_id)
        assert (run.status, [e.seq for e in run.events]) == ("done", list(range(1, len(run.events) + 1)))
        assert [e.kind for e in run.events].count("tool_finished") == 1


@pytest.mark.postgres
def test_a_commit_gives_up_on_a_server_gone_for_longer_than_it_waits(pg_admin: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.store.transaction as transaction

    monkeypatch.setattr(transaction, "RECONNECT_S", 0.5)
    with store_behind_a_proxy(pg_admin) as (store, proxy):
        model = ScriptedModel([ModelReply("", [ToolCall("c1", "cut", {"n": 1})]), "never"])
        with pytest.raises(StoreError, match=r"^cannot write run \w+ to the store: "):
            run_agent("t", model, _cutting(proxy, 60.0), store=store)
        assert proxy.refused >= 3  # it tried again, with pauses, then gave up


@pytest.mark.process
def test_a_forked_child_commits_on_a_connection_of_its_own(store: RunStore) -> None:
    import gc

    parent_first = run_agent("before the fork", _script(1), _registry(), store=store)
    held = store.committer.writer.connection
    assert held is not None
    pid = os.fork()
    if pid == 0:  # the child: the same store object, so the same committer and its parent's connection
        code = 1
        try:
            child = run_agent("in the child", _script(2), _registry(), store=store, run_id="child-run")
            store.committer.close()  # hands back the child's own connection, never the parent's
            gc.collect()  # nor may a finaliser close the parent's (on PostgreSQL: end its session)
            code = 0 if child.status == "done" else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent_after = run_agent("after the fork", _script(3), _registry(), store=store)
    assert store.committer.writer.connection is held  # still alive: never replaced
    for run_id in (parent_first.run_id, "child-run", parent_after.run_id):
        assert [e.kind for e in store.get_run(run_id).events] == KINDS_PER_RUN


def _idle_connections(store: RunStore) -> int:
    pool = store.engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedin()


@contextmanager
def _write_lock_in_another_process(store_url: str) -> Iterator[subprocess.Popen[str]]:
    """``_write_lock`` held by another process until its stdin closes. (A lock held in this process
    would stay held in a forked child for ever: SQLite's locks are the process's, not the connection's.)"""
    script = textwrap.dedent(f"""
        import sys
        from sqlalchemy import create_engine
        engine = create_engine({store_url!r})
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE")
            print("locked", flush=True)
            sys.stdin.read()
            conn.rollback()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()
        holder.wait(30)


@pytest.mark.process
def test_a_child_forked_while_a_commit_waits_writes_and_reads_on_connections_of_its_own(
        store: RunStore, store_url: str) -> None:
    """A fork copies the committer mid-commit (its leader thread is not in the child) and the pool's
    idle connections (the parent's: SQLite must never use one across a fork). The child starts
    afresh: no connection of the parent's, no commit waiting on a leader that does not exist.

    On SQLite the fork first waits for the commit under way: SQLite keeps every connection's locks
    on a file in one table per process, and a child forked while the parent's commit held the file
    found it locked by a connection it does not have (about 1 fork in 15 here, until its alarm)."""
    first = run_agent("before the fork", _script(0), _registry(), store=store)
    assert store.get_run(first.run_id).status == "done"  # a read: the pool keeps its connection, idle
    assert _idle_connections(store) > 0
    with _write_lock_in_another_process(store_url) as holder:
        waiting = threading.Thread(target=run_agent, args=("in the parent", _script(1), _registry()),
                                   kwargs={"store": store, "run_id": "parent-run"})
        waiting.start()
        _until(lambda: store.committer.busy, "the parent's commit under way")
        assert holder.stdin is not None
        stdin = holder.stdin
        released, forked = threading.Event(), threading.Event()

        def release_once_the_fork_waits() -> None:
            """Let the lock go (the child closes its copy too) once the fork waits for the commit, or is done."""
            _until(lambda: store.committer._closers > 0 or forked.is_set(), "the fork waiting for the commit")
            released.set()
            stdin.close()

        threading.Thread(target=release_once_the_fork_waits, daemon=True).start()
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code, seen = 1, "nothing"
            try:
                os.close(told)
                holder.stdin.close()  # the holder's stdin ends once the parent closes it too
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(20)  # a commit waiting on the parent's leader would wait for ever: killed
                fresh = _idle_connections(store) == 0
                child = run_agent("in the child", _script(2), _registry(), store=store, run_id="child-run")
                read = store.get_run("child-run").status
                seen = repr((fresh, child.status, read))
                code = 0 if (fresh, child.status, read) == (True, "done", "done") else 2
            except BaseException as exc:
                seen = f"{type(exc).__name__}: {exc}"
            finally:
                os.write(tell, seen.encode()[:4000])
                os._exit(code)
        released_before_the_fork = released.is_set()
        forked.set()
        os.close(tell)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(told, "rb") as pipe:
            said = pipe.read().decode()
        waiting.join()
    assert os.waitstatus_to_exitcode(status) == 0, f"the child exited {os.waitstatus_to_exitcode(status)}: {said}"
    if store.engine.dialect.name == "sqlite":
        assert released_before_the_fork  # the fork waited for the commit, which waited for the lock
    for run_id in ("parent-run", "child-run"):
        assert [e.kind for e in store.get_run(run_id).events] == KINDS_PER_RUN


@pytest.mark.process
def test_a_child_forked_from_a_process_with_an_in_memory_store_keeps_its_copy_of_the_database() -> None:
    """An in-memory store's one connection is the database itself: the child keeps its copy."""
    with open_store("sqlite://") as store:
        parent = run_agent("before the fork", _script(0), _registry(), store=store)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                child = run_agent("in the child", _script(1), _registry(), store=store, run_id="child-run")
                seen = sorted(run.run_id for run in store.list_runs())
                code = 0 if (child.status, seen) == ("done", sorted([parent.run_id, "child-run"])) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [run.run_id for run in store.list_runs()] == [parent.run_id]  # the child's run is the child's


def _take_over(store_url: str, run_id: str, owner: str) -> None:
    """What another process's resume does once this one's lease has lapsed: it claims the row."""
    engine = create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(owner=owner))
    finally:
        engine.dispose()


def test_a_process_whose_run_was_taken_over_writes_nothing_more_and_runs_no_tool(store: RunStore,
                                                                                 store_url: str) -> None:
    ran: list[str] = []

    def model(messages: Any, specs: Any) -> ModelReply:
        if len(messages) == 2:  # step 1: meanwhile this process stalls and another one takes the run
            _take_over(store_url, "stalled", "another-host:7@1")
        return ModelReply("", [ToolCall("c1", "pay", {"ref": "p", "cents": 1})])

    reg = ToolRegistry()
    reg.register("pay", "Pay.", {"type": "object", "properties": {"ref": {"type": "string"},
                                                                   "cents": {"type": "integer"}}},
                 lambda ref, cents: ran.append(ref), side_effects=True)
    with pytest.raises(StoreError) as caught:
        run_agent("t", model, reg, store=store, run_id="stalled")
    assert str(caught.value) == ("run stalled was taken over by another-host:7@1 while this process was not "
                                 "renewing its lease; this process writes nothing more to it")
    assert ran == []  # its tool_started never committed, so the tool never ran
    run = store.get_run("stalled")
    assert ([e.kind for e in run.events], run.status, run.owner) == (
        ["run_started", "message", "message", "step_started"], "running", "another-host:7@1")


def test_a_run_taken_over_fails_alone_in_its_group(store: RunStore, store_url: str) -> None:
    go = threading.Barrier(3)
    results: dict[str, Any] = {}

    def model_for(run_id: str) -> Any:
        def model(messages: Any, specs: Any) -> ModelReply:
            if len(messages) == 2:
                go.wait(timeout=10)  # all three reach step 1, then one of them is taken over
                if run_id == "lost":
                    _take_over(store_url, "lost", "another-host:7@1")
                go.wait(timeout=10)
            return ModelReply(f"answer {run_id}") if len(messages) > 3 else ModelReply(
                "", [ToolCall("c1", "lookup", {"ref": run_id})])
        return model

    def one(run_id: str) -> None:
        try:
            results[run_id] = run_agent("t", model_for(run_id), _registry(), store=store, run_id=run_id).status
        except StoreError as exc:
            results[run_id] = str(exc)

    threads = [threading.Thread(target=one, args=(r,)) for r in ("kept-1", "lost", "kept-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {"kept-1": "done", "kept-2": "done", "lost": (
        "run lost was taken over by another-host:7@1 while this process was not renewing its lease; "
        "this process writes nothing more to it")}
    assert [e.kind for e in store.get_run("lost").events] == ["run_started", "message", "message", "step_started"]


def _closed(dbapi_connection: Any) -> bool:
    if hasattr(dbapi_connection, "closed"):  # psycopg
        return bool(dbapi_connection.closed)
    try:  # sqlite3 says so only when used
        dbapi_connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_a_run_still_going_when_its_store_is_closed_is_logged_and_leaves_no_connection_open(
        store: RunStore, store_url: str) -> None:
    opened: list[Any] = []

    def model(messages: Any, specs: Any) -> ModelReply:
        if len(messages) == 2:
            store.close()  # the application shuts the store while this run is still going
            event.listen(store.engine, "connect", lambda dbapi, _record: opened.append(dbapi))
            return ModelReply("", [ToolCall("c1", "lookup", {"ref": "r"})])
        return ModelReply("late")

    result = run_agent("t", model, _registry(), store=store)
    assert (result.status, result.answer) == ("done", "late")
    assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    assert [_closed(c) for c in opened] == [True, True, True]  # each late commit's own, closed after it
    with open_store(store_url) as again:
        assert [e.kind for e in again.get_run(result.run_id).events] == [
            *KINDS_PER_RUN[:10], "step_started", "message", "model_call", "step_finished", "run_finished"]


def test_a_fence_that_matched_too_few_runs_yet_found_no_other_owner_fails_the_runs_once(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fence's check cannot be confirmed (no run of the group has another owner): the
    group's runs fail with one line each, and nothing is retried forever."""
    attempts: list[int] = []
    real_write = Writer.write

    def write(self: Writer, parts: Parts) -> dict[str, str]:
        if parts.progress:
            attempts.append(len(parts.progress))
            raise TakenOver({})
        return real_write(self, parts)

    monkeypatch.setattr(Writer, "write", write)
    with pytest.raises(StoreError) as caught:
        run_agent("t", _script(1), _registry(), store=store, run_id="unconfirmed")
    assert str(caught.value) == ("cannot write run unconfirmed to the store: its summary update matched fewer "
                                 "runs than it carried, none of them taken over")
    assert attempts == [1]
    monkeypatch.undo()
    run = store.get_run("unconfirmed")  # the run's close logged how it ended, as for any failed commit
    assert ([e.kind for e in run.events], run.status, run.error) == (
        ["run_started", "message", "message", "step_started", "message", "model_call", "tool_started",
         "tool_finished", "message", "step_finished", "run_finished"], "cancelled",
        "aborted by StoreError: cannot write run unconfirmed to the store: its summary update matched fewer "
        "runs than it carried, none of them taken over")


def test_a_coroutine_cancelled_while_its_commit_waits_is_still_logged_and_closed(store: RunStore,
                                                                                store_url: str) -> None:
    async def main(release: threading.Event) -> None:
        run = asyncio.ensure_future(arun_agent("task", ScriptedModel(["answer"]), ToolRegistry(), store=store,
                                               run_id="cancelled-mid-commit"))
        for _ in range(3000):
            if store.committer.busy:
                break
            await asyncio.sleep(0.01)
        assert store.committer.busy  # its first commit waits on the lock
        threading.Timer(0.3, release.set).start()  # the run's close waits for that commit, then logs the rest
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    with _write_lock_in_thread(store_url) as release:
        asyncio.run(main(release))
    run = store.get_run("cancelled-mid-commit")
    assert (run.status, [e.kind for e in run.events], [e.seq for e in run.events]) == (
        "cancelled", ["run_started", "message", "message", "step_started", "step_finished", "run_finished"],
        [1, 2, 3, 4, 5, 6])


@pytest.mark.parametrize("driver", ["threads", "coroutines"])
def test_a_side_effect_whose_start_could_not_be_committed_is_logged_not_run_and_a_resume_runs_it_once(
        store: RunStore, monkeypatch: pytest.MonkeyPatch, driver: str) -> None:
    """The commit of ``tool_started`` fails (the disk, the server) and the run is aborted: the tool was
    never called. Its close still commits that start, so the call is logged as not run (refused
    ``not_run``), never left in doubt: a resume would refuse a side effect in doubt, though nothing
    happened. The model is told, calls it again, and the payment is made once."""
    paid: list[int] = []

    def pay(cents: int) -> str:
        paid.append(cents)
        return f"paid {cents}"

    reg = ToolRegistry()
    reg.register("pay", "Pay (writes).", {"type": "object", "properties": {"cents": {"type": "integer"}}}, pay,
                 side_effects=True)
    failed: list[int] = []
    real_write = Writer.write

    def write(self: Writer, parts: Parts) -> dict[str, str]:
        if not failed and any(row[4] == "tool_started" for row in parts.events):
            failed.append(len(parts.events))
            raise self.dbapi_error("disk I/O error")
        return real_write(self, parts)

    monkeypatch.setattr(Writer, "write", write)
    model = ScriptedModel([ModelReply("", [ToolCall("p1", "pay", {"cents": 5})]), "never asked"])

    def start() -> None:
        if driver == "threads":
            run_agent("pay 5", model, reg, store=store, run_id="start-failed")
        else:
            asyncio.run(arun_agent("pay 5", model, reg, store=store, run_id="start-failed"))

    with pytest.raises(StoreError, match=r"^cannot write run start-failed to the store: disk I/O error$"):
        start()
    assert (failed, paid) == ([3], [])
    run = store.get_run("start-failed")
    finished = run.events[7]
    assert ([e.kind for e in run.events][6:], finished.data["refused"], finished.data["ran"], run.status) == (
        ["tool_started", "tool_finished", "message", "step_finished", "run_finished"], "not_run", False,
        "cancelled")
    told = ("ERROR: not run: the run was aborted by StoreError: cannot write run start-failed to the store: "
            "disk I/O error before the call was made")
    assert finished.data["observation"] == run.events[8].data["message"]["content"] == told

    replies = [ModelReply("", [ToolCall("p2", "pay", {"cents": 5})]), ModelReply("paid once")]
    shown: list[Any] = []

    def again(messages: Any, specs: Any) -> ModelReply:
        shown.append(messages[-1])
        return replies.pop(0)

    result = resume(store, "start-failed", again, reg)
    assert (result.status, result.answer, paid) == ("done", "paid once", [5])
    assert shown[0] == {"role": "tool", "tool_call_id": "p1", "name": "pay", "content": told}
    refusals = [e.data.get("refused") for e in store.get_run("start-failed").events if e.kind == "tool_finished"]
    assert refusals == ["not_run", None]


def test_a_fork_waits_for_a_commit_under_way_no_longer_than_it_was_told(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that never ends (a wedged thread) holds a fork off for the wait given, not for ever;
    a Ctrl-C while it waits lets go of the committer, so the parent's commits go on."""
    committer = store.committer
    monkeypatch.setattr(committer, "_leading", 1)  # a commit under way that does not end
    waits: list[float | None] = []  # what each wait for the commit asked for
    wait_for_the_commit = committer._idle.wait

    def counted(timeout: float | None = None) -> bool:
        waits.append(timeout)
        return wait_for_the_commit(timeout)

    monkeypatch.setattr(committer._idle, "wait", counted)
    committer.hold_for_fork(0.2)
    assert not committer._lock.acquire(blocking=False)  # held across the fork
    committer.release_after_fork()
    assert waits  # it waited for the commit, each time for what was left of the 0.2 s, and then gave up
    assert all(timeout is not None and 0 < timeout <= 0.2 for timeout in waits), waits

    def interrupted(timeout: float | None = None) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(committer._idle, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        committer.hold_for_fork(10)
    assert committer._lock.acquire(blocking=False)  # let go of
    committer._lock.release()
    assert committer._closers == 0
    monkeypatch.undo()
    assert run_agent("after", _script(4), _registry(), store=store).status == "done"
