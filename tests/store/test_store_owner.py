"""Who owns a running run, and whether that process is still the one that started it.

A pid alone lies: inside a container the killed run's pid 1 is the next container's
pid 1, and pids wrap. The owner records the process start time (clock ticks since
boot, field 22 of /proc/<pid>/stat), the boot id and the PID namespace, so a reused
pid reads ``dead``, and an owner this process cannot see (another boot, another PID
namespace) is judged by its heartbeat.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from runner import ScriptedModel, run_agent
from runner.store import RunStore
from runner.store.owner import Owner, owner_id, parse_owner
from runner.store.tables import runs
from tests.loop.helpers import weather_registry

HOST = socket.gethostname()
PROC = Path("/proc/self/stat").is_file()
needs_proc = pytest.mark.skipif(not PROC, reason="needs /proc (Linux)")


def start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, read independently of the code under test."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2:].split()[19])


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def pid_ns() -> int:
    """The inode of this process's PID namespace, read independently of the code under test."""
    return os.stat("/proc/self/ns/pid").st_ino


def gone_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def liveness_with_owner(store: RunStore, owner: str, heartbeat_age_s: float | None = None) -> str:
    """Record a run, then make it look unfinished and owned by ``owner`` (its last heartbeat
    ``heartbeat_age_s`` ago, if given; else as the run left it, fresh)."""
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    values: dict[str, object] = {"status": "running", "owner": owner}
    if heartbeat_age_s is not None:
        values["heartbeat_at"] = datetime.now(UTC) - timedelta(seconds=heartbeat_age_s)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == result.run_id).values(values))
    return store.get_run(result.run_id).liveness


def both_forms(owner: str) -> list[str]:
    """``owner`` as earlier versions wrote it, and with this process's PID namespace."""
    return [owner, f"{owner}/{pid_ns()}"]


@needs_proc
def test_owner_id_is_host_pid_start_time_boot_id_and_pid_namespace() -> None:
    assert owner_id() == f"{HOST}:{os.getpid()}@{start_ticks(os.getpid())}/{boot_id()}/{pid_ns()}"


@needs_proc
def test_a_recorded_run_carries_the_full_owner_identity(store: RunStore) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    assert store.get_run(result.run_id).owner == (f"{HOST}:{os.getpid()}@{start_ticks(os.getpid())}/{boot_id()}"
                                                  f"/{pid_ns()}")


@needs_proc
def test_an_owner_whose_pid_is_alive_but_started_at_another_time_is_dead(store: RunStore) -> None:
    me = os.getpid()
    for owner in both_forms(f"{HOST}:{me}@{start_ticks(me) + 1}/{boot_id()}"):
        assert liveness_with_owner(store, owner) == "dead"


@needs_proc
def test_pid_1_of_an_earlier_container_is_dead(store: RunStore) -> None:
    assert start_ticks(1) != 987654321
    for owner in both_forms(f"{HOST}:1@987654321/{boot_id()}"):
        assert liveness_with_owner(store, owner) == "dead"


@needs_proc
def test_an_owner_of_another_boot_is_judged_by_its_heartbeat(store: RunStore) -> None:
    """Another boot id is this machine before a reboot, or another machine of the same name: its
    process cannot be checked from here. An orphan of a reboot is resumable once its beat is stale."""
    me = os.getpid()
    other_boot = "00000000-0000-0000-0000-000000000000"
    for owner in both_forms(f"{HOST}:{me}@{start_ticks(me)}/{other_boot}"):
        assert liveness_with_owner(store, owner) == "live"  # its heartbeat is fresh
        assert liveness_with_owner(store, owner, heartbeat_age_s=31) == "stale"


@needs_proc
def test_an_owner_in_another_pid_namespace_is_judged_by_its_heartbeat(store: RunStore) -> None:
    """A container sharing the host's name (host networking) has its own pids: pid 1 there is not
    our pid 1, so neither its absence nor another start time here says it is gone."""
    owner = f"{HOST}:1@987654321/{boot_id()}/{pid_ns() + 1}"
    assert liveness_with_owner(store, owner) == "live"
    assert liveness_with_owner(store, owner, heartbeat_age_s=31) == "stale"


def test_the_current_process_is_live(store: RunStore) -> None:
    assert liveness_with_owner(store, owner_id()) == "live"


@pytest.mark.process
def test_old_host_pid_owners_are_still_read(store: RunStore) -> None:
    assert liveness_with_owner(store, f"{HOST}:{os.getpid()}") == "live"
    assert liveness_with_owner(store, f"{HOST}:{gone_pid()}") == "dead"


def test_an_owner_on_another_host_is_judged_by_its_heartbeat(store: RunStore) -> None:
    assert liveness_with_owner(store, f"elsewhere:{os.getpid()}@1/{'0' * 8}") == "live"  # heartbeat is fresh


@pytest.mark.parametrize(("text", "parsed"), [
    ("web-1:42@1234/8c1a-ff/4026531836", Owner("web-1", 42, 1234, "8c1a-ff", 4026531836)),
    ("web-1:42@1234//4026531836", Owner("web-1", 42, 1234, None, 4026531836)),
    ("web-1:42@1234/8c1a-ff", Owner("web-1", 42, 1234, "8c1a-ff")),
    ("web-1:42@1234/8c1a-ff/x", None),
    ("web-1:42@1234/", Owner("web-1", 42, 1234, None)),
    ("web-1:42", Owner("web-1", 42, None, None)),
    ("web-1:42@x/y", None),
    ("web-1:x", None),
    ("", None),
    (None, None),
])
def test_parse_owner(text: str | None, parsed: Owner | None) -> None:
    assert parse_owner(text) == parsed
    if parsed is not None and parsed.start is not None:
        assert parse_owner(str(parsed)) == parsed


@pytest.mark.process
def test_without_proc_the_owner_is_host_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.store import owner

    monkeypatch.setattr(owner, "PROC", Path("/nonexistent-proc"))
    owner.this_process.cache_clear()
    try:
        assert owner_id() == f"{HOST}:{os.getpid()}"
        assert owner.owner_alive(Owner(HOST, os.getpid(), 5, "b")) is True  # cannot check the start: pid only
        assert owner.owner_alive(Owner(HOST, gone_pid(), 5, "b")) is False
    finally:
        owner.this_process.cache_clear()
