"""The Celery side: one app per broker, one task (``runner.run``) carrying a run id, the worker.

Celery's conventions: JSON only, late acknowledgement with ``reject_on_worker_lost``,
prefetch 1, no result backend (the store holds every outcome). Workers use the thread
pool, so killing a ``runner worker`` ends every run it drives, and its heartbeat. A timer
thread in each worker (no Celery beat) sweeps: it publishes again the runs left ``queued``
or whose owner is gone, and the decided ones awaiting approval. Why each: docs/workers.md.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celery import Celery, signals
from celery.exceptions import InvalidTaskError
from celery.worker.strategy import default as default_strategy

from .._text import plural
from ..store import DEFAULT_QUEUE, RunStore, open_store
from .agents import Factory, PoolError
from .take import take

TASK_NAME = "runner.run"
SOCKET_TIMEOUT_S = 4.0  # a broker's every reply; a publish to one that never answers gives up in about 10 s
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
        broker_connection_timeout=SOCKET_TIMEOUT_S, worker_hijack_root_logger=False,
        # Publishing gives up after one quick retry (the run is recorded queued; the sweep publishes it later),
        # each try bounded on Redis too (without a socket timeout a server that never answers holds it for ever).
        broker_transport_options={"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5,
                                  "socket_timeout": SOCKET_TIMEOUT_S, "socket_connect_timeout": SOCKET_TIMEOUT_S},
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    app.task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             Strategy=f"{__name__}:guarded_strategy")(run_task)
    return app


class HandlerFailed(Exception):
    """An error a message handler raised, carried on as itself would be on RabbitMQ: it stops the worker.

    Its repr is the error's own, so the worker's "Unrecoverable error" line names what really failed.
    """

    def __repr__(self) -> str:
        return repr(self.__cause__)


def guarded_strategy(task: Any, app: Celery, consumer: Any, **options: Any) -> Any:
    """``checked_strategy``, whose handler's ``KeyError`` goes on as ``HandlerFailed``.

    kombu's Redis transport counts a ``KeyError`` among lost connections, so a handler that raised one
    made a worker reconnect and take the same message again, for ever; RabbitMQ stops the worker
    (exit 3). Carried on as ``HandlerFailed``, it stops the worker on both.
    """
    handle = checked_strategy(task, app, consumer, **options)

    def on_message(*args: Any, **more: Any) -> Any:
        try:
            return handle(*args, **more)
        except KeyError as exc:
            raise HandlerFailed(str(exc)) from exc

    return on_message


def checked_strategy(task: Any, app: Celery, consumer: Any, **options: Any) -> Any:
    """Celery's own strategy, behind a check that a message has the task protocol's shape.

    A JSON body that is not ``[args, kwargs, embed]``, or headers without an ``id`` (anyone who can
    publish to the queue can send either), raised deep inside Celery, which stopped the worker and
    left the message queued for the next worker to die on. Refused here, it is logged and rejected
    (Celery's way with an invalid task message, so it leaves the queue) and the worker goes on.
    """
    handle = default_strategy(task, app, consumer, **options)

    def on_message(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **more: Any) -> Any:
        fields = body  # protocol 1: the body holds the id and the rest
        if body is None:  # protocol 2: Celery reads the body itself later
            payload = message.payload
            hybrid = isinstance(payload, dict) and "args" in payload
            if not hybrid and not _protocol_body(payload):
                raise InvalidTaskError(f"a {TASK_NAME} message whose body is not [args, kwargs, embed]: "
                                       f"{type(payload).__name__}")
            fields = {**payload, **(message.headers or {})} if hybrid else message.headers
        why = _bad_fields(fields)
        if why is not None:
            raise InvalidTaskError(f"a {TASK_NAME} message {why}")
        return handle(message, body, ack, reject, callbacks, **more)

    return on_message


def _protocol_body(payload: Any) -> bool:
    return (isinstance(payload, (list, tuple)) and len(payload) == 3 and isinstance(payload[0], (list, tuple))
            and isinstance(payload[1], dict) and (payload[2] is None or isinstance(payload[2], dict)))


def _bad_fields(fields: Any) -> str | None:
    """What is wrong with a task message's headers (its body's fields in protocol 1) for Celery, or None."""
    if not isinstance(fields, dict):
        return f"whose headers are not a mapping: {type(fields).__name__}"
    task_id = fields.get("id")
    if not isinstance(task_id, str) or not task_id:
        return "without an id header" if task_id is None else f"whose id is not a string: {type(task_id).__name__}"
    shadow = fields.get("shadow")
    if shadow is not None and not isinstance(shadow, str):
        return f"whose shadow header is not a string: {type(shadow).__name__}"
    limits = fields.get("timelimit")
    if limits and not (isinstance(limits, (list, tuple)) and len(limits) == 2 and all(
            limit is None or (isinstance(limit, (int, float)) and not isinstance(limit, bool)) for limit in limits)):
        return f"whose timelimit header is not [hard, soft] seconds: {limits!r:.40}"
    return None


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
    ending = _Ending()
    signals.worker_shutting_down.connect(ending.asked, weak=False)
    signals.worker_shutdown.connect(ending.stopped, weak=False)
    try:
        app.worker_main(["worker", "--pool=threads", f"--concurrency={concurrency}",
                         f"--queues={queue or DEFAULT_QUEUE}", f"--loglevel={loglevel}",
                         f"--hostname=runner-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                         "--without-heartbeat"])
    finally:
        signals.worker_shutting_down.disconnect(ending.asked)
        signals.worker_shutdown.disconnect(ending.stopped)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # Celery sent them to its log
        stop.set()
        store.close()
    if ending.exitcode and not ending.by_signal:
        raise PoolError(f"the worker stopped on an unrecoverable error (exit code {ending.exitcode}; "
                        "the log above says which)")


class _Ending:
    """How Celery's worker ended: its exit code, and whether a signal (Ctrl-C, SIGTERM) asked it to.

    ``worker_main`` drops the exit code, so a worker stopped by an error it cannot recover from
    exited 0, as if asked to stop; a signal's stop keeps its status 0.
    """

    def __init__(self) -> None:
        self.exitcode: int | None = None
        self.by_signal = False

    def asked(self, **_: Any) -> None:
        self.by_signal = True

    def stopped(self, sender: Any = None, **_: Any) -> None:
        code = getattr(sender, "exitcode", None)
        if isinstance(code, int) and code:
            self.exitcode = code


def _sweep(store: RunStore, broker: str, queue: str | None, sweep_s: float, requeue_after_s: float,
           stop: threading.Event) -> None:
    while not stop.wait(sweep_s):
        due = []
        try:
            due = store.due_for_publish(requeue_after_s, queue)
            while due:
                publish(broker, due[0].run_id, queue)
                log.info("sweep: published run %s again", due.pop(0).run_id)
        except Exception as exc:  # the broker or the store is down: try again next time
            log.warning("sweep failed: %s: %s", type(exc).__name__, exc)
            try:  # what it could not publish is due again for the other workers, not in requeue_after_s
                store.untouch(due)
            except Exception as again:
                log.warning("sweep could not give back %s: %s", plural(len(due), "run"), again)
