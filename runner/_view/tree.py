"""A run's sub-agent tree: each child run nested under the call it serves, what the tree spent, and its root.

A sub-agent's call runs as a child run that names the call (``parent_call_id``), and a child may call
sub-agents of its own. ``nest`` reads the children from the store, each with its log, and puts a
``ChildEntry`` (the child's own timeline, nested the same way) after its call's entry, so ``runner show``
and the console's run page show the same tree. ``root_of`` climbs from a child to the run whose resume
drives the whole tree (``runner resume``, the console's Resume).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Final

from .._log.records import RunSummary, StoredRun
from .._log.state import fold
from .._log.statuses import Status
from ..errors import RunNotFound
from ..store import RunStore
from .lineage import pending_approvals
from .summary import Totals
from .timeline import ChildEntry, EndEntry, Entry, Timeline, ToolEntry, timeline

MAX_DEPTH: Final = 16  # children nested deeper than this are not read: their parent's entry says what they spent


def subagent_children(store: RunStore, run_id: str) -> list[RunSummary]:
    """The runs serving sub-agent calls of run ``run_id``, oldest first (not its forks nor its follow-ups)."""
    return [run for run in store.children(run_id) if run.parent_call_id is not None]


def nest(store: RunStore, run: StoredRun, shown: Timeline, depth: int = 0) -> Timeline:
    """``shown`` (``run``'s timeline) with each sub-agent child's entry after its call's last entry, recursively.

    A call its run stopped on (a ``run_finished``) while its child ran is ``waiting``, not a crash's call in doubt.
    """
    found = subagent_children(store, run.run_id) if depth < MAX_DEPTH else []
    if not found:
        return shown
    shorts = store.short_ids([child.run_id for child in found])
    entries: list[Entry] = list(shown.entries)
    waiting: set[str] = set()
    for summary in found:
        try:
            child = store.get_run(summary.run_id)
        except RunNotFound:  # pruned since it was listed
            continue
        below = nest(store, child, timeline(child), depth + 1)
        calls = [i for i, e in enumerate(entries) if isinstance(e, ToolEntry) and e.call_id == child.parent_call_id]
        call = entries[calls[-1]] if calls else None
        at = (call.step, call.at) if call is not None else (run.steps, child.started_at)
        entry = ChildEntry(*at, child.parent_call_id or "", child, shorts[child.run_id], below,
                           spent(child, below), tuple(pending_approvals(child).values()))
        for start, end in zip(calls, [*calls[1:], len(entries)], strict=True):
            started = entries[start]
            # The run stopped (a run_finished, no crash) while the call waited on its child.
            if isinstance(started, ToolEntry) and started.finished is None and \
                    any(isinstance(later, EndEntry) for later in entries[start + 1:end]):
                started.waiting = True
                waiting.add(started.call_id)
        entries.insert(calls[-1] + 1 if calls else len(entries), entry)
    return replace(shown, entries=entries, doubts=[d for d in shown.doubts if d.call_id not in waiting])


def spent(run: RunSummary, shown: Timeline) -> Totals:
    """What ``run`` and the sub-agent children nested in its timeline ``shown`` spent, all of them."""
    total = Totals.of(run)
    for child in children_in(shown):
        total = total.plus(child.tree)
    return total


def tree_spent(store: RunStore, run: RunSummary, depth: int = 0) -> Totals:
    """What ``run`` and its sub-agent children spent, all of them, read from their summaries (not their logs)."""
    total = Totals.of(run)
    for child in subagent_children(store, run.run_id) if depth < MAX_DEPTH else []:
        total = total.plus(tree_spent(store, child, depth + 1))
    return total


def children_in(shown: Timeline) -> list[ChildEntry]:
    """The child entries ``nest`` put in ``shown`` (not theirs), in order."""
    return [entry for entry in shown.entries if isinstance(entry, ChildEntry)]


def waiting_below(shown: Timeline) -> Iterator[ChildEntry]:
    """The children in the tree under ``shown``, at any depth, that wait for a decision on calls of their own."""
    for child in children_in(shown):
        if child.pending:
            yield child
        yield from waiting_below(child.timeline)


def root_of(store: RunStore, run: StoredRun) -> StoredRun:
    """The run whose resume drives ``run``: ``run``, or the ancestor waiting on it through sub-agents' calls.

    It climbs while the run serves a sub-agent's call that its parent has not got the answer of.
    """
    seen = {run.run_id}
    while run.parent_call_id is not None and run.parent_run_id is not None and run.parent_run_id not in seen:
        try:
            parent = store.get_run(run.parent_run_id)
        except RunNotFound:
            break
        if parent.status == Status.DONE or not fold(parent.facts, parent.run_id).in_doubt(run.parent_call_id):
            break
        seen.add(parent.run_id)
        run = parent
    return run
