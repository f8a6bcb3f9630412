"""The one seam between the loop and the outside world (event log, tracing).

The loop hands every fact (``runner.events``) to ``record``, in order, on the
loop's own thread, and calls ``sync`` right before it acts: before the model is
called, before a tool function runs, and when the run ends. A durable recorder
commits what it holds in ``sync``, which is what makes a killed process leave a
log that says exactly how far the run got. Recorders may be given the facts in
any order relative to each other: nothing is committed before every recorder has
seen the fact that ``sync`` follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .events import Event


class Recorder(Protocol):
    def record(self, event: Event) -> None: ...
    def sync(self) -> None: ...


class NullRecorder:
    """Records nothing: ``run_agent`` without a store or tracer takes the same path."""

    def record(self, event: Event) -> None:
        pass

    def sync(self) -> None:
        pass


class FanoutRecorder:
    """Passes every fact, then every ``sync``, to several recorders in the order given."""

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders = list(recorders)

    def record(self, event: Event) -> None:
        for r in self.recorders:
            r.record(event)

    def sync(self) -> None:
        for r in self.recorders:
            r.sync()
