"""``runner prune --before WHEN``: delete whole finished runs (a thin layer over ``RunStore.prune``).

The plan is read first from a read-only store (so a mistyped ``--db`` is an error,
never a new store); ``--dry-run`` stops there. Deleting asks for confirmation when
stdin is a terminal, and needs ``--yes`` when it is not (a script), so nothing is
deleted by accident.
"""

from __future__ import annotations

import sys
from datetime import datetime

import click
from rich.text import Text

from .._text import plural
from ..store import PRUNABLE, PruneResult
from .options import EXIT_NO, CliUsageError, Env, common, when_option
from .render import console, print_json, status_style


def stdin_is_tty() -> bool:
    """Whether a person can answer the confirmation (tests replace this)."""
    return sys.stdin.isatty()


@click.command()
@click.option("--before", required=True, callback=when_option, metavar="WHEN",
              help="Runs started before WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@click.option("--status", "statuses", multiple=True, type=click.Choice([status.value for status in PRUNABLE]),
              help="Only runs that ended so (repeatable). Default: every finished status.")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed when stdin is not a terminal).")
@common
def prune(env: Env, before: datetime, statuses: tuple[str, ...], dry_run: bool, yes: bool) -> None:
    """Delete whole finished runs started before WHEN, with their events, labels and tools.

    Never a running, queued or awaiting_approval run, nor a run that a kept run
    was forked or followed up from. Single events stay undeletable.

    \b
    runner prune --before 30d --dry-run
    runner prune --before 2025-01-01 --status done --yes
    """
    status = list(statuses) or None
    with env.store() as store:
        planned = store.prune(before, status=status, dry_run=True)
    if dry_run or not planned.runs:
        show(env, planned)
        return
    if not yes:
        if not stdin_is_tty():
            raise CliUsageError(f"prune would delete {plural(len(planned.runs), 'run')}: pass --yes to confirm "
                                "(stdin is not a terminal), or --dry-run to see them")
        if not env.as_json:  # one JSON document on stdout: the result
            show(env, planned)
        if not click.confirm(f"Delete {plural(len(planned.runs), 'run')} and "
                             f"{plural(planned.events, 'event')}?", default=False, err=True):
            click.echo("nothing deleted", err=True)
            raise click.exceptions.Exit(EXIT_NO)
    with env.store(create=True) as store:
        show(env, store.prune(before, status=status))


def show(env: Env, result: PruneResult) -> None:
    """The runs deleted (or that would be), their event count, and the parents kept."""
    if env.as_json:
        print_json({"dry_run": result.dry_run, "events": result.events, "kept_parents": list(result.kept_parents),
                    "runs": [{"run_id": run.run_id, "status": run.status, "started_at": run.started_at.isoformat(),
                              "parent_run_id": run.parent_run_id} for run in result.runs]})
        return
    out = console()
    verb = "would delete" if result.dry_run else "deleted"
    for run in result.runs:
        line = Text(f"{verb} {run.run_id}  ")
        line.append(run.status, style=status_style(run.status))
        line.append(f"  started {run.started_at:%Y-%m-%d %H:%M:%S}")
        out.print(line)
    out.print(Text(f"{verb} {plural(len(result.runs), 'run')} and {plural(result.events, 'event')}"
                   if result.runs else "no runs to prune", style="bold"))
    if result.kept_parents:
        out.print(Text(f"kept {plural(len(result.kept_parents), 'run')} that a kept run continues: "
                       + ", ".join(result.kept_parents), style="dim"))
