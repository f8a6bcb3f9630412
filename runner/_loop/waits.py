"""The one wait policy of both drivers: how long to wait on a call, and what ends the wait.

A wait ends at the first of: the call's own timeout, the run's deadline, or the next look at the
cancel event or the store's cancel requests (the ``watch``). Pure arithmetic over the times the driver
reads, so the thread flight and the task flight (and a single call, a flight of one) cannot drift apart.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Protocol

from .._log.limits import Limits
from .._log.statuses import Status
from .actions import Outcome

# How often a wait wakes up to look at the cancel event.
CANCEL_POLL_S = 0.01


class Cancel(Protocol):
    """What a run's ``cancel`` option is: a ``threading.Event``, an ``asyncio.Event``, or any object like them.

    Once set, the run stops at once, abandoning the model or tool call it waits on. A cancel
    whose ``lets_tools_finish`` attribute is true (``runner cancel``'s) never cuts a tool call:
    cut mid-call, a side effect would be left in doubt, so the run stops once the call returns.
    """

    def is_set(self) -> bool: ...


class Watch(Protocol):
    """The cancel requests of a stored run (``runner cancel``), as its driver sees them.

    ``is_set()`` is cheap to call often: it reads the store at most once a bound, and the run's
    own commits tell it what they read. ``requested_by`` names who asked, once it is set.
    A watch never cuts a tool call, and never makes a call run on a worker thread by itself.
    """

    requested_by: str | None

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Waits:
    """What may stop a run's waits: its deadline ``ends_by`` (monotonic seconds; inf: none), its cancel event.

    ``watch``: the store's cancel requests (``Watch``), looked at at checkpoints and while a model call runs.
    """

    ends_by: float = math.inf
    cancel: Cancel | None = None
    cancel_cuts_tools: bool = True
    watch: Watch | None = None

    @property
    def needed(self) -> bool:
        """Whether calls must run on a worker so the driver can stop waiting (a deadline or a cancel)."""
        return self.ends_by != math.inf or self.cancel is not None

    def needed_for(self, in_tool: bool) -> bool:
        """``needed``, for one call: a model call runs on a worker under a ``watch`` too, which may abandon it."""
        return self.needed or (self.watch is not None and not in_tool)

    def watches_cancel(self, in_tool: bool = False) -> bool:
        """Whether a cancel stops the run now, or (``in_tool``) while a tool call runs."""
        return (self.cancel is not None and (self.cancel_cuts_tools or not in_tool)) or \
            (self.watch is not None and not in_tool)

    def stop(self, now: float, in_tool: bool = False) -> Status | None:
        """The status to stop with at ``now``, if any: ``in_tool`` while a tool call runs (see ``Cancel``)."""
        if self.cancel is not None and (self.cancel_cuts_tools or not in_tool) and self.cancel.is_set():
            return Status.CANCELLED
        if self.watch is not None and not in_tool and self.watch.is_set():
            return Status.CANCELLED
        if now >= self.ends_by:
            return Status.DEADLINE
        return None


def waits_of(limits: Limits, cancel: Cancel | None, started: float, watch: Watch | None = None) -> Waits:
    """The waits of a run that starts at ``started``: its deadline is ``limits.timeout_s`` after."""
    ends_by = started + limits.timeout_s if limits.timeout_s else math.inf
    return Waits(ends_by, cancel, not getattr(cancel, "lets_tools_finish", False), watch)


def call_ends(started: float, timeout_s: float | None) -> float:
    """When a call started at ``started`` times out (inf: never)."""
    return started + timeout_s if timeout_s is not None else math.inf


def next_wait(waits: Waits, ends: float, now: float, in_tool: bool) -> float:
    """How many seconds to wait at ``now`` on calls the first of which times out at ``ends`` (inf: for ever)."""
    wait = min(ends, waits.ends_by) - now
    if waits.watches_cancel(in_tool):
        wait = min(wait, CANCEL_POLL_S)
    return wait


def expired(stop: Status | None, started: float, ends: float, now: float, call_id: str | None) -> Outcome | None:
    """The outcome of a call still running at ``now``: cut short by ``stop``, timed out at ``ends``, or None."""
    if stop:
        return Outcome(stop=stop, elapsed_s=now - started, call_id=call_id)
    if now >= ends:
        return Outcome(timed_out=True, elapsed_s=now - started, call_id=call_id)
    return None


def lock_timeout(wait: float) -> float | None:
    """A lock's timeout for a wait of ``wait`` seconds (None: no limit; capped at ``threading.TIMEOUT_MAX``).

    A longer timeout overflows the platform's clock (``OverflowError``); the caller's loop just waits again.
    """
    return None if wait == math.inf else min(max(wait, 0.0), threading.TIMEOUT_MAX)


def task_timeout(wait: float) -> float | None:
    """``asyncio.wait``'s timeout for a wait of ``wait`` seconds (None: no limit)."""
    return None if wait == math.inf else max(wait, 0.0)
