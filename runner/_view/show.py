"""One run as ``runner show --json`` prints it (and the console's ``GET /api/runs/{id}`` returns it)."""

from __future__ import annotations

from typing import Any

from .._log.records import StoredRun
from ..store import RunStore
from .activity import active_seconds
from .inherited import inherited, inherited_json
from .lineage import Link, children, parent_of
from .summary import event_json, refused_in, summary_json


def with_active_time(summary: dict[str, Any], run: StoredRun) -> dict[str, Any]:
    """``summary`` with ``active_s`` (see ``activity``) next to its ``duration_s``."""
    active = active_seconds(run.events, run.facts)
    out: dict[str, Any] = {}
    for key, value in summary.items():
        out[key] = value
        if key == "duration_s":
            out["active_s"] = active
    return out


def links_json(linked: list[Link]) -> list[dict[str, Any]]:
    """A run's children as ``show --json`` lists them."""
    return [{"run_id": c.run_id, "status": c.status, "origin": c.origin, "forked_at_step": c.forked_at_step}
            for c in linked]


def show_json(store: RunStore, run: StoredRun) -> dict[str, Any]:
    """``run`` with its events, its children and what it inherited from its parent, as plain values."""
    return {"run": {**with_active_time(summary_json(run, refused_in(run)), run), "output": run.output},
            "events": [event_json(e) for e in run.events],
            "children": links_json(children(store, run.run_id)),
            "inherited": inherited_json(inherited(run.facts, parent_of(store, run)))}
