"""What a run is wired to, and the recorders that follow from it.

Tracing comes first so that the store, which follows, can log the ids of the
spans the tracer has just opened or closed ("each event knows its span").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._log.facts import ToolReturnedLate
from .._log.state import RunState
from ..prices import Costing, PriceBook
from ..recorder import FanoutRecorder, Recorder

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._loop.calls import Approver
    from .._loop.late import LateSink
    from .._loop.stream import Streaming
    from .._loop.waits import Cancel, Watch
    from ..store import RunStore
    from ..tracing.live import TraceLink, TracingRecorder
    from .cancels import StoreCancel


@dataclass(frozen=True, slots=True)
class RunWiring:
    """Where a run's facts go (store, tracer, an extra recorder) and who may cancel it or approve its calls.

    ``prices`` cost each model call (None: genai-prices' table); ``costs`` overrides them (replay serves
    the recorded costs). ``checkpoints``: the driver decides at every checkpoint whether the run stops
    there (replay). ``decided_by`` owns ``approve`` (None: the OS user); ``watches_cancels``: a stored run
    watches its store's cancel requests (not replay's); ``above``, its parent's (a sub-agent's child run);
    ``streaming``: how a model that streams is consumed (None: for its whole reply).
    """

    store: RunStore | None = None
    tracer_provider: TracerProvider | None = None
    record_content: bool = False
    recorder: Recorder | None = None
    cancel: Cancel | None = None
    approve: Approver | None = None
    prices: PriceBook | None = None
    costs: Costing | None = None
    checkpoints: bool = False
    decided_by: str | None = None
    watches_cancels: bool = True
    above: Watch | None = None
    streaming: Streaming | None = None
    depth: int = 0  # how deep in a tree of sub-agents the run is (its root: 0)


def build_recorder(wiring: RunWiring, state: RunState, link: TraceLink | None = None,
                   watch: StoreCancel | None = None) -> tuple[Recorder, TracingRecorder]:
    """The recorders ``wiring`` asks for, as one; and its tracer among them.

    ``state`` is where the loop starts (a resumed run's holds its stored facts) and the state the
    loop goes on to advance: the store's recorder reads it as the run moves, and tells ``watch``
    what each commit read of the run's cancel request.
    """
    from ..tracing import TracingRecorder

    # Always traced: with no provider given, the global one (a no-op unless the app
    # configured OpenTelemetry, and then cheap), so every stored event gets a span id.
    record_content = wiring.record_content
    tracing = TracingRecorder(
        wiring.tracer_provider, record_content=record_content, run_id=state.run_id, link=link,
        segment=state.segment, shown=[dict(m) for m in state.messages] if record_content else None,
        started=state.started)
    recorders: list[Recorder] = [tracing]
    if wiring.store is not None:
        tracing.fed_by_store = True  # its spans are made from the facts once committed
        recorders.append(wiring.store.recorder(span_source=tracing, resume=state if state.events else None,
                                               trace_id=link.trace_id if link is not None and link.joins else None,
                                               loop_state=state,
                                               cancel_seen=watch.seen if watch is not None else None,
                                               on_commit=tracing.committed))
    if wiring.recorder is not None:
        recorders.append(wiring.recorder)
    return (recorders[0] if len(recorders) == 1 else FanoutRecorder(recorders)), tracing


def late_sink(store: RunStore | None, run_id: str) -> LateSink | None:
    """Where run ``run_id``'s late results go: its store, which logs one only where the run still ends.

    A result the store does not take (the run was resumed since, or runs) is a warning: the
    run's log keeps the call's outcome unknown, as it was when the run stopped.
    """
    if store is None:
        return None

    def log(fact: ToolReturnedLate, segment: int) -> None:
        if not store.log_late(run_id, fact, segment):
            logging.getLogger("runner").warning(
                "run %s: call %s (%s) returned after it was given up on, but the run was resumed or is running "
                "since; its result is not logged", run_id, fact.call_id, fact.name)

    return log
