"""Liveness against a hostile probe: a process that let go of a run, a zombie owner, an owner in
another PID namespace, a checker whose clock runs ahead. Real processes, real locks, real clocks.

The owning process is ``tests.resume.durable_child`` (its tool hangs until killed when ``hang-REF``
exists); the checker is this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from sqlalchemy import update

from runner import ModelReply, ToolRegistry, open_store
from runner._run.agent import arun_agent, run_agent
from runner._run.resume import resume
from runner.errors import RunInUse, StoreError
from runner.pool.queued import record_queued
from runner.store import RunStore
from runner.store.lease import Heartbeat
from runner.store.owner import owner_id, parse_owner
from runner.store.tables import runs
from tests.conftest import BACKENDS
from tests.resume.durable_child import PlanModel, ran, tools
from tests.store.helpers import store_behind_a_proxy

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "1e" * 16
LOOKUP = [[["c1", "lookup", {"ref": "r1"}]]]


def child(store_url: str, workdir: Path, plan: Any, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen([*prefix, sys.executable, "-m", "tests.resume.durable_child", store_url, str(workdir),
                             json.dumps(plan), *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def hanging_in_its_tool(store_url: str, workdir: Path, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    """A child that owns run ``RUN_ID`` and hangs inside its one tool call (its run live, beating)."""
    (workdir / "hang-r1").touch()
    proc = child(store_url, workdir, LOOKUP, "run", RUN_ID, prefix=prefix)
    deadline = time.monotonic() + 30
    while "lookup r1" not in ran(workdir):
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, "the child never ran its tool"
        time.sleep(0.01)
    return proc


def state_of(pid: int) -> str:
    """Field 3 of /proc/<pid>/stat, read independently of the code under test."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()[0]


def age_heartbeat(store: RunStore, run_id: str, seconds: float) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(
            heartbeat_at=datetime.now(UTC) - timedelta(seconds=seconds)))


# -- a zombie owner ---------------------------------------------------------------


@pytest.mark.process
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc (Linux)")
def test_a_killed_owner_its_parent_has_not_reaped_yet_is_dead(store_url: str, tmp_path: Path) -> None:
    """SIGKILLed, not yet waited for: a zombie keeps its pid and start time, and is dead all the same."""
    proc = hanging_in_its_tool(store_url, tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while state_of(proc.pid) != "Z":  # not reaped: this test is its parent and has not waited
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        with open_store(store_url) as store:
            assert store.get_run(RUN_ID).liveness == "dead"
            result = resume(store, RUN_ID, PlanModel(LOOKUP), tools(tmp_path))
            assert (result.status, result.answer) == ("done", "all done")
        assert state_of(proc.pid) == "Z"  # still unreaped while it was judged
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert ran(tmp_path) == ["lookup r1", "lookup r1"]  # the read-only call in doubt ran again


# -- an owner in another PID namespace ----------------------------------------------------------


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or not Path("/proc/self/ns/pid").exists():
        return False
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


needs_unshare = pytest.mark.skipif(not _unshare_works(), reason="needs unshare(1) of PID namespaces (root on Linux)")
IN_NEW_PID_NAMESPACE = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")


@pytest.mark.process
@needs_unshare
def test_a_live_owner_in_another_pid_namespace_is_live_until_its_heartbeat_goes_stale(
        store_url: str, tmp_path: Path) -> None:
    """Containers sharing a hostname (host networking) each have their own pids: the owner's pid 1
    is not this namespace's pid 1, so the checker waits for its heartbeat to go stale."""
    proc = hanging_in_its_tool(store_url, tmp_path, prefix=IN_NEW_PID_NAMESPACE)
    try:
        with open_store(store_url) as store:
            run = store.get_run(RUN_ID)
            assert run.liveness == "live"
            owner, me = parse_owner(run.owner), parse_owner(owner_id())
            assert owner is not None
            assert me is not None
            assert (owner.host, owner.boot, owner.pid) == (me.host, me.boot, 1)  # pid 1 of its own namespace
            assert owner.pidns != me.pidns
            with pytest.raises(RunInUse):
                resume(store, RUN_ID, PlanModel(LOOKUP), tools(tmp_path))
            proc.kill()  # unshare, and with it (--kill-child) the owner
            proc.communicate(timeout=10)
            assert store.get_run(RUN_ID).liveness == "live"  # nothing here can tell it died: its beat is fresh
            age_heartbeat(store, RUN_ID, 31)
            assert store.get_run(RUN_ID).liveness == "stale"
            result = resume(store, RUN_ID, PlanModel(LOOKUP), tools(tmp_path))
            assert result.status == "done"
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert ran(tmp_path) == ["lookup r1", "lookup r1"]  # once by the owner, once after it went stale


# -- a checker whose clock runs ahead -----------------------------------------------------------


class Ahead(datetime):
    """``datetime`` whose ``now`` is 40 s ahead: the clock of a host that drifted."""

    @classmethod
    def now(cls, tz: Any = None) -> Ahead:
        return datetime.now(tz) + timedelta(seconds=40)  # type: ignore[return-value]


def test_a_checker_whose_clock_runs_ahead_judges_heartbeats_by_the_database_clock(
        store: RunStore, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL heartbeats are the server's clock and so is their age: another host's live
    run stays live for a checker 40 s ahead. SQLite is one machine's file: its own clock judges."""
    run_id = record_queued(store, "job", "tipper")
    other = "elsewhere:7@1/b/1"  # a worker on another host, driving the run and beating for it
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(
            status="running", owner=other, updated_at=datetime.now(UTC) - timedelta(seconds=60)))
    beating = Heartbeat(store.engine, lambda: other, interval_s=3600.0)
    beating.add(run_id)
    beating.beat()
    beating.stop()
    from runner.store import owner, runstore  # the checker's clock (the store judges as it reads), the sweep's

    monkeypatch.setattr(owner, "datetime", Ahead)  # from here on
    monkeypatch.setattr(runstore, "datetime", Ahead)
    if store_url.startswith("sqlite"):
        assert store.get_run(run_id).liveness == "stale"
        return
    assert store.get_run(run_id).liveness == "live"
    assert [r.liveness for r in store.list_runs(status="running")] == ["live"]
    assert store.due_for_publish(30.0) == []  # a pool's sweep does not hand it to another worker
    with pytest.raises(RunInUse):
        store.claim_run(store.get_run(run_id))


# -- a process that let go of a run ---------------------------------------------------------------


class Breakable(NamedTuple):
    """A store whose writes can be made to fail (``cut``) and work again (``mend``)."""

    store: RunStore
    url: str
    cut: Callable[[], object]
    mend: Callable[[], object]


@contextmanager
def _sqlite_breakable(tmp_path: Path) -> Iterator[Breakable]:
    """Writes fail while another connection holds the write lock past a short busy timeout."""
    path = tmp_path / "runs.db"
    store = open_store(path, busy_timeout_s=0.05)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)  # an async model's thread cuts

    def mend() -> None:
        if holder.in_transaction:
            holder.execute("ROLLBACK")

    try:
        yield Breakable(store, f"sqlite:///{path}", lambda: holder.execute("BEGIN IMMEDIATE"), mend)
    finally:
        mend()
        holder.close()
        store.close()


