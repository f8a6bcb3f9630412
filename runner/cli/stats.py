"""``runner stats``: statuses, tools, latencies, tokens and cost over a window of runs.

The figures come from the store's rollups (``runner._view.stats``, ``RunStore.stats``), the same
way on every backend; the console's ``/stats`` and ``GET /api/stats`` show the same data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from rich.text import Text

from .._log.statuses import Status
from .._text import plural, shown_name
from .._view import stats as view_stats
from .._view.summary import money, seconds
from ..store import RunFilter
from .options import Env, common, label_option, when_option
from .render import console, print_json, status_style, table


@click.command()
@click.option("--since", callback=when_option, metavar="WHEN",
              help="Runs started at or after WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@click.option("--until", callback=when_option, metavar="WHEN", help="Runs started before WHEN (same forms).")
@click.option("--status", "statuses", multiple=True, type=click.Choice([status.value for status in Status]),
              help="Only runs with this status (repeatable: any of them).")
@label_option("Only runs with this label (repeatable: all of them).")
@click.option("--tool", metavar="NAME", help="Only runs that called this tool.")
@common
def stats(env: Env, since: datetime | None, until: datetime | None, statuses: tuple[str, ...],
          labels: dict[str, str], tool: str | None) -> None:
    """Counts by status, tool calls and error rate per tool, step and tool latency (median, p95), tokens, cost.

    Cost is in USD, per model and per tool: a tool's is what the model calls of the steps that asked for it
    cost. "≥$0.0100" is the known part when some calls had no price or reported no usage; "-" knows none.
    Latencies come from histograms: a percentile is its bucket's upper bound, at most 9% above the value.
    """
    where = RunFilter(status=statuses or None, since=since, until=until, tool=tool, labels=labels)
    with env.store() as store:
        found = view_stats.gather(store, where)
    if env.as_json:
        print_json(found)
        return
    out = console()
    span = f"since {found['since'] or 'the first run'}" + (f" until {found['until']}" if found["until"] else "")
    tokens = found["tokens"]
    per_run = f" ({tokens['per_run']:.0f} per run)" if tokens["per_run"] is not None else ""
    cost = shown_cost(found["cost"]) if found["runs"] else "-"
    out.print(Text(f"{plural(found['runs'], 'run')} {span}; {plural(tokens['total'], 'token')}{per_run}; "
                   f"{plural(found['tool_calls'], 'tool call')}" + (f"; cost {cost}" if cost != "-" else ""),
                   style="bold"))
    if not found["runs"]:
        return
    by_status = table("status", "runs", "share", right=("runs", "share"))
    for status, count in found["by_status"].items():
        by_status.add_row(Text(status, style=status_style(status)), str(count), f"{count / found['runs']:.0%}")
    out.print(by_status)
    latencies = table("latency", "count", "median", "p95", right=("count", "median", "p95"))
    for name in ("step", "tool"):
        lat = found[f"{name}_latency"]
        latencies.add_row(name, str(lat["count"]), seconds(lat["median_s"]), seconds(lat["p95_s"]))
    out.print(latencies)
    if found["models"]:
        models = table("model", "calls", "cost", right=("calls", "cost"))
        for name, model in found["models"].items():
            models.add_row(Text(shown_name(name)), str(model["calls"]), shown_cost(model))
        out.print(models)
    if found["tools"]:
        tools = table("tool", "calls", "errors", "error rate", "median", "p95", "step cost",
                      right=("calls", "errors", "error rate", "median", "p95", "step cost"))
        for name, row in found["tools"].items():
            rate = Text(f"{row['error_rate']:.0%}", style="red" if row["errors"] else "")
            tools.add_row(Text(shown_name(name)), str(row["calls"]), str(row["errors"]), rate,
                          seconds(row["median_s"]), seconds(row["p95_s"]), shown_cost(row["step_cost"]))
        out.print(tools)


def shown_cost(spent: dict[str, Any]) -> str:
    """A cost as ``gather`` gives it (``stats.cost``), for the text output."""
    return money(spent["cost_known_usd"], spent["costs_unknown"])
