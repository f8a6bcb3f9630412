"""Read-only lookups the CLI needs beyond ``RunStore``'s methods: run references and short ids.

All of them use indexed range scans on ``runs.run_id`` (a ``LIKE`` prefix match
cannot use the index on SQLite), so they stay fast on a store of any size.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from ..store import RunStore, RunSummary, StoredRun
from ..store.tables import runs
from .render import iso, short_id


def resolve(store: RunStore, ref: str) -> str:
    """The run id ``ref`` names: the run with exactly that id, else the one run whose id starts with it."""
    return store.resolve_run_id(ref)


def find(store: RunStore, ref: str) -> StoredRun:
    return store.find_run(ref)


def short_ids(store: RunStore, run_ids: list[str]) -> dict[str, str]:
    """For each id, its shortest prefix (8 characters at least) that names no other run in the store."""
    out: dict[str, str] = {}
    with store.reading() as conn:
        for run_id in run_ids:
            before = conn.execute(select(func.max(runs.c.run_id)).where(runs.c.run_id < run_id)).scalar()
            after = conn.execute(select(func.min(runs.c.run_id)).where(runs.c.run_id > run_id)).scalar()
            out[run_id] = short_id(run_id, before, after)
    return out


def summary_json(run: RunSummary) -> dict[str, Any]:
    """A run's summary for ``--json``: plain values, times in ISO 8601 UTC."""
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    return {
        "run_id": run.run_id, "status": run.status, "task": run.task, "answer": run.answer, "error": run.error,
        "steps": run.steps, "tool_calls": run.tool_calls, "tokens": run.tokens, "model": run.model,
        "provider": run.provider, "agent_name": run.agent_name, "labels": run.labels,
        "started_at": iso(run.started_at), "finished_at": iso(run.finished_at), "duration_s": duration,
        "trace_id": run.trace_id, "parent_run_id": run.parent_run_id, "liveness": run.liveness,
    }
