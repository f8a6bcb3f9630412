"""Who owns a running run, and whether that process is still the one that started it.

A pid alone lies: inside a container the killed run's pid 1 is the next container's
pid 1, and pids wrap. The owner records the process start time (clock ticks since
boot, field 22 of /proc/<pid>/stat) and the boot id, so a reused pid reads ``dead``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

from runner import ScriptedModel, run_agent
from runner.store import RunStore
from runner.store.owner import Owner, owner_id, parse_owner
from runner.store.tables import runs
from tests.loop_helpers import weather_registry

HOST = socket.gethostname()
PROC = Path("/proc/self/stat").is_file()
needs_proc = pytest.mark.skipif(not PROC, reason="needs /proc (Linux)")


def start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, read independently of the code under test."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2:].split()[19])


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def gone_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def liveness_with_owner(store: RunStore, owner: str) -> str:
    """Record a run, then make it look unfinished and owned by ``owner``."""
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.run_id == result.run_id).values(status="running", owner=owner))
    return store.get_run(result.run_id).liveness


@needs_proc
def test_owner_id_is_host_pid_start_time_and_boot_id() -> None:
    assert owner_id() == f"{HOST}:{os.getpid()}@{start_ticks(os.getpid())}/{boot_id()}"


@needs_proc
def test_a_recorded_run_carries_the_full_owner_identity(store: RunStore) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    assert store.get_run(result.run_id).owner == f"{HOST}:{os.getpid()}@{start_ticks(os.getpid())}/{boot_id()}"


@needs_proc
def test_an_owner_whose_pid_is_alive_but_started_at_another_time_is_dead(store: RunStore) -> None:
    me = os.getpid()
    assert liveness_with_owner(store, f"{HOST}:{me}@{start_ticks(me) + 1}/{boot_id()}") == "dead"


@needs_proc
def test_pid_1_of_an_earlier_container_is_dead(store: RunStore) -> None:
    assert start_ticks(1) != 987654321
    assert liveness_with_owner(store, f"{HOST}:1@987654321/{boot_id()}") == "dead"


@needs_proc
def test_an_owner_from_before_a_reboot_is_dead(store: RunStore) -> None:
    me = os.getpid()
    other_boot = "00000000-0000-0000-0000-000000000000"
    assert liveness_with_owner(store, f"{HOST}:{me}@{start_ticks(me)}/{other_boot}") == "dead"


def test_the_current_process_is_live(store: RunStore) -> None:
    assert liveness_with_owner(store, owner_id()) == "live"


def test_old_host_pid_owners_are_still_read(store: RunStore) -> None:
    assert liveness_with_owner(store, f"{HOST}:{os.getpid()}") == "live"
    assert liveness_with_owner(store, f"{HOST}:{gone_pid()}") == "dead"


def test_an_owner_on_another_host_is_judged_by_its_heartbeat(store: RunStore) -> None:
    assert liveness_with_owner(store, f"elsewhere:{os.getpid()}@1/{'0' * 8}") == "live"  # heartbeat is fresh


@pytest.mark.parametrize(("text", "parsed"), [
    ("web-1:42@1234/8c1a-ff", Owner("web-1", 42, 1234, "8c1a-ff")),
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
