"""What a run's log says of its end: whether it ends with the run's end, and the calls a crash left in doubt.

Both are parts of ``timeline``'s ``Timeline``: ``ends`` its ``finished``, ``in_doubt`` its ``doubts``,
each with the rule a resume applies (``_tools.doubt``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._log.records import LIVE, StoredRun
from .._log.state import RunState, fold
from .._tools.doubt import DoubtRule, doubt_rule
from .._tools.registry import ToolRegistry
from ..events import RunFinished, RunResumed


@dataclass(frozen=True, slots=True)
class InDoubt:
    """A call a crash left in doubt, and what a resume will do with it."""

    call_id: str
    name: str
    rule: DoubtRule


def ends(run: StoredRun) -> bool:
    """Whether the log ends with the run's end: no resume after its last ``run_finished``."""
    finished = False
    for fact in run.facts:
        match fact:
            case RunFinished():
                finished = True
            case RunResumed():
                finished = False
            case _:
                pass
    return finished


def in_doubt(run: StoredRun, state: RunState | None = None,
             registry: ToolRegistry | None = None) -> list[InDoubt]:
    """The calls a crash left in doubt (started, never finished, the process gone), with their rule."""
    if run.liveness == LIVE:
        return []
    state = state if state is not None else fold(run.facts, run.run_id)
    return [InDoubt(call.id, call.name, doubt_rule(state.started_traits.get(call.id),
                                                   registry.get(call.name) if registry is not None else None))
            for call in state.remaining_calls if state.in_doubt(call.id)]
