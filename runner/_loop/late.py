"""A tool call given up on that returns after all: its result logged as ``tool_returned_late``.

The sync driver stops waiting on a call at the run's deadline, at a cancel or at the call's timeout,
but a thread cannot be killed: the function may still return, maybe after its side effect took
place. ``LateLog`` turns what it returned (or raised) into the fact, and hands it to the run's sink
(the store) once the run has ended, so the run's own facts are all written first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from .._log.facts import ToolReturnedLate
from .._log.limits import Limits
from .._log.state import RunState
from .._tools.registry import failure_observation, result_observation
from .actions import CallTool
from .tokens import cut_observation

logger = logging.getLogger("runner")

# Where a run's late results go: the fact, and the segment of the run (resumes so far) the call ran in.
LateSink = Callable[[ToolReturnedLate, int], object]


class LateCall(NamedTuple):
    """A tool call on a worker thread, as its late result will name it."""

    call_id: str
    name: str
    step: int


class LateLog:
    """The late results of one run's tool calls given up on, handed to ``sink`` once the run has ended."""

    def __init__(self, state: RunState, limits: Limits, sink: LateSink) -> None:
        self.state, self.max_result_chars, self.sink = state, limits.max_result_chars, sink
        self.ended = threading.Event()

    def call_of(self, action: CallTool) -> LateCall:
        """How ``action``'s call will be named should it be given up on (its start is logged)."""
        started = self.state.started_calls.get(action.call.id)
        return LateCall(action.call.id, action.call.name, started.step if started is not None else self.state.steps)

    def end(self) -> None:
        """The run has ended (its last fact written, or never to be): late results may be logged now."""
        self.ended.set()

    def returned(self, call: LateCall, value: Any, error: BaseException | None, duration_s: float) -> None:
        """Log what ``call`` gave after it was given up on; on the call's own thread, once the run has ended.

        A failure to log it is a warning, never an error in a thread nobody joins.
        """
        if error is not None and not isinstance(error, Exception):
            return  # SystemExit, KeyboardInterrupt: nothing the call gave
        try:
            observation = (failure_observation(call.name, error) if error is not None
                           else result_observation(call.name, value))
            fact = ToolReturnedLate(step=call.step, call_id=call.call_id, name=call.name,
                                    observation=cut_observation(observation, self.max_result_chars),
                                    ok=not observation.startswith("ERROR:"), duration_s=duration_s)
            self.ended.wait()
            self.sink(fact, self.state.segment)
        except Exception as exc:
            logger.warning("run %s: call %s (%s) returned after it was given up on, and its result could not be "
                           "logged: %s", self.state.run_id, call.call_id, call.name, exc)
