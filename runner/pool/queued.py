"""The pool's requests to the store: queue a run, cancel one, and a cancel its driver can poll.

The store keeps the queue (``RunStore.queue_run``, ``request_cancel``, ``cancel_queued``,
``cancel_requested``, ``due_for_publish``, ``untouch``); this module checks what a
submitter asks for against what a worker will accept, so a mistake is refused at
submission, and says what a cancel did.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from .._log.limits import Limits, limit_names
from .._log.statuses import Status
from .._run.identity import checked_run_id
from .._tools.output import output_by_ref
from ..events import RunQueued
from ..store import RunStore
from .agents import PoolError

CANCELLED_QUEUED = "cancelled before a worker started it"
CANCELLED_RUNNING = "cancel requested"


def record_queued(store: RunStore, task: str, agent: str, *, labels: Mapping[str, str] | None = None,
                  queue: str | None = None, run_id: str | None = None, output_type: str | None = None,
                  **limits: Any) -> str:
    """Record a run as ``queued``: its row and its ``run_queued`` fact, in one transaction.

    ``output_type`` names the typed result (``module:attr``): it must import here, as a worker will.
    """
    if not isinstance(task, str) or not task:
        raise ValueError("task must be a non-empty string")
    if not isinstance(agent, str) or not agent:
        raise ValueError("agent must be a non-empty agent name")
    unknown = sorted(set(limits) - set(limit_names()))
    if unknown:
        raise TypeError(f"unknown limit(s): {', '.join(unknown)} (known: {', '.join(limit_names())})")
    Limits(**limits)  # refused now rather than when a worker starts the run
    labels = dict(labels or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ValueError("labels must map strings to strings")
    if output_type is not None:
        if not isinstance(output_type, str):
            raise TypeError("output_type must name the type as 'module:attr' for a worker to import it")
        output_by_ref(output_type)  # ValueError now rather than when a worker starts the run
    run_id = checked_run_id(run_id)
    store.queue_run(RunQueued(run_id=run_id, task=task, agent_name=agent, limits=dict(limits), labels=labels,
                              queue=queue, output_type=output_type))
    return run_id


def request_cancel(store: RunStore, run_id: str) -> str:
    """Ask for run ``run_id`` to be cancelled; the status it has now (``cancelled`` for a queued run)."""
    run = store.get_run(run_id)
    if run.status not in (Status.QUEUED, Status.RUNNING):
        raise PoolError(f"run {run.run_id} has already finished ({run.status}); nothing to cancel")
    store.request_cancel(run_id)  # asked before: that request stands
    if run.status == Status.QUEUED and store.cancel_queued(run_id, CANCELLED_QUEUED):
        return Status.CANCELLED
    return store.get_run(run_id).status


class StoreCancel:
    """A run's ``cancel`` option backed by the store's cancel requests.

    ``is_set()`` reads the store at most once every ``every_s``: the loop polls it every few
    milliseconds while a model call runs. A running tool call is let finish (``lets_tools_finish``):
    the run stops before its next model or tool call, with no call left in doubt.
    """

    lets_tools_finish = True

    def __init__(self, store: RunStore, run_id: str, every_s: float = 0.5) -> None:
        self.store, self.run_id, self.every_s = store, run_id, every_s
        self._set = False
        self._next = 0.0
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        with self._lock:
            if self._set or time.monotonic() < self._next:
                return self._set
            self._next = time.monotonic() + self.every_s
        try:
            found = self.store.cancel_requested(self.run_id)
        except Exception:
            return False  # the store is briefly unreachable: the run's own next commit will say so
        self._set = self._set or found
        return self._set
