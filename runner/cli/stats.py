"""``runner stats``: statuses, tools, latencies and tokens over a window of runs.

The store counts the runs (picked by ``started_at``) and hands over the facts that
time their steps and tool calls (``RunStore.activity``); latencies are summarised
here, the same way on every backend.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from rich.text import Text

from .._text import clean
from .._view.summary import iso
from ..events import StepFinished, StepStarted, ToolFinished
from ..store import RunStore
from .options import Env, common
from .render import console, median, percentile, plural, print_json, seconds, table
from .show import when_option
from .timeline import status_style, tool_failed


def latency(values: list[float]) -> dict[str, float | None]:
    return {"count": len(values), "median_s": median(values), "p95_s": percentile(values, 0.95)}


def gather(store: RunStore, since: datetime | None, until: datetime | None) -> dict[str, Any]:
    """The statistics of the runs started in [since, until), as plain JSON-able data."""
    found = store.activity(since, until)
    tools: dict[str, dict[str, Any]] = {}
    steps: list[float] = []
    started: dict[tuple[str, int], datetime] = {}
    for run_id, at, fact in found.timed:
        match fact:
            case StepStarted():
                started[(run_id, fact.step)] = at
            case StepFinished() if (run_id, fact.step) in started:
                steps.append((at - started.pop((run_id, fact.step))).total_seconds())
            case ToolFinished():
                tool = tools.setdefault(str(fact.name), {"calls": 0, "errors": 0, "durations": []})
                tool["calls"] += 1
                if tool_failed(fact):
                    tool["errors"] += 1
                tool["durations"].append(float(fact.duration_s))
    runs_total = sum(found.by_status.values())
    all_durations = [d for tool in tools.values() for d in tool["durations"]]
    return {
        "since": iso(since), "until": iso(until), "runs": runs_total,
        "by_status": dict(sorted(found.by_status.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tokens": {"total": found.tokens, "per_run": found.tokens / runs_total if runs_total else None},
        "tool_calls": found.tool_calls,
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
