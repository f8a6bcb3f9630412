"""A run's summary and its events as ``--json`` prints them (and the console's API serves them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._log.records import RunSummary, StoredEvent, StoredRun
from ..events import ToolFinished

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
SMALLEST_SHOWN = 0.00005  # below this, four decimals would round a cost to $0.0000


@dataclass(frozen=True, slots=True)
class Totals:
    """What a run, or a tree of runs, spent: tokens, the known part of the cost, the model calls of unknown cost."""

    tokens: int = 0
    cost_known_usd: float = 0.0
    costs_unknown: int = 0

    @classmethod
    def of(cls, run: RunSummary) -> Totals:
        """The run's own."""
        return cls(run.tokens, run.cost_known_usd, run.costs_unknown)

    @property
    def cost_usd(self) -> float | None:
        """The cost, or None while any model call's cost is unknown (``cost_known_usd`` is then a floor)."""
        return None if self.costs_unknown else self.cost_known_usd

    @property
    def cost(self) -> str:
        """The cost as ``money`` writes it."""
        return money(self.cost_known_usd, self.costs_unknown)

    def plus(self, other: Totals) -> Totals:
        return Totals(self.tokens + other.tokens, self.cost_known_usd + other.cost_known_usd,
                      self.costs_unknown + other.costs_unknown)


def when(at: datetime | None) -> str:
    """A UTC timestamp to the second, as the tables show it."""
    return "-" if at is None else at.astimezone(UTC).strftime(TIME_FORMAT)


def seconds(value: float | None) -> str:
    """A duration for people: 850µs, 12.3ms, 4.20s, 3m05s, 2h04m."""
    if value is None:
        return "-"
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1e3:.1f}ms"
    if value < 60:
        return f"{value:.2f}s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def iso(at: datetime | None) -> str | None:
    """``at`` in ISO 8601 UTC, or None."""
    return None if at is None else at.astimezone(UTC).isoformat()


def refused_in(run: StoredRun) -> int:
    """``RunStore.refused_calls`` of a run whose facts are at hand."""
    return sum(1 for fact in run.facts if isinstance(fact, ToolFinished) and not fact.ran)


def summary_json(run: RunSummary, refused: int, origin: str | None = None) -> dict[str, Any]:
    """A run's summary for ``--json``: plain values, times in ISO 8601 UTC.

    ``tool_calls`` counts the calls that ran, ``tool_calls_refused`` those refused before running.
    ``cost_usd`` is null while any model call's cost is unknown; ``cost_known_usd`` is then a floor.
    ``origin``: how a linked run came about (``fork``, ``follow_up``, ``subagent``...); a sub-agent's
    child run names the call it serves (``parent_call_id``).
    """
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    return {
        "run_id": run.run_id, "status": run.status, "task": run.task, "answer": run.answer, "error": run.error,
        "steps": run.steps, "tool_calls": run.tool_calls, "tool_calls_refused": refused, "tokens": run.tokens,
        "cost_usd": run.cost_usd, "cost_known_usd": run.cost_known_usd, "costs_unknown": run.costs_unknown,
        "model": run.model,
        "provider": run.provider, "agent_name": run.agent_name, "labels": run.labels,
        "started_at": iso(run.started_at), "finished_at": iso(run.finished_at), "duration_s": duration,
        "trace_id": run.trace_id, "parent_run_id": run.parent_run_id, "origin": origin,
        "parent_call_id": run.parent_call_id, "liveness": run.liveness,
    }


def money(known_usd: float, unknown: int | bool = 0) -> str:
    """An amount of USD for people: ``$0.0123``, ``$0.000018`` (never a non-zero cost as ``$0.0000``).

    ``unknown`` counts the model calls of unknown cost: then ``≥$0.0100`` (at least), or ``-`` when none is known.
    Four decimals from $0.00005 up; below that, two significant digits.
    """
    if unknown and not known_usd:
        return "-"
    floor = "≥" if unknown else ""
    if known_usd == 0 or abs(known_usd) >= SMALLEST_SHOWN:
        return f"{floor}${known_usd:.4f}"
    decimals = 1 - math.floor(math.log10(abs(known_usd)))  # two significant digits
    return f"{floor}${known_usd:.{decimals}f}"


def event_json(event: StoredEvent) -> dict[str, Any]:
    """One stored event as ``show --json`` lists it: its row, with the fact's data as stored."""
    return {"seq": event.seq, "at": iso(event.at), "step": event.step, "kind": event.kind, "data": event.data,
            "span_id": event.span_id}
