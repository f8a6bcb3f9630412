"""The stats of a set of runs, as ``runner stats --json`` prints them and ``/api/stats`` and ``/stats`` show them.

Counts by status, tokens, tool calls, cost per model and per tool, step and tool latencies
(p50, p95 and mean), and day by day the runs by status and the cost by model, all from the
store's rollups (``RunStore.stats``). A latency percentile is the upper bound of the histogram
bucket it falls in (``runner._log.tally``): at most 9% above the exact value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date
from typing import Any

from .._log import tally
from .._log.tally import Figures, Key, Rollup
from ..store import RunFilter, RunStore
from .summary import iso

Json = dict[str, Any]


def gather(store: RunStore, where: RunFilter | None = None) -> Json:
    """The stats of the runs ``where`` picks (all runs: None), as plain JSON-able data."""
    where = where or RunFilter()
    return report(store.stats(where), where)


def report(rollup: Rollup, where: RunFilter) -> Json:
    """``rollup`` as the stats' JSON (see the module docstring); ``where`` is echoed as the filters asked for."""
    by_status = _named(rollup, tally.STATUS)
    runs = sum(figures.number for figures in by_status.values())
    run = rollup.total(Key(tally.RUN, ""))
    models = _named(rollup, tally.MODEL)
    total = Figures(*(sum(column) for column in zip(*models.values(), strict=True))) if models else Figures()
    tool_rows: dict[str, list[tuple[int, Figures]]] = {}
    for key, figures in rollup.totals.items():
        if key.kind == tally.TOOL:
            tool_rows.setdefault(key.name, []).append((key.bucket, Figures(*figures)))
    step_costs = _named(rollup, tally.TOOL_STEPS)
    tools = {}
    for name, rows in sorted(tool_rows.items(), key=lambda kv: (-sum(f.number for _, f in kv[1]), kv[0])):
        calls = sum(figures.number for _, figures in rows)
        errors = sum(figures.errors for _, figures in rows)
        charged = step_costs.get(name, Figures())
        tools[name] = {"calls": calls, "errors": errors, "error_rate": errors / calls if calls else None,
                       **latency(rows), "step_cost": {"steps": charged.number, **cost(charged)}}
    every_tool = [row for rows in tool_rows.values() for row in rows]
    step_rows = [(key.bucket, Figures(*figures)) for key, figures in rollup.totals.items() if key.kind == tally.STEP]
    return {
        "since": iso(where.since), "until": iso(where.until),
        "status": list(where.status) if where.status else None, "label": dict(where.labels) or None,
        "tool": where.tool,
        "runs": runs,
        "by_status": {name: figures.number for name, figures in
                      sorted(by_status.items(), key=lambda kv: (-kv[1].number, kv[0]))},
        "tokens": {"total": run.tokens, "per_run": run.tokens / runs if runs else None},
        "tool_calls": run.number,
        "cost": cost(total),
        "models": {name: {"calls": figures.number, **cost(figures)} for name, figures in
                   sorted(models.items(), key=lambda kv: (-kv[1].cost_nusd, kv[0]))},
        "step_latency": latency(step_rows),
        "tool_latency": latency(every_tool),
        "tools": tools,
        "days": days(rollup),
        "latency_buckets": {"floor_s": tally.FLOOR_S, "per_doubling": tally.PER_DOUBLING},
    }


def cost(figures: Figures) -> Json:
    """A cost as a run's ``--json`` says one: ``cost_usd`` null while any is unknown, ``cost_known_usd`` a floor."""
    known = figures.cost_nusd / tally.NANO
    return {"cost_usd": None if figures.unknown else known, "cost_known_usd": known, "costs_unknown": figures.unknown}


def latency(rows: Iterable[tuple[int, Figures]]) -> Json:
    """A latency histogram's count, p50 (``median_s``), p95 and mean, in seconds (None when empty)."""
    counts: dict[int, int] = {}
    micros = 0
    for bucket, figures in rows:
        counts[bucket] = counts.get(bucket, 0) + figures.number
        micros += figures.micros
    count = sum(counts.values())
    return {"count": count, "median_s": percentile(counts, 0.5), "p95_s": percentile(counts, 0.95),
            "mean_s": micros / count / 1e6 if count else None}


def percentile(counts: dict[int, int], share: float) -> float | None:
    """The nearest-rank ``share`` percentile of a histogram (bucket -> count), as its bucket's upper bound."""
    count = sum(counts.values())
    if count <= 0:
        return None
    rank = max(math.ceil(share * count), 1)
    seen = 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= rank:
            return tally.upper_bound(bucket)
    return tally.upper_bound(max(counts))


def days(rollup: Rollup) -> list[Json]:
    """Day by day (UTC), oldest first: the runs by status and each model's calls and cost."""
    found: dict[date, Json] = {}
    for (day, key), figures in sorted(rollup.days.items()):
        row = found.setdefault(day, {"day": day.isoformat(), "by_status": {}, "models": {}})
        shown = Figures(*figures)
        if key.kind == tally.STATUS and shown.number:
            row["by_status"][key.name] = shown.number
        elif key.kind == tally.MODEL and shown.number:
            row["models"][key.name] = {"calls": shown.number, **cost(shown)}
    return [row for row in found.values() if row["by_status"] or row["models"]]


def _named(rollup: Rollup, kind: str) -> dict[str, Figures]:
    """The rows of ``kind`` by name (their buckets added up), leaving out those that count nothing."""
    found: dict[str, list[int]] = {}
    for key, figures in rollup.totals.items():
        if key.kind == kind:
            row = found.setdefault(key.name, [0] * len(tally.FIELDS))
            for i, value in enumerate(figures):
                row[i] += value
    return {name: Figures(*row) for name, row in found.items() if any(row)}
