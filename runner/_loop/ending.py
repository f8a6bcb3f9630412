"""End a run: decide its result once, then tell and commit its closing facts.

The closing facts are told to every recorder and committed even when an exception is leaving the loop.
Functions over the core's state, so the loop's module reads as the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING

from .._log.statuses import Status
from .._text import describe_exception
from ..events import CancelRequested, RunFinished, StepFinished
from .actions import COMMIT, Action, Outcome
from .observations import CANCELLED_BY_CALLER
from .results import AgentResult

if TYPE_CHECKING:
    from .core import AgentCore
    from .output import Given


def abort(core: AgentCore, exc: BaseException) -> None:
    """Close a run that an exception is leaving (Ctrl-C, a raising callback or recorder).

    A run still going is logged as ``cancelled`` with the exception as its reason; a
    run whose own close raised (a recorder failed) gets that close tried once more, so
    the store still shows how it ended. Spans are ended, and the caller's exception
    goes on: a failure while closing is not allowed to hide it.
    """
    if core.closed:
        return
    if core.result is None:
        decide(core, Status.CANCELLED, f"aborted by {describe_exception(exc)}", exception=exc)
    with contextlib.suppress(BaseException):  # a recorder failing on the close: the rest still heard it
        closing_facts(core)
    with contextlib.suppress(Exception):  # so what they hold is committed, whatever one of them raised
        core.recorder.sync()
        core.closed = True


def finish(core: AgentCore, status: Status, error: str | None, answer: str | None = None,
           exception: BaseException | None = None, given: Given | None = None
           ) -> Generator[Action, Outcome, AgentResult]:
    """Decide the run's result, tell its closing facts and commit them: the run's last actions.

    ``given`` is a ``done`` run's typed result (``output_type=``). A run stopped by a cancel request
    from its store logs who asked (``cancel_requested``) first.
    """
    requested_by = cancel_requester(core) if status == Status.CANCELLED else None
    if requested_by is not None:
        if error is not None and error.startswith(CANCELLED_BY_CALLER):
            error = f"cancel requested by {requested_by}{error[len(CANCELLED_BY_CALLER):]}"
        core.emit(CancelRequested(step=core.state.steps, requested_by=requested_by))
    result = decide(core, status, error, answer, exception, given)
    try:
        failure = closing_facts(core)
    except Exception as exc:  # a recorder refused run_finished after the others took it: commit, then raise
        failure = exc
    yield COMMIT
    core.closed = True
    if failure is not None:
        raise failure
    return result


def cancel_requester(core: AgentCore) -> str | None:
    """Who asked for the store's cancel that stopped the run, if that is what stopped it (not the caller's own)."""
    watch = core.watch
    if watch is None or watch.requested_by is None:
        return None
    if core.cancel is not None and core.cancel.is_set():
        return None  # the caller's own cancel: it says nothing of who asked
    return watch.requested_by


def decide(core: AgentCore, status: Status, error: str | None, answer: str | None = None,
           exception: BaseException | None = None, given: Given | None = None) -> AgentResult:
    """The run's result, decided once from its state."""
    s = core.state
    core.result = AgentResult(status, answer, s.steps, s.spent, s.messages, core.run_id, error, s.tool_calls,
                              exception, cost_usd=None if s.costs_unknown else s.cost_usd,
                              cost_known_usd=s.cost_usd, output=given.value if given is not None else None)
    core.output_data = given.data if given is not None else None
    return core.result


def closing_facts(core: AgentCore) -> Exception | None:
    """End the open step and the run.

    ``run_finished`` is told even when ``step_finished`` raised.
    That failure is returned, to be raised once the close is committed.
    """
    s, result = core.state, core.result
    assert result is not None
    failure: Exception | None = None
    if s.open_step:
        try:
            core.emit(StepFinished(step=s.steps))
        except Exception as exc:
            failure = exc
    core.emit(RunFinished(step=s.steps, status=result.status, answer=result.answer, steps=result.steps,
                          tokens=result.tokens, tool_calls=result.tool_calls, error=result.error,
                          output=core.output_data))
    return failure
