"""The child runs of a stored run's sub-agent calls: what a fixture of a run with sub-agents holds beside its own.

A sub-agent's call (``add_agent``) runs as a child run whose id derives from the run's and the call's,
so the store finds each child from the parent's log alone. A child still running has no recording to
replay yet and is left out; its call then has no child recording, which replay names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._log.records import StoredRun
from .._log.statuses import Status
from .._tools.agents import child_run_id, subagent_calls
from ..errors import RunNotFound

if TYPE_CHECKING:
    from ..store import RunStore


def child_runs(run: StoredRun, store: RunStore) -> dict[str, StoredRun]:
    """Each sub-agent call's child run that ``store`` holds and that has ended, by call id, in call order."""
    found: dict[str, StoredRun] = {}
    for call_id in subagent_calls(run.facts):
        try:
            child = store.get_run(child_run_id(run.run_id, call_id))
        except RunNotFound:  # never started: the process died before the child's first fact
            continue
        if child.status != Status.RUNNING:
            found[call_id] = child
    return found
