"""What a resume checks of approvals and tools before a run goes on, beyond the decisions themselves.

``resume(decisions=...)`` logs the decisions it is given as it goes on (checked by
``_log.decisions``; ``RunStore.decide`` logs one without resuming). ``undecided`` says why a run
awaiting approval has nothing to resume with; ``drift`` says where the registry given to a resume
differs from what the log records of its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .._log.decisions import Decision
from .._log.state import RunState
from .._log.statuses import Status
from .._tools.registry import ToolRegistry
from ..messages import ToolTraits

log = logging.getLogger("runner.resume")


def undecided(run_id: str, state: RunState, given: Mapping[str, Decision], asks: bool) -> str | None:
    """Say why a run awaiting approval has nothing to resume with, or return None when it has.

    It has nothing when no decision is given, none is logged, and no ``approve`` callback can take one.
    """
    if state.status != Status.AWAITING_APPROVAL or given or asks:
        return None
    if any(call.id in state.decisions for call in state.remaining_calls):
        return None
    if not state.pending_approvals and open_subagent_calls(state):
        return None  # it waits on its sub-agents' child runs: their decisions tell (``children.undecided_below``)
    waiting = ", ".join(state.pending_approvals) or "none"
    return f"run {run_id} is awaiting approval of {waiting} and no decision was given or logged: nothing to resume"


def open_subagent_calls(state: RunState) -> list[str]:
    """The ids of the run's sub-agent calls started and not answered: each goes on in its child run on resume."""
    return [call.id for call in state.remaining_calls
            if state.in_doubt(call.id) and _subagent(state.started_traits.get(call.id))]


def _subagent(traits: ToolTraits | None) -> bool:
    return traits is not None and traits.get("subagent", False)


def drift(run_id: str, state: RunState, registry: ToolRegistry) -> list[str]:
    """One line per tool whose traits in ``registry`` differ from the log's record of them."""
    if state.tool_traits is None:  # a log from before tools' traits were recorded: nothing to compare
        return []
    known = set(state.tool_traits) | {spec["name"] for spec in (state.started.tool_specs if state.started else [])}
    lines = []
    for name in registry.names():
        tool, was = registry.get(name), state.traits_of(name)
        if tool is None or was is None or name not in known:
            continue
        now = tool.traits()
        pairs = (("side_effects", was["side_effects"], now["side_effects"]),
                 ("needs_approval", was["needs_approval"], now["needs_approval"]),
                 ("idempotency_key", was["idempotency_key"], now["idempotency_key"]),
                 ("idempotent", was.get("idempotent", False), now.get("idempotent", False)))
        differs = [f"{trait} {old!r} in the log, {new!r} now" for trait, old, new in pairs if old != new]
        if differs:
            lines.append(f"run {run_id}: tool {name!r} differs from the log's record: {'; '.join(differs)} "
                         "(calls already started are judged by the more careful of the two)")
    return lines


def report_drift(run_id: str, state: RunState, registry: ToolRegistry) -> None:
    """``drift``'s lines as warnings of the ``runner.resume`` logger."""
    for line in drift(run_id, state, registry):
        log.warning("%s", line)
