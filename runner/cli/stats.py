"""``runner stats``: statuses, tools, latencies and tokens over a window of runs.

Computed with a few read-only aggregate queries over ``runs`` and ``events``
(runs are picked by ``started_at``); latencies are gathered per event and
summarised here, the same way on every backend.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click
from rich.text import Text
from sqlalchemy import Select, func, select

from .._text import clean
from ..events import StepFinished, StepStarted, ToolFinished, decode
from ..store import RunStore
from ..store.tables import events, runs
from .options import Env, common
from .render import console, iso, median, percentile, plural, print_json, seconds, table
from .show import when_option
from .timeline import status_style, tool_failed


def window(query: Select[Any], since: datetime | None, until: datetime | None) -> Select[Any]:
    if since is not None:
        query = query.where(runs.c.started_at >= since)
    if until is not None:
        query = query.where(runs.c.started_at < until)
    return query


def latency(values: list[float]) -> dict[str, float | None]:
    return {"count": len(values), "median_s": median(values), "p95_s": percentile(values, 0.95)}


def gather(store: RunStore, since: datetime | None, until: datetime | None) -> dict[str, Any]:
    """The statistics of the runs started in [since, until), as plain JSON-able data."""
    in_window = window(select(runs.c.run_id), since, until)
    with store.reading() as conn:
        by_status: dict[str, int] = dict(conn.execute(window(select(runs.c.status, func.count()), since, until)
                                      .group_by(runs.c.status)).all())
        totals = conn.execute(window(select(func.coalesce(func.sum(runs.c.tokens), 0),
                                            func.coalesce(func.sum(runs.c.tool_calls), 0)), since, until)).one()
        rows = conn.execute(select(events.c.run_id, events.c.kind, events.c.at, events.c.step, events.c.data)
                            .where(events.c.kind.in_(("step_started", "step_finished", "tool_finished")),
                                   events.c.run_id.in_(in_window))
                            .order_by(events.c.run_id, events.c.seq)).all()
    tools: dict[str, dict[str, Any]] = {}
    steps: list[float] = []
    started: dict[tuple[str, int], datetime] = {}
    for run_id, kind, at, step, raw in rows:
        fact = decode(kind, json.loads(raw), step, run_id)
        if isinstance(fact, StepStarted):
            started[(run_id, fact.step)] = at
        elif isinstance(fact, StepFinished) and (run_id, fact.step) in started:
            steps.append((at - started.pop((run_id, fact.step))).total_seconds())
        elif isinstance(fact, ToolFinished):
            tool = tools.setdefault(str(fact.name), {"calls": 0, "errors": 0, "durations": []})
            tool["calls"] += 1
            if tool_failed(fact):
                tool["errors"] += 1
            tool["durations"].append(float(fact.duration_s))
    runs_total = sum(by_status.values())
    all_durations = [d for tool in tools.values() for d in tool["durations"]]
    return {
        "since": iso(since), "until": iso(until), "runs": runs_total,
        "by_status": dict(sorted(by_status.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tokens": {"total": int(totals[0]), "per_run": totals[0] / runs_total if runs_total else None},
        "tool_calls": int(totals[1]),
        "step_latency": latency(steps),
        "tool_latency": latency(all_durations),
        "tools": {name: {"calls": t["calls"], "errors": t["errors"], "error_rate": t["errors"] / t["calls"],
                         **latency(t["durations"])}
                  for name, t in sorted(tools.items(), key=lambda kv: (-kv[1]["calls"], kv[0]))},
    }


@click.command()
@click.option("--since", callback=when_option, metavar="WHEN",
              help="Runs started at or after WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@click.option("--until", callback=when_option, metavar="WHEN", help="Runs started before WHEN (same forms).")
@common
def stats(env: Env, since: datetime | None, until: datetime | None) -> None:
    """Counts by status, tool calls and error rate per tool, step and tool latency (median, p95), tokens."""
    with env.store() as store:
        found = gather(store, since, until)
    if env.as_json:
        print_json(found)
        return
    out = console()
    span = f"since {found['since'] or 'the first run'}" + (f" until {found['until']}" if found["until"] else "")
    tokens = found["tokens"]
    per_run = f" ({tokens['per_run']:.0f} per run)" if tokens["per_run"] is not None else ""
    out.print(Text(f"{plural(found['runs'], 'run')} {span}; {plural(tokens['total'], 'token')}{per_run}; "
                   f"{plural(found['tool_calls'], 'tool call')}", style="bold"))
    if not found["runs"]:
        return
    statuses = table("status", "runs", "share", right=("runs", "share"))
    for status, count in found["by_status"].items():
        statuses.add_row(Text(status, style=status_style(status)), str(count), f"{count / found['runs']:.0%}")
    out.print(statuses)
    latencies = table("latency", "count", "median", "p95", right=("count", "median", "p95"))
    for name in ("step", "tool"):
        lat = found[f"{name}_latency"]
        latencies.add_row(name, str(lat["count"]), seconds(lat["median_s"]), seconds(lat["p95_s"]))
    out.print(latencies)
    if found["tools"]:
        tools = table("tool", "calls", "errors", "error rate", "median", "p95",
                      right=("calls", "errors", "error rate", "median", "p95"))
        for name, tool in found["tools"].items():
            rate = Text(f"{tool['error_rate']:.0%}", style="red" if tool["errors"] else "")
            tools.add_row(Text(clean(name)), str(tool["calls"]), str(tool["errors"]), rate,
                          seconds(tool["median_s"]), seconds(tool["p95_s"]))
        out.print(tools)
