"""The one seam between the loop and the outside world, such as the event log and tracing.

The loop hands every fact to ``record``, in order, on the loop's own thread.
Its driver calls ``sync`` right before it acts: before the model is called, before a tool runs, and when the run ends.
A durable recorder commits in ``sync``, so a killed process leaves a log that says exactly how far the run got.
Nothing is committed before every recorder has seen the fact that ``sync`` follows.
``run_finished`` may come again if closing raised; a recorder that closed the run ignores it or commits what it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from .events import Event, RunFinished, StepFinished

if TYPE_CHECKING:
    import asyncio


class Recorder(Protocol):
    """Take a run's facts as they come, and commit what it holds when asked.

    A recorder may also say it is ``idle``: it will ignore every later fact and its ``sync`` does nothing.
    The loop then stops handing it facts and asks for a commit only when the run ends.
    That spares a plain run a call per fact and a round trip through its driver per commit point.
    """

    def record(self, event: Event) -> None: ...
    def sync(self) -> None: ...


class LaterSync(Protocol):
    """A recorder that can commit without blocking.

    ``sync_later`` hands what ``sync`` would commit to a writer thread and returns the futures of those commits.
    """

    def sync_later(self) -> list[asyncio.Future[None]]: ...


def sync_later(recorder: Recorder) -> list[asyncio.Future[None]]:
    """``recorder.sync()`` for a driver that must not block (async): the commits to await.

    Recorders without ``sync_later`` are synced in place (theirs is cheap or a no-op)."""
    later = getattr(recorder, "sync_later", None)
    if later is None:
        recorder.sync()
        return []
    futures: list[asyncio.Future[None]] = later()
    return futures


class NullRecorder:
    """Records nothing: ``run_agent`` without a store or tracer takes the same path."""

    def record(self, event: Event) -> None:
        pass

    def sync(self) -> None:
        pass


class FanoutRecorder:
    """Passes every fact, then every ``sync``, to several recorders in the order given.

    A recorder that raises stops a fact there (a ``tool_started`` must not be logged
    for a tool that will not run), except the facts that close a run and ``sync``:
    every recorder hears those, so a broken span processor cannot leave the stored
    run open, and the first error is raised after.
    """

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders = list(recorders)

    def record(self, event: Event) -> None:
        if isinstance(event, (StepFinished, RunFinished)):
            self._tell_all(lambda r: r.record(event))
            return
        for r in self.recorders:
            r.record(event)

    def sync(self) -> None:
        self._tell_all(lambda r: r.sync())

    def sync_later(self) -> list[asyncio.Future[None]]:
        futures: list[asyncio.Future[None]] = []
        self._tell_all(lambda r: futures.extend(sync_later(r)))
        return futures

    def _tell_all(self, tell: Callable[[Recorder], object]) -> None:
        failure: BaseException | None = None
        for r in self.recorders:
            try:
                tell(r)
            except BaseException as exc:  # Ctrl-C too: the others still close the run, then it goes on
                failure = failure or exc
        if failure is not None:
            raise failure
