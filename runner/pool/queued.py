"""The pool's requests to the store: queue a run, cancel one (``StoreCancel``, what its driver watches, is ``_run``'s).

The store keeps the queue (``RunStore.queue_run``, ``request_cancel``, ``cancel_queued``,
``cancel_requested``, ``due_for_publish``, ``untouch``); this module checks what a
submitter asks for against what a worker will accept, so a mistake is refused at
submission, and says what a cancel did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._log.limits import Limits, limit_names
from .._log.statuses import Status
from .._run.cancels import StoreCancel
from .._run.identity import checked_run_id
from .._tools.output import output_by_ref
from ..events import RunQueued
from ..store import RunStore
from .agents import PoolError

__all__ = ["CANCELLED_QUEUED", "CANCELLED_RUNNING", "StoreCancel", "record_queued", "request_cancel"]

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


def request_cancel(store: RunStore, run_id: str, by: str | None = None) -> str:
    """Ask, as ``by`` (default: the OS user), for run ``run_id`` to be cancelled; the status it has now.

    A queued run is ``cancelled`` at once; a running one, whoever drives it, stops before its next
    model or tool call and logs who asked (``cancel_requested``).
    """
    run = store.get_run(run_id)
    if run.status not in (Status.QUEUED, Status.RUNNING):
        raise PoolError(f"run {run.run_id} has already finished ({run.status}); nothing to cancel")
    store.request_cancel(run_id, by)  # asked before: that request stands
    if run.status == Status.QUEUED and store.cancel_queued(run_id, CANCELLED_QUEUED):
        return Status.CANCELLED
    return store.get_run(run_id).status
