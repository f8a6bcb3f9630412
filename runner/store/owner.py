"""Say which process owns a run, with an identity a reused pid cannot fake, and whether it still runs.

An owner is ``host:pid@start/boot/pidns``: pids wrap, and containers each have their own pid 1.
Its process is checked only where it can be seen (same host, boot, PID namespace); elsewhere its heartbeat decides.
Without ``/proc``, as on macOS, the owner is ``host:pid`` and only the pid is checked; older forms read the same way.
A process remembers the runs it let go of (``remember_let_go``): it lives on but drives them no more.
The store judges a run's liveness here (``judge``) when it reads the run: the kernel looks at no process.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .._log import records
from .._log.records import STALE_AFTER_S
from .._log.statuses import Liveness, Status

PROC = Path("/proc")
_NEW = re.compile(r"(?P<host>.*):(?P<pid>\d+)@(?P<start>\d+)/(?P<boot>[0-9A-Za-z-]*)(?:/(?P<pidns>\d+))?")
_OLD = re.compile(r"(?P<host>.*):(?P<pid>\d+)")
_GONE_STATES = frozenset("ZX")  # zombie (killed, not yet reaped by its parent), dead


@dataclass(frozen=True, slots=True)
class Owner:
    """A process identity; ``start``/``boot``/``pidns`` are None when they could not be read."""

    host: str
    pid: int
    start: int | None = None
    boot: str | None = None
    pidns: int | None = None
    text: str = field(init=False, repr=False, compare=False)  # as written to ``owner``, formatted once

    def __post_init__(self) -> None:
        text = f"{self.host}:{self.pid}"
        if self.start is not None:
            text += f"@{self.start}/{self.boot or ''}"
            if self.pidns is not None:
                text += f"/{self.pidns}"
        object.__setattr__(self, "text", text)

    def __str__(self) -> str:
        return self.text


def owner_id() -> str:
    """This process's identity, as recorded on each run it writes (every commit fences on it)."""
    return this_process(os.getpid()).text


@functools.cache
def this_process(pid: int) -> Owner:
    """Cached per pid: a forked child gets its own identity."""
    start = start_ticks(pid)
    return Owner(socket.gethostname(), pid, start, boot_id(), pid_namespace() if start is not None else None)


def parse_owner(text: str | None) -> Owner | None:
    """The identity in an ``owner`` column (any form), or None when it is not one."""
    if not text:
        return None
    found = _NEW.fullmatch(text)
    if found is not None:
        pidns = found["pidns"]
        return Owner(found["host"], int(found["pid"]), int(found["start"]), found["boot"] or None,
                     int(pidns) if pidns is not None else None)
    found = _OLD.fullmatch(text)
    return None if found is None else Owner(found["host"], int(found["pid"]))


def visible(owner: Owner) -> bool:
    """Whether this process can check ``owner``'s process itself: same host, boot and PID namespace.

    Another boot may be this machine before a reboot or another machine of the same name,
    another namespace a container sharing the host's name: both are for the heartbeat to judge.
    An owner of an older form (no namespace recorded) is checked as it always was.
    """
    if owner.host != socket.gethostname():
        return False
    if owner.boot is not None and owner.boot != boot_id():
        return False
    return owner.pidns is None or owner.pidns == pid_namespace()


def owner_alive(owner: Owner) -> bool:
    """Whether ``owner`` (a process this one can see) is still running: same pid, same start, no zombie."""
    if owner.start is None or not (PROC / "self" / "stat").is_file():
        return pid_alive(owner.pid)
    found = proc_stat(owner.pid)
    return found is not None and found[0] not in _GONE_STATES and found[1] == owner.start


def proc_stat(pid: int) -> tuple[str, int] | None:
    """The state (field 3) and start time (field 22) of ``/proc/<pid>/stat``, or None.

    Both are read after the command name, which may hold spaces and parentheses.
    """
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        fields = text[text.rindex(")") + 2:].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``: when the process started, in clock ticks since boot."""
    found = proc_stat(pid)
    return None if found is None else found[1]


def boot_id() -> str | None:
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def pid_namespace() -> int | None:
    """The inode of this process's PID namespace (``/proc/self/ns/pid``), or None without one to read."""
    try:
        return (PROC / "self" / "ns" / "pid").stat().st_ino
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    """Whether some process has this pid (signal 0 checks without sending anything), a zombie not counted."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    found = proc_stat(pid)
    return found is None or found[0] not in _GONE_STATES


# Runs this process let go of (run id -> the owner it held them as): their close could not be
# committed, so their rows may still name this process, which drives them no more. (One dict
# operation each, atomic under the GIL: no lock that a fork could copy held.)
_let_go: dict[str, str] = {}


def remember_let_go(run_id: str, owner: str) -> None:
    """Remember that this process, as ``owner``, stopped driving run ``run_id``."""
    _let_go[run_id] = owner


def forget_let_go(run_id: str) -> None:
    """This process drives ``run_id`` again (it claimed it): forget it was let go of."""
    _let_go.pop(run_id, None)


def was_let_go(run_id: str, owner: str | None) -> bool:
    """Whether this process let go of ``run_id`` while its row names ``owner``."""
    return owner is not None and _let_go.get(run_id) == owner


def judge(status: str, owner: str | None, heartbeat_at: datetime | None, now: datetime | None = None,
          stale_after_s: float = STALE_AFTER_S, *, run_id: str | None = None) -> Liveness:
    """How a run with this ``status``, ``owner`` and ``heartbeat_at`` stands, its owner's process looked at.

    A run this process let go of is stale; an owner this process can see is checked itself;
    any other is judged by its heartbeat at ``now`` (the database server's clock on PostgreSQL).
    """
    if status != Status.RUNNING:
        return records.liveness(status, heartbeat_at, now or datetime.now(UTC))
    if run_id is not None and was_let_go(run_id, owner):
        return Liveness.STALE
    found = parse_owner(owner)
    alive = owner_alive(found) if found is not None and visible(found) else None
    return records.liveness(status, heartbeat_at, now or datetime.now(UTC), stale_after_s, alive=alive)
