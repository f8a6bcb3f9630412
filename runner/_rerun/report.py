"""What a rerun reports: a case per baseline (its candidates side by side, what changed), and a summary.

``RerunReport.to_json`` is what ``runner rerun --json`` prints, and ``summary()`` its one line; the table
and the HTML report read the same values. ``ReplayReport`` has the same shape (``ok``, ``summary()``,
``to_json()``, ``assert_ok()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._text import plural
from .._view.summary import money
from .diff import RunFigures, calls_diff, compare
from .tools import ToolCounts

UNCHANGED, CHANGED, REGRESSED = "unchanged", "changed", "regressed"
NO_BASELINES = "no baselines: nothing to rerun (give runs that have ended)"


def skipped_note(going: Sequence[tuple[str, str]]) -> str:
    """``skipped 2 runs not ended (running, awaiting_approval): 1f2e3d4c, 9a8b7c6d``: baselines left out, and why."""
    statuses = ", ".join(dict.fromkeys(status for _, status in going))
    return (f"skipped {plural(len(going), 'run')} not ended ({statuses}): a rerun compares with runs that have "
            f"ended: {', '.join(run_id[:8] for run_id, _ in going)}")


@dataclass(frozen=True, slots=True)
class Case:
    """One baseline and its candidates, with the fields ``changed`` from it and those ``unstable`` between samples.

    ``tools`` says, per candidate, how its calls were answered (served from the recording, live, not run).
    """

    task: str
    baseline: RunFigures
    candidates: tuple[RunFigures, ...]
    tools: tuple[ToolCounts, ...]
    changed: tuple[str, ...]
    unstable: tuple[str, ...]
    regressed: bool

    @property
    def verdict(self) -> str:
        """``regressed``, ``changed`` or ``unchanged``."""
        return REGRESSED if self.regressed else CHANGED if self.changed else UNCHANGED

    def diffs(self) -> list[list[str]]:
        """Each candidate's tool calls against the baseline's, as ``diff.calls_diff`` lines (empty: the same)."""
        return [calls_diff(self.baseline.tool_calls, c.tool_calls) for c in self.candidates]

    def to_json(self) -> dict[str, Any]:
        candidates = [{**c.to_json(), "tool_calls_diff": diff,
                       "tools": {"served": t.served, "live": t.live, "not_run": t.not_run}}
                      for c, diff, t in zip(self.candidates, self.diffs(), self.tools, strict=True)]
        return {"baseline_run_id": self.baseline.run_id, "candidate_run_ids": [c.run_id for c in self.candidates],
                "task": self.task,
                "verdict": self.verdict, "changed": list(self.changed), "regressed": self.regressed,
                "unstable": list(self.unstable), "baseline": self.baseline.to_json(), "candidates": candidates}


def make_case(task: str, baseline: RunFigures, candidates: Sequence[RunFigures], tools: Sequence[ToolCounts]) -> Case:
    """The ``Case`` of a baseline and its finished candidates."""
    verdict = compare(baseline, candidates)
    return Case(task, baseline, tuple(candidates), tuple(tools), verdict.changed, verdict.unstable, verdict.regressed)


class Totals(NamedTuple):
    """Runs added up: how many, their tokens, their cost (None while any is unknown) and its known part."""

    runs: int
    tokens: int
    cost_usd: float | None
    cost_known_usd: float

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "tokens": self.tokens, "cost_usd": self.cost_usd,
                "cost_known_usd": self.cost_known_usd}


def totals(runs: Sequence[RunFigures]) -> Totals:
    known = sum(run.cost_known_usd for run in runs)
    unknown = any(run.cost_usd is None for run in runs)
    return Totals(len(runs), sum(run.tokens for run in runs), None if unknown else known, known)


@dataclass(frozen=True, slots=True)
class RerunReport:
    """What a rerun found: a ``Case`` per baseline whose candidates all finished, and a summary.

    ``interrupted`` says Ctrl-C (or the ``cancel`` event) stopped it: the candidates still running were
    closed ``cancelled``, and ``left`` names the baselines whose case did not finish, in no case.
    ``skipped`` names the runs given that had not ended (running, queued, awaiting approval): no baselines.
    ``ok`` is False when a case regressed.
    """

    rerun_id: str
    model: str
    provider: str | None
    samples: int
    cases: tuple[Case, ...]
    left: tuple[str, ...] = ()
    interrupted: bool = False
    elapsed_s: float = 0.0
    skipped: tuple[str, ...] = ()

    @property
    def regressed(self) -> tuple[Case, ...]:
        return tuple(case for case in self.cases if case.regressed)

    @property
    def ok(self) -> bool:
        return not self.regressed

    def count(self, verdict: str) -> int:
        """How many cases have this verdict (``unchanged``, ``changed`` or ``regressed``)."""
        return sum(1 for case in self.cases if case.verdict == verdict)

    @property
    def baseline_totals(self) -> Totals:
        return totals([case.baseline for case in self.cases])

    @property
    def candidate_totals(self) -> Totals:
        return totals([c for case in self.cases for c in case.candidates])

    def summary_json(self) -> dict[str, Any]:
        return {"cases": len(self.cases), UNCHANGED: self.count(UNCHANGED), CHANGED: self.count(CHANGED),
                REGRESSED: self.count(REGRESSED), "unstable": sum(1 for case in self.cases if case.unstable),
                "samples": self.samples, "interrupted": self.interrupted, "left": list(self.left),
                "skipped": list(self.skipped),
                "elapsed_s": self.elapsed_s, "baseline": self.baseline_totals.to_json(),
                "candidates": self.candidate_totals.to_json()}

    def summary(self) -> str:
        """``3 cases: 1 unchanged, 1 changed, 1 regressed (1 unstable); tokens 900 → 1,200 per sample; cost ...``."""
        base, cand = self.baseline_totals, self.candidate_totals
        per = max(self.samples, 1)
        unstable = sum(1 for case in self.cases if case.unstable)
        return (f"{plural(len(self.cases), 'case')}: {self.count(UNCHANGED)} unchanged, {self.count(CHANGED)} changed, "
                f"{self.count(REGRESSED)} regressed ({unstable} unstable); tokens {base.tokens:,} → "
                f"{round(cand.tokens / per):,} per sample; cost {money(base.cost_known_usd, base.cost_usd is None)} → "
                f"{money(cand.cost_known_usd, cand.cost_usd is None)} for {plural(cand.runs, 'candidate')}")

    def assert_ok(self) -> RerunReport:
        """Return self when no case regressed, else raise ``AssertionError`` naming the baselines that did."""
        if not self.ok:
            regressed = ", ".join(case.baseline.run_id for case in self.regressed)
            raise AssertionError(f"{self.summary()}; regressed: {regressed}")
        return self

    def to_json(self) -> dict[str, Any]:
        """The report as ``runner rerun --json`` prints it."""
        return {"rerun_id": self.rerun_id, "model": self.model, "provider": self.provider,
                "label": f"rerun={self.rerun_id}", "cases": [case.to_json() for case in self.cases],
                "summary": self.summary_json()}
