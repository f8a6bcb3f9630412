"""``runner resume CHILD``: a sub-agent's child run that its parent waits on goes on from the root of its tree.

A child run serves its parent's call: resumed alone, it would end with no run to take its answer. So
its decisions are logged on it (``RunStore.decide_all``), and the run at the root of its tree
(``_view.tree.root_of``) is resumed instead, with the root's tools and model: the root's open call,
performed again, finds the child and resumes it with the sub-agent's model and tools from that registry.
"""

from __future__ import annotations

from typing import NamedTuple

import click

from .._log.decisions import Decision, describe
from .._log.state import RunState, fold
from .._run.children import waiting_children
from .._text import clean
from .._view.tree import root_of
from ..store import RunStore, StoredRun


class Climbed(NamedTuple):
    """The sub-agent's child run ``runner resume`` was given, its id as printed, and the decisions to log on it."""

    child: StoredRun
    short: str
    decisions: dict[str, Decision]


def descended(store: RunStore, run: StoredRun, short: str, state: RunState,
              decisions: dict[str, Decision]) -> tuple[StoredRun, str, RunState]:
    """The sub-agent's child run the decisions given for ``run`` are for, when it is one of its children that waits.

    ``runner resume ROOT --approve CALL`` with CALL a call a child (or deeper) waits on is ``runner resume
    CHILD --approve CALL``. ``run`` itself when the decisions name its own calls (or none is waiting below).
    """
    own = {call.id for call in state.remaining_calls}
    below = [call_id for call_id in decisions if call_id not in own]
    if not below:
        return run, short, state
    holders = {child_id: child_state for child_id, child_state in waiting_children(store, run.run_id, state)
               if any(call_id in child_state.pending_approvals for call_id in below)}
    if len(holders) != 1 or len(below) != len(decisions):
        return run, short, state  # the usual checks say what is wrong with them
    child_id, child_state = next(iter(holders.items()))
    return store.get_run(child_id), store.short_ids([child_id])[child_id], child_state


def climbed(store: RunStore, run: StoredRun, short: str, state: RunState,
            decisions: dict[str, Decision]) -> tuple[StoredRun, str, RunState, Climbed | None]:
    """The run to resume for ``run`` (its tree's root, or itself), its id as printed and its state; and the climb.

    None for a run no parent waits on: it is resumed itself.
    """
    root = root_of(store, run)
    if root.run_id == run.run_id:
        return run, short, state, None
    return root, store.short_ids([root.run_id])[root.run_id], fold(root.facts, root.run_id), \
        Climbed(run, short, decisions)


def log_decisions(store: RunStore, climb: Climbed | None, by: str) -> None:
    """Log the decisions given on the child run (none when there was no climb), before its root goes on."""
    if climb is not None and climb.decisions:
        store.decide_all(climb.child, climb.decisions, by)


def lead(climb: Climbed | None, by: str, root_short: str) -> str | None:
    """What was done for the child: ``sub-agent run 1a2b3c4d: c1 approved by alice; resumed from its root run ...``."""
    if climb is None:
        return None
    decided = ", ".join(f"{call_id} {describe(verdict)}" for call_id, verdict in climb.decisions.items())
    return clean(f"sub-agent run {climb.short}: " + (f"{decided} by {by}; " if decided else "")
                 + f"its tree was resumed from its root run {root_short}")


def say_sent_back(climb: Climbed | None, by: str, root_short: str, as_json: bool) -> None:
    """Before a pool root is sent back to its queue: what was decided on the child, one line (none for --json)."""
    line = lead(climb, by, root_short)
    if line is not None and not as_json:
        click.echo(line.replace("was resumed", "goes back to its pool"))
