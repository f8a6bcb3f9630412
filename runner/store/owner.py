"""Which process owns a run: an identity a reused pid cannot fake.

A run records its owner as ``host:pid@start/boot``: the process's start time in
clock ticks since boot (field 22 of ``/proc/<pid>/stat``) and the kernel's boot id
(``/proc/sys/kernel/random/boot_id``). A pid alone lies: the killed run's pid 1 in a
container is the next container's pid 1, and pids wrap. On this host an owner is
alive only when its pid runs AND started at the recorded tick of the same boot.

Without ``/proc`` (macOS) the owner is the older ``host:pid`` and only the pid is
checked; owners of that form written by earlier versions are read the same way.
This pair (make an identity, parse and check one) is the seam a heartbeat lease and
an atomic owner compare-and-set build on.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
_NEW = re.compile(r"(?P<host>.*):(?P<pid>\d+)@(?P<start>\d+)/(?P<boot>[0-9A-Za-z-]*)")
_OLD = re.compile(r"(?P<host>.*):(?P<pid>\d+)")


@dataclass(frozen=True, slots=True)
class Owner:
    """A process identity; ``start``/``boot`` are None when they could not be read."""

    host: str
    pid: int
    start: int | None = None
    boot: str | None = None
    text: str = field(init=False, repr=False, compare=False)  # as written to ``owner``, formatted once

    def __post_init__(self) -> None:
        text = f"{self.host}:{self.pid}"
        if self.start is not None:
            text += f"@{self.start}/{self.boot or ''}"
        object.__setattr__(self, "text", text)

    def __str__(self) -> str:
        return self.text


def owner_id() -> str:
    """This process's identity, as recorded on each run it writes (every commit fences on it)."""
    return this_process(os.getpid()).text


@functools.cache
def this_process(pid: int) -> Owner:
    """Cached per pid: a forked child gets its own identity."""
    return Owner(socket.gethostname(), pid, start_ticks(pid), boot_id())


def parse_owner(text: str | None) -> Owner | None:
    """The identity in an ``owner`` column (either form), or None when it is not one."""
    if not text:
        return None
    found = _NEW.fullmatch(text)
    if found is not None:
        return Owner(found["host"], int(found["pid"]), int(found["start"]), found["boot"] or None)
    found = _OLD.fullmatch(text)
    return None if found is None else Owner(found["host"], int(found["pid"]))


def owner_alive(owner: Owner) -> bool:
    """Whether ``owner`` (a process on this host) is still running: same boot, same pid, same start."""
    if owner.start is None or not (PROC / "self" / "stat").is_file():
        return pid_alive(owner.pid)
    boot = boot_id()
    if owner.boot is not None and boot is not None and owner.boot != boot:
        return False  # the machine rebooted since: every process of that boot is gone
    return start_ticks(owner.pid) == owner.start


def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (after the command name, which may hold spaces and parentheses)."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def boot_id() -> str | None:
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    """Whether some process has this pid (signal 0 checks without sending anything)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True
