"""One thread per process that builds the live runs' spans, so no step waits for it.

A recorder hands over work (a callable) with ``put``; the thread runs the work in order.
``wait`` returns once everything handed over before it is done: a run's end waits there,
so ``force_flush`` after the run returns finds every span of it at its processors. Once a
wait gave up (a processor hangs), later ones do not wait again until the thread got past it.
A forked child process starts its own thread; interpreter exit runs what is left first.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable
from functools import partial

Work = Callable[[], None]

WAIT_S = 30.0  # how long a run's end waits for its spans, at most (the thread is stuck: a processor hangs)

_log = logging.getLogger("runner")


class Pump:
    """A queue of work and the daemon thread that runs it."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._stuck: threading.Event | None = None  # the mark a wait gave up on, until the thread reaches it
        self._thread = threading.Thread(target=self._run, name="runner-spans", daemon=True)
        self._thread.start()

    def put(self, work: Work) -> None:
        self._queue.put(work)

    @property
    def stuck(self) -> bool:
        """Whether a wait gave up on the thread, which has not got past that point yet."""
        stuck = self._stuck
        return stuck is not None and not stuck.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether everything put before this call was done within ``timeout`` seconds (None: ``WAIT_S``).

        False at once while the thread is ``stuck``: each run's end would wait the whole time again.
        """
        if threading.current_thread() is self._thread:
            return True
        if self.stuck:
            return False
        done = self.mark()
        if done.wait(WAIT_S if timeout is None else timeout):
            return True
        self.gave_up(done)
        return False

    def mark(self, then: Work | None = None) -> threading.Event:
        """An event set (and ``then`` called) once everything put before this call is done."""
        done = threading.Event()
        self._queue.put(done.set if then is None else partial(_both, done.set, then))
        return done

    def gave_up(self, mark: threading.Event) -> None:
        """A wait for ``mark`` gave up: the thread is ``stuck`` until it gets there."""
        self._stuck = mark

    def _run(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            try:
                work()
            except BaseException:  # a span processor's failure (sys.exit too) must not stop the next run's spans
                _log.exception("runner: building or handing over spans failed")

    def stop(self) -> None:
        """Run what is queued, then end the thread."""
        self._queue.put(None)
        self._thread.join(WAIT_S)


def _both(first: Work, then: Work) -> None:
    first()
    then()


_pump: Pump | None = None
_lock = threading.Lock()


def pump() -> Pump:
    """This process's pump, started on first use."""
    global _pump
    found = _pump
    if found is None:
        with _lock:
            found = _pump
            if found is None:
                found = _pump = Pump()
                # Registered now, after the provider the first live run uses: exit handlers run last
                # registered first, so the spans still queued reach the provider before it shuts down.
                atexit.register(_wait_at_exit, os.getpid())
    return found


def _wait_at_exit(pid: int) -> None:
    """Let the spans still queued out before exit, in the process that queued them.

    A forked child inherits the parent's exit handlers but not its thread: waiting there would hang.
    """
    found = _pump
    if found is not None and os.getpid() == pid:
        found.wait()


def _forget_in_child() -> None:
    """A forked child has the parent's pump object but not its thread: it starts its own."""
    global _pump, _lock
    _pump, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
