"""Read-only lookups the CLI needs beyond ``RunStore``'s methods: run references and short ids.

All of them use indexed range scans on ``runs.run_id`` (a ``LIKE`` prefix match
cannot use the index on SQLite), so they stay fast on a store of any size.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import ColumnElement, cast, func, select
from sqlalchemy.dialects.postgresql import JSON

from ..events import ToolFinished
from ..store import RunStore, RunSummary, StoredRun
from ..store.tables import events, runs
from .render import iso, short_id

BATCH = 500  # run ids per IN (...) list, well under SQLite's limit on bound parameters


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


def refused_calls(store: RunStore, run_ids: list[str]) -> dict[str, int]:
    """Per run, its tool calls refused before running (unknown tool, bad arguments, a repeat, denied).

    ``runs.tool_calls`` counts the calls that ran, each once however many attempts it
    took; a refused call is a ``tool_finished`` event with ``ran`` false. Counted in the
    database (JSON functions on SQLite and PostgreSQL) over the given runs' events only.
    """
    found: dict[str, int] = dict.fromkeys(run_ids, 0)
    dialect = store.engine.dialect.name
    refused: ColumnElement[bool] | None = None
    if dialect == "sqlite":
        refused = func.json_extract(events.c.data, "$.ran") == 0
    elif dialect == "postgresql":  # json, not jsonb: jsonb refuses the \u0000 a logged text may hold
        refused = cast(events.c.data, JSON)["ran"].astext == "false"
    with store.reading() as conn:
        for start in range(0, len(run_ids), BATCH):
            chunk = run_ids[start:start + BATCH]
            query = select(events.c.run_id, events.c.data if refused is None else func.count()) \
                .where(events.c.run_id.in_(chunk), events.c.kind == "tool_finished")
            if refused is None:  # another backend: read the events' JSON here
                for run_id, data in conn.execute(query):
                    found[run_id] += json.loads(data).get("ran") is False
            else:
                for run_id, count in conn.execute(query.where(refused).group_by(events.c.run_id)):
                    found[run_id] = count
    return found


def refused_in(run: StoredRun) -> int:
    """``refused_calls`` of a run whose events are at hand."""
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
