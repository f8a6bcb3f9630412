"""``submit``: record a run as ``queued``, then publish its id to the broker.

The record comes first and is the truth: if publishing fails (the broker is down),
the run stays ``queued`` and a worker's sweep publishes it once the broker is back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from ..store import RunStore
from .agents import PoolError
from .queued import record_queued

BROKER_ENV = "RUNNER_BROKER_URL"
log = logging.getLogger("runner.pool")


def submit(store: RunStore, task: str, *, agent: str, broker: str | None = None, queue: str | None = None,
           labels: Mapping[str, str] | None = None, output_type: str | None = None, **limits: Any) -> str:
    """Queue ``task`` for agent ``agent`` on a worker pool; the new run's id.

    ``broker`` defaults to ``RUNNER_BROKER_URL``; ``queue`` to Celery's default queue.
    ``limits`` are ``max_steps``, ``token_budget`` and the other run limits; they
    override the agent's own. The run is visible as ``queued`` at once, even when
    the broker cannot be reached (a worker's sweep publishes it later). ``output_type`` names the
    typed result by reference (``"myapp.types:Invoice"``), which the worker imports.
    """
    run_id, why = submit_run(store, task, agent=agent, broker=broker, queue=queue, labels=labels,
                             output_type=output_type, **limits)
    if why is not None:
        log.warning("run %s is queued but not published (%s); a worker's sweep will publish it", run_id, why)
    return run_id


def submit_run(store: RunStore, task: str, *, agent: str, broker: str | None = None, queue: str | None = None,
               labels: Mapping[str, str] | None = None, output_type: str | None = None,
               **limits: Any) -> tuple[str, str | None]:
    """``submit``, also saying why publishing failed (None when it did not)."""
    url = broker_url(broker)
    run_id = record_queued(store, task, agent, labels=labels, queue=queue, output_type=output_type, **limits)
    from .app import publish

    try:
        publish(url, run_id, queue)
    except Exception as exc:
        return run_id, f"{type(exc).__name__}: {exc}"
    return run_id, None


def broker_url(broker: str | None) -> str:
    url = broker if broker is not None else os.environ.get(BROKER_ENV)
    if not url:
        raise PoolError(f"no broker: pass broker= (--broker) or set {BROKER_ENV}")
    return url
