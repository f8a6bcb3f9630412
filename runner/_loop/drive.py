"""The one drive loop: perform the actions a core decides on until it returns, and close it on any exception.

``drive`` serves ``run_agent``, resume, replay and rerun's candidates, each with its own ``perform``;
``adrive`` is its async twin. The ``close()``/``abort()`` below is the run's durability guarantee:
an exception leaving the loop (Ctrl-C, a raising callback or recorder) first closes the run, so
the log never shows it running forever. It is written here once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .actions import Action, EndRun, Outcome
from .core import AgentCore
from .results import AgentResult

# What performing an action gives: its outcome; an ``EndRun`` to end the run there instead; or None to
# give up without a word, as if the process died there (nothing more is recorded).
Done = Outcome | EndRun | None
Perform = Callable[[Action], Done]
APerform = Callable[[Action], Awaitable[Done]]


def drive(core: AgentCore, perform: Perform) -> AgentResult | None:
    """Perform ``core``'s actions with ``perform`` until the run returns its result (None: ``perform`` gave up)."""
    decisions = core.run()
    try:
        action = next(decisions)
        while True:
            match perform(action):
                case Outcome() as outcome:
                    action = decisions.send(outcome)
                case EndRun() as end:
                    action = decisions.throw(end)
                case None:
                    decisions.close()
                    return None
    except StopIteration as finished:
        result: AgentResult = finished.value
        return result
    except BaseException as exc:
        decisions.close()
        core.abort(exc)
        raise


async def adrive(core: AgentCore, perform: APerform, abandon: Callable[[], None] | None = None) -> AgentResult | None:
    """``drive`` for a ``perform`` to await; ``abandon`` is called first when an exception leaves the loop.

    The task driver's ``abandon`` cancels the calls in flight: they stay in doubt, as the process's
    death would leave them. A cancelled caller still gets the run logged.
    """
    decisions = core.run()
    try:
        action = next(decisions)
        while True:
            match await perform(action):
                case Outcome() as outcome:
                    action = decisions.send(outcome)
                case EndRun() as end:
                    action = decisions.throw(end)
                case None:
                    decisions.close()
                    return None
    except StopIteration as finished:
        result: AgentResult = finished.value
        return result
    except BaseException as exc:  # the caller cancelled us, Ctrl-C, a raising callback or recorder
        if abandon is not None:
            abandon()
        decisions.close()
        core.abort(exc)
        raise


def ended(result: AgentResult | None) -> AgentResult:
    """The result of a drive whose ``perform`` never gives up."""
    assert result is not None
    return result
