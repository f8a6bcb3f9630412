"""What ``runner rerun`` prints: a progress line per finished case on stderr, then a table and a summary.

Statuses, answers and ids come from the store, so every one reaches the terminal through ``clean``.
"""

from __future__ import annotations

import click
from rich.text import Text

from .._rerun import Case, RerunReport
from .._text import clean, plural
from ..store import RunStore
from .render import console, status_style, table

VERDICT_STYLES = {"unchanged": "green", "changed": "yellow", "regressed": "bold red"}


def moved(before: object, after: list[object]) -> str:
    """``3 → 5``, or ``3 → 3/5/4`` for several samples; just ``3`` when nothing moved."""
    if all(value == before for value in after):
        return str(before)
    return f"{before} → {'/'.join(str(value) for value in after)}"


def progress_line(case: Case, done: int, total: int) -> None:
    """``[2/5] 1f2e3d4c changed (answer, tool_calls): done → done`` on stderr, as a case finishes."""
    why = f" ({', '.join(case.changed)})" if case.changed else ""
    statuses = moved(case.baseline.status, [c.status for c in case.candidates])
    click.echo(clean(f"[{done}/{total}] {case.baseline.run_id[:8]} {case.verdict}{why}: {statuses}"), err=True)


def print_report(report: RerunReport, store: RunStore, db_hint: str, html_path: str | None) -> None:
    """The table of cases, the summary, and where to look next."""
    out = console()
    ids = [run_id for case in report.cases for run_id in (case.baseline.run_id, *(c.run_id for c in case.candidates))]
    short = store.short_ids(ids) if ids else {}
    grid = table("baseline", "verdict", "status", "steps", "tokens", "changed", "candidates",
                 right=("steps", "tokens"), no_wrap=("baseline", "verdict", "candidates"))
    for case in report.cases:
        candidates = case.candidates
        status = Text(clean(moved(case.baseline.status, [c.status for c in candidates])),
                      style=status_style(candidates[0].status) if candidates else "")
        changed = ", ".join(f"{name}*" if name in case.unstable else name for name in case.changed) or "-"
        grid.add_row(short[case.baseline.run_id], Text(case.verdict, style=VERDICT_STYLES[case.verdict]), status,
                     moved(case.baseline.steps, [c.steps for c in candidates]),
                     moved(case.baseline.tokens, [c.tokens for c in candidates]), changed,
                     " ".join(short[c.run_id] for c in candidates))
    if report.cases:
        out.print(grid)
    if any(case.unstable for case in report.cases):
        out.print("* unstable: the samples disagree on it", style="dim")
    out.print(Text(clean(report.summary()), style="bold"))
    if report.interrupted:
        left = ", ".join(run_id[:8] for run_id in report.left)
        out.print(Text(f"interrupted: {plural(len(report.left), 'case')} did not finish ({clean(left)}); their "
                       "candidates were closed cancelled", style="bold red"))
    for case in report.regressed:
        worst = next((c for c in case.candidates if c.status != case.baseline.status), case.candidates[0])
        out.print(Text(clean(f"regressed: {short[case.baseline.run_id]} ended {case.baseline.status}, now "
                             f"{worst.status}" + (f" ({worst.error})" if worst.error else "")), style="red"))
    out.print(Text(f"\ncandidates: runner runs --label rerun={report.rerun_id}{db_hint}"))
    if report.cases and report.cases[0].candidates:
        first = short[report.cases[0].candidates[0].run_id]
        out.print(Text(f"one of them: runner show {first}{db_hint}"))
    if html_path is not None:
        out.print(Text(f"report: {clean(html_path)}"))
