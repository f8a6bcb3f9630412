"""End a run: decide its result once, then tell and commit its closing facts.

The closing facts are told to every recorder and committed even when an exception is leaving the loop.
``AgentCore`` is a ``Closing``; the ending lives here so that the loop's module reads as the loop.
It relies on the core's ``state``, ``recorder``, ``run_id`` and ``_emit``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator

from .._log.state import RunState
from .._log.statuses import Status
from .._text import describe_exception
from ..events import Event, RunFinished, StepFinished
from ..recorder import Recorder
from .results import COMMIT, Action, AgentResult, Outcome


class Closing:
    """The closing half of ``AgentCore``."""

    state: RunState
    recorder: Recorder
    run_id: str
    result: AgentResult | None  # set once the run's outcome is decided
    closed: bool  # set once every recorder has been told that outcome

    def _emit(self, event: Event) -> None:
        raise NotImplementedError

    def abort(self, exc: BaseException) -> None:
        """Close a run that an exception is leaving (Ctrl-C, a raising callback or recorder).

        A run still going is logged as ``cancelled`` with the exception as its reason; a
        run whose own close raised (a recorder failed) gets that close tried once more, so
        the store still shows how it ended. Spans are ended, and the caller's exception
        goes on: a failure while closing is not allowed to hide it.
        """
        if self.closed:
            return
        if self.result is None:
            self._decide(Status.CANCELLED, f"aborted by {describe_exception(exc)}", exception=exc)
        with contextlib.suppress(BaseException):  # a recorder failing on the close: the rest still heard it
            self._closing_facts()
        with contextlib.suppress(Exception):  # so what they hold is committed, whatever one of them raised
            self.recorder.sync()
            self.closed = True

    def _finish(self, status: Status, error: str | None, answer: str | None = None,
                exception: BaseException | None = None) -> Generator[Action, Outcome, AgentResult]:
        result = self._decide(status, error, answer, exception)
        try:
            failure = self._closing_facts()
        except Exception as exc:  # a recorder refused run_finished after the others took it: commit, then raise
            failure = exc
        yield COMMIT
        self.closed = True
        if failure is not None:
            raise failure
        return result

    def _decide(self, status: Status, error: str | None, answer: str | None = None,
                exception: BaseException | None = None) -> AgentResult:
        s = self.state
        self.result = AgentResult(status, answer, s.steps, s.spent, s.messages, self.run_id, error, s.tool_calls,
                                  exception, cost_usd=None if s.costs_unknown else s.cost_usd,
                                  cost_known_usd=s.cost_usd)
        return self.result

    def _closing_facts(self) -> Exception | None:
        """End the open step and the run.

        ``run_finished`` is told even when ``step_finished`` raised.
        That failure is returned, to be raised once the close is committed.
        """
        s, result = self.state, self.result
        assert result is not None
        failure: Exception | None = None
        if s.open_step:
            try:
                self._emit(StepFinished(step=s.steps))
            except Exception as exc:
                failure = exc
        self._emit(RunFinished(step=s.steps, status=result.status, answer=result.answer, steps=result.steps,
                               tokens=result.tokens, tool_calls=result.tool_calls, error=result.error))
        return failure
