"""A run's summary as ``--json`` prints it, and its refused calls when its log is at hand."""

from __future__ import annotations

from typing import Any

from ..events import ToolFinished
from ..store import RunSummary, StoredRun
from .render import iso


def refused_in(run: StoredRun) -> int:
    """``RunStore.refused_calls`` of a run whose facts are at hand."""
    return sum(1 for fact in run.facts if isinstance(fact, ToolFinished) and not fact.ran)


def summary_json(run: RunSummary, refused: int) -> dict[str, Any]:
    """A run's summary for ``--json``: plain values, times in ISO 8601 UTC.

    ``tool_calls`` counts the calls that ran, ``tool_calls_refused`` those refused before running.
    """
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    return {
        "run_id": run.run_id, "status": run.status, "task": run.task, "answer": run.answer, "error": run.error,
        "steps": run.steps, "tool_calls": run.tool_calls, "tool_calls_refused": refused, "tokens": run.tokens,
        "model": run.model,
        "provider": run.provider, "agent_name": run.agent_name, "labels": run.labels,
        "started_at": iso(run.started_at), "finished_at": iso(run.finished_at), "duration_s": duration,
        "trace_id": run.trace_id, "parent_run_id": run.parent_run_id, "liveness": run.liveness,
    }