@contextmanager
def _postgres_breakable(request: pytest.FixtureRequest) -> Iterator[Breakable]:
    """Writes fail while a proxy to the server drops every connection and refuses new ones for
    longer than a commit waits for the server."""
    import runner.store.transaction as transaction

    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(transaction, "RECONNECT_S", 0.3)
    with store_behind_a_proxy(request.getfixturevalue("pg_admin")) as (store, proxy):
        def mend() -> None:
            proxy.down_until = 0.0

        yield Breakable(store, store.url.render_as_string(hide_password=False), lambda: proxy.cut(3600.0), mend)


@pytest.fixture(params=BACKENDS)
def breakable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Breakable]:
    with _sqlite_breakable(tmp_path) if request.param == "sqlite" else _postgres_breakable(request) as found:
        yield found


class CuttingModel(PlanModel):
    """``PlanModel`` that makes the store fail as it replies: the commit before the tool fails, and
    so does the close that follows it."""

    def __init__(self, plan: Any, cut: Callable[[], object]) -> None:
        super().__init__(plan)
        self.cut = cut

    def __call__(self, messages: Any, tool_specs: Any) -> ModelReply:
        self.cut()
        return super().__call__(messages, tool_specs)


def _abandoned(breakable: Breakable, workdir: Path, *, driver: str = "sync") -> None:
    """Run ``RUN_ID`` until its commits fail, its close too; then mend the store."""
    model = CuttingModel(LOOKUP, breakable.cut)
    options: dict[str, Any] = {"store": breakable.store, "run_id": RUN_ID, "max_steps": 20, "token_budget": 100_000}

    def drive() -> object:
        if driver == "async":
            return asyncio.run(arun_agent("Do the plan.", model, tools(workdir), **options))
        return run_agent("Do the plan.", model, tools(workdir), **options)

    with pytest.raises(StoreError, match=rf"^cannot write run {RUN_ID} to the store: "):
        drive()
    breakable.mend()
    assert ran(workdir) == []  # its tool never ran: its start could not be committed


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_run_whose_close_failed_is_resumable_in_the_same_process_once_the_store_is_back(
        breakable: Breakable, tmp_path: Path, driver: str) -> None:
    _abandoned(breakable, tmp_path, driver=driver)
    store = breakable.store
    run = store.get_run(RUN_ID)
    assert run.status == "running"  # its close never reached the store
    assert run.liveness != "live"
    owners_seen: list[str | None] = []

    def lookup(ref: str) -> str:
        store.heartbeat.release()  # a release still owed would be written now: none is, the run is ours again
        owners_seen.append(store.get_run(RUN_ID).owner)
        return f"found {ref}"

    registry = ToolRegistry()
    registry.register("lookup", "Look up.", {"type": "object", "properties": {"ref": {"type": "string"}}}, lookup)
    result = resume(store, RUN_ID, PlanModel(LOOKUP), registry)
    assert (result.status, result.answer) == ("done", "all done")
    assert owners_seen == [owner_id()]
    assert (store.get_run(RUN_ID).status, store.get_run(RUN_ID).owner) == ("done", owner_id())


@pytest.mark.process
def test_a_run_whose_close_failed_is_released_for_other_processes_once_the_store_is_back(
        breakable: Breakable, tmp_path: Path) -> None:
    _abandoned(breakable, tmp_path)
    deadline = time.monotonic() + 10
    while breakable.store.get_run(RUN_ID).owner is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # the release is written as soon as the store takes writes again
    run = breakable.store.get_run(RUN_ID)
    assert (run.status, run.owner, run.heartbeat_at, run.liveness) == ("running", None, None, "stale")
    resumer = child(breakable.url, tmp_path, LOOKUP, "resume", RUN_ID)  # while this process lives on
    out, err = resumer.communicate(timeout=60)
    assert resumer.returncode == 0, err
    assert json.loads(out)["status"] == "done"
    assert ran(tmp_path) == ["lookup r1"]
    assert breakable.store.get_run(RUN_ID).status == "done"
