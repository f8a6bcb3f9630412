"""``runner stats``: statuses, tools, latencies, tokens and cost over a window of runs.

The store counts the runs (picked by ``started_at``) and hands over the facts that
time their steps and tool calls, and each model call's cost (``RunStore.activity``);
latencies and costs are summarised here, the same way on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
from rich.text import Text

from .._text import plural, shown_name
from .._view.summary import iso, money, seconds
from .._view.timeline import tool_failed
from ..events import StepFinished, StepStarted, ToolFinished
from ..store import CallCost, RunStore
from .options import Env, common, when_option
from .render import console, median, percentile, print_json, status_style, table


def latency(values: list[float]) -> dict[str, float | None]:
    return {"count": len(values), "median_s": median(values), "p95_s": percentile(values, 0.95)}


@dataclass(slots=True)
class Spent:
    """Model calls' costs added up: the known part, and how many replies had no known cost."""

    calls: int = 0
    known_usd: float = 0.0
    unknown: int = 0

    def add(self, call: CallCost) -> None:
        self.calls += 1
        if call.cost_usd is not None:
            self.known_usd += call.cost_usd
        elif call.replied:  # a call that returned nothing is taken to have cost nothing, as in a run's summary
            self.unknown += 1

    def json(self) -> dict[str, Any]:
        """As a run's ``--json`` says a cost: ``cost_usd`` null while any is unknown, ``cost_known_usd`` a floor."""
        return {"cost_usd": None if self.unknown else self.known_usd, "cost_known_usd": self.known_usd,
                "costs_unknown": self.unknown}


def costs(calls: list[CallCost], tool_steps: dict[str, set[tuple[str, int]]]) -> dict[str, Any]:
    """The cost of every model call, per model (``provider:model``), and per tool: what its steps' calls cost.

    A tool's steps are those whose reply asked for it; a step that asked for two tools counts for each.
    """
    total = Spent()
    models: dict[str, Spent] = {}
    steps: dict[tuple[str, int], Spent] = {}
    for call in calls:
        total.add(call)
        models.setdefault(f"{call.provider}:{call.model}" if call.provider else call.model, Spent()).add(call)
        steps.setdefault((call.run_id, call.step), Spent()).add(call)
    tools: dict[str, Spent] = {}
    for name, keys in tool_steps.items():
        spent = tools[name] = Spent()
        for key in keys:
            step = steps.get(key)
            if step is not None:
                spent.known_usd += step.known_usd
                spent.unknown += step.unknown
    return {"total": total.json(),
            "models": {name: {"calls": spent.calls, **spent.json()}
                       for name, spent in sorted(models.items(), key=lambda kv: (-kv[1].known_usd, kv[0]))},
            "tools": {name: {"steps": len(tool_steps[name]), **spent.json()} for name, spent in tools.items()}}


def gather(store: RunStore, since: datetime | None, until: datetime | None) -> dict[str, Any]:
    """The statistics of the runs started in [since, until), as plain JSON-able data."""
    found = store.activity(since, until)
    tools: dict[str, dict[str, Any]] = {}
    tool_steps: dict[str, set[tuple[str, int]]] = {}
    steps: list[float] = []
    started: dict[tuple[str, int], datetime] = {}
    for run_id, at, fact in found.timed:
        match fact:
            case StepStarted():
                started[(run_id, fact.step)] = at
            case StepFinished() if (run_id, fact.step) in started:
                steps.append((at - started.pop((run_id, fact.step))).total_seconds())
            case ToolFinished():
                tool_steps.setdefault(str(fact.name), set()).add((run_id, fact.step))
                tool = tools.setdefault(str(fact.name), {"calls": 0, "errors": 0, "durations": []})
                tool["calls"] += 1
                if tool_failed(fact):
                    tool["errors"] += 1
                tool["durations"].append(float(fact.duration_s))
    runs_total = sum(found.by_status.values())
    all_durations = [d for tool in tools.values() for d in tool["durations"]]
    spent = costs(found.costs, tool_steps)
    return {
        "since": iso(since), "until": iso(until), "runs": runs_total,
        "by_status": dict(sorted(found.by_status.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tokens": {"total": found.tokens, "per_run": found.tokens / runs_total if runs_total else None},
        "tool_calls": found.tool_calls,
        "cost": spent["total"],
        "models": spent["models"],
        "step_latency": latency(steps),
        "tool_latency": latency(all_durations),
        "tools": {name: {"calls": t["calls"], "errors": t["errors"], "error_rate": t["errors"] / t["calls"],
                         **latency(t["durations"]), "step_cost": spent["tools"][name]}
                  for name, t in sorted(tools.items(), key=lambda kv: (-kv[1]["calls"], kv[0]))},
    }


@click.command()
@click.option("--since", callback=when_option, metavar="WHEN",
              help="Runs started at or after WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@click.option("--until", callback=when_option, metavar="WHEN", help="Runs started before WHEN (same forms).")
@common
def stats(env: Env, since: datetime | None, until: datetime | None) -> None:
    """Counts by status, tool calls and error rate per tool, step and tool latency (median, p95), tokens, cost.

    Cost is in USD, per model and per tool: a tool's is what the model calls of the steps that asked for it
    cost. "≥$0.0100" is the known part when some calls had no price or reported no usage; "-" knows none.
    """
    with env.store() as store:
        found = gather(store, since, until)
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
    statuses = table("status", "runs", "share", right=("runs", "share"))
    for status, count in found["by_status"].items():
        statuses.add_row(Text(status, style=status_style(status)), str(count), f"{count / found['runs']:.0%}")
    out.print(statuses)
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
        for name, tool in found["tools"].items():
            rate = Text(f"{tool['error_rate']:.0%}", style="red" if tool["errors"] else "")
            tools.add_row(Text(shown_name(name)), str(tool["calls"]), str(tool["errors"]), rate,
                          seconds(tool["median_s"]), seconds(tool["p95_s"]), shown_cost(tool["step_cost"]))
        out.print(tools)


def shown_cost(spent: dict[str, Any]) -> str:
    """A cost as ``gather`` gives it (``Spent.json``), for the text output."""
    return money(spent["cost_known_usd"], spent["costs_unknown"])
