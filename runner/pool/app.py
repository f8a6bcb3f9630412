"""The Celery side: one app per broker, one task (``runner.run``) carrying a run id, the worker.

Configuration follows Celery's conventions: JSON only (no pickle), late
acknowledgement with ``reject_on_worker_lost`` (a killed worker's message goes back to
the queue), prefetch 1 (a worker holds no message it is not working on), no result
backend (the store holds every outcome). Workers use Celery's thread pool: one
process per ``runner worker``, so killing it ends every run it drives at once, and
its heartbeat thread with them.

The sweep is a plain timer thread in each worker (no Celery beat): every
``sweep_s`` it publishes runs left ``queued`` or whose owner is gone for longer than
``requeue_after_s`` (a message lost, a broker down at submission, a worker dead
with the broker unaware). A duplicate message costs one store read.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from celery import Celery

from ..store import RunStore, open_store
from .agents import Factory
from .queued import due_for_publish
from .take import take

TASK_NAME = "runner.run"
DEFAULT_QUEUE = "celery"
log = logging.getLogger("runner.pool")


@dataclass
class WorkerContext:
    """What the task needs in a worker process."""

    store: RunStore
    agents: Mapping[str, Factory]
    cancel_poll_s: float = 0.5


_context: WorkerContext | None = None


def run_task(run_id: str) -> str:
    """The task: take the run (start, resume, or drop a stale delivery)."""
    if _context is None:
        raise RuntimeError("runner.run executed outside a runner worker")
    return take(_context.store, run_id, _context.agents, cancel_poll_s=_context.cancel_poll_s)


@functools.cache
def make_app(broker: str, queue: str | None = None) -> Celery:
    """The app for ``broker`` (cached per process: it pools the broker connections)."""
    app = Celery("runner", broker=broker, set_as_current=False)
    app.conf.update(
        task_serializer="json", result_serializer="json", event_serializer="json", accept_content=["json"],
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_ignore_result=True, task_default_queue=queue or DEFAULT_QUEUE, broker_connection_retry_on_startup=True,
        broker_connection_timeout=4, worker_hijack_root_logger=False,
        # Publishing gives up after one quick retry (the run is recorded queued; the sweep publishes it later).
        broker_transport_options={"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5},
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    app.task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, ignore_result=True)(run_task)
    return app


def publish(broker: str, run_id: str, queue: str | None = None) -> None:
    """Send ``runner.run(run_id)``; raises when the broker cannot be reached (no retries)."""
    make_app(broker, queue).send_task(TASK_NAME, args=[run_id], queue=queue or DEFAULT_QUEUE, retry=False)


def serve(db: str, broker: str, agents: Mapping[str, Factory], *, concurrency: int = 4, queue: str | None = None,
          sweep_s: float = 30.0, requeue_after_s: float = 60.0, cancel_poll_s: float = 0.5,
          loglevel: str = "INFO") -> None:
    """Run a Celery worker on ``queue`` until it is stopped (``runner worker``)."""
    global _context
    store = open_store(db)
    _context = WorkerContext(store, agents, cancel_poll_s)
    app = make_app(broker, queue)
    stop = threading.Event()
    sweeper = threading.Thread(target=_sweep, args=(store, broker, queue, sweep_s, requeue_after_s, stop),
                               name="runner-sweep", daemon=True)
    sweeper.start()
    try:
        app.worker_main(["worker", "--pool=threads", f"--concurrency={concurrency}",
                         f"--queues={queue or DEFAULT_QUEUE}", f"--loglevel={loglevel}",
                         f"--hostname=runner-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                         "--without-heartbeat"])
    finally:
        stop.set()
        store.close()


def _sweep(store: RunStore, broker: str, queue: str | None, sweep_s: float, requeue_after_s: float,
           stop: threading.Event) -> None:
    while not stop.wait(sweep_s):
        try:
            for run_id in due_for_publish(store, requeue_after_s):
                publish(broker, run_id, queue)
                log.info("sweep: published run %s again", run_id)
        except Exception as exc:  # the broker or the store is down: try again next time
            log.warning("sweep failed: %s: %s", type(exc).__name__, exc)
