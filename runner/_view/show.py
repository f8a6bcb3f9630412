"""One run as ``runner show --json`` prints it (and the console's ``GET /api/runs/{id}`` returns it)."""

from __future__ import annotations

from typing import Any

from .._log.records import StoredRun
from ..events import RunStarted
from ..store import RunStore
from .activity import active_seconds
from .inherited import inherited, inherited_json
from .lineage import Link, children, parent_of
from .summary import Totals, event_json, refused_in, summary_json
from .tree import tree_spent


def with_active_time(summary: dict[str, Any], run: StoredRun) -> dict[str, Any]:
    """``summary`` with ``active_s`` (see ``activity``) next to its ``duration_s``."""
    active = active_seconds(run.events, run.facts)
    out: dict[str, Any] = {}
    for key, value in summary.items():
        out[key] = value
        if key == "duration_s":
            out["active_s"] = active
    return out


def links_json(store: RunStore, linked: list[Link]) -> list[dict[str, Any]]:
    """A run's children as ``show --json`` lists them: a sub-agent's with its call, its agent and what it spent.

    ``tokens`` and ``cost_usd`` are the child's own; ``tree_tokens`` and ``tree_cost_usd`` add its sub-agents'.
    """
    found = []
    for c in linked:
        link: dict[str, Any] = {"run_id": c.run_id, "status": c.status, "origin": c.origin,
                                "forked_at_step": c.forked_at_step}
        if c.call_id is not None and c.run is not None:
            link |= {"call_id": c.call_id, "agent_name": c.agent_name, **spent_json(Totals.of(c.run)),
                     **spent_json(tree_spent(store, c.run), "tree_")}
        found.append(link)
    return found


def spent_json(spent: Totals, prefix: str = "") -> dict[str, Any]:
    """``tokens``, ``cost_usd`` (null while a call's cost is unknown) and ``cost_known_usd``, named with ``prefix``."""
    return {f"{prefix}tokens": spent.tokens, f"{prefix}cost_usd": spent.cost_usd,
            f"{prefix}cost_known_usd": spent.cost_known_usd}


def show_json(store: RunStore, run: StoredRun) -> dict[str, Any]:
    """``run`` with its events, its children and what it inherited from its parent, as plain values.

    The run's ``tree_tokens`` and ``tree_cost_usd`` add what its sub-agents' child runs spent, at any depth.
    """
    started = next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)
    summary = summary_json(run, refused_in(run), started.origin if started is not None else None)
    return {"run": {**with_active_time(summary, run), **spent_json(tree_spent(store, run), "tree_"),
                    "output": run.output},
            "events": [event_json(e) for e in run.events],
            "children": links_json(store, children(store, run.run_id)),
            "inherited": inherited_json(inherited(run.facts, parent_of(store, run)))}
