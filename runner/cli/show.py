"""``runner runs`` (list and filter) and ``runner show RUN`` (one run as a timeline)."""

from __future__ import annotations

from datetime import datetime

import click

from .._log.statuses import Status
from .._text import plural, shown_name
from .._view.continuation import TOOLS_PLACEHOLDER, resume_command
from .._view.lineage import children, parent_of
from .._view.listing import RunFilter, Waiting, origins, runs_page, waiting
from .._view.show import show_json
from .._view.summary import money, summary_json
from .._view.timeline import timeline
from .._view.tree import children_in, nest, root_of, spent, waiting_below
from ..store import RunSummary
from .lineage import continue_hint
from .listing import Row, runs_table
from .options import MAX_LIMIT, Env, common, label_option, when_option
from .render import console, print_json, status_style
from .timeline import rendered, status_label

MORE_COUNTED = 1000  # past a full page, count at most this many more matching runs


@click.command()
@click.option("--status", "statuses", multiple=True, type=click.Choice([status.value for status in Status]),
              help="Only runs that ended so (repeatable: any of them).")
@click.option("--since", callback=when_option, metavar="WHEN",
              help="Runs started at or after WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@click.option("--until", callback=when_option, metavar="WHEN", help="Runs started before WHEN (same forms).")
@click.option("--tool", metavar="NAME", help="Runs that called this tool.")
@click.option("--search", metavar="TEXT", help="Runs whose task or answer contains TEXT (any case).")
@label_option("Runs with this label (repeatable: all of them).")
@click.option("--top", is_flag=True, help="Only top-level runs: none of the sub-agents' child runs (marked ↳).")
@click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=20, show_default=True,
              help="At most this many runs; the list then says how many more match.")
@common
def runs(env: Env, statuses: tuple[str, ...], since: datetime | None, until: datetime | None, tool: str | None,
         search: str | None, labels: dict[str, str], top: bool, limit: int) -> None:
    """List recorded runs, newest first, and say how many more match past --limit.

    "tool calls" counts the calls that ran, a call run again after a crash once; calls refused before
    running (an unknown tool, bad arguments, a repeat) are shown apart: "3 (+1 refused)". A sub-agent's
    child run is marked "↳ AGENT:" before its task. Runs awaiting approval, and running ones whose process
    is gone ("running (dead)"), get a note saying how to go on with them: every run awaiting approval the
    filters match is counted, not only those listed.

    \b
      runner runs --status step_limit --since 1d
      runner runs --tool get_weather --label env=prod --json
    """
    where = RunFilter(status=tuple(statuses) or None, since=since, until=until, tool=tool, text=search, labels=labels,
                      top=top)
    with env.store() as store:
        # Only a full page can have more; count them, but only so far (a text search would read every run).
        page = runs_page(store, where, limit=limit, count_more=0 if env.as_json else MORE_COUNTED + 1)
        found, refused = page.runs, page.refused
        if env.as_json:
            how = origins(store, found)
            print_json([summary_json(run, refused[run.run_id], how[run.run_id]) for run in found])
            return
        asking = waiting(store, where, at_most=MORE_COUNTED + 1)
        shorts = store.short_ids([run.run_id for run in found] + ([asking.newest] if asking.newest else []))
    out = console()
    if not found:
        out.print("no runs match", style="dim")
        return
    rows = [Row(shorts[run.run_id], run.started_at, status_label(run), status_style(run.status, run.liveness),
                run.steps, run.tool_calls, refused[run.run_id], run.tokens,
                money(run.cost_known_usd, run.costs_unknown),
                (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None,
                child_marker(run) + run.task)
            for run in found]
    grid, note = runs_table(rows, out.width)
    out.print(grid)
    if note:
        out.print(note, style="dim")
    for line in waiting_notes(found, asking, shorts, env.hint()):
        out.print(line, style="dim")
    more = page.more
    if more > MORE_COUNTED:
        out.print(f"… over {MORE_COUNTED:,} more match; narrow the filters or raise --limit", style="dim")
    elif more > 0:
        out.print(f"… {more:,} more match; use --limit {limit + more} to see them", style="dim")


def child_marker(run: RunSummary) -> str:
    """``↳ research: `` before the task of a sub-agent's child run (its agent's name); '' for any other run."""
    return f"↳ {shown_name(run.agent_name or 'sub-agent')}: " if run.parent_call_id is not None else ""


def waiting_notes(found: list[RunSummary], asking: Waiting, shorts: dict[str, str], db_hint: str) -> list[str]:
    """Notes under the table for the runs that wait on someone: approvals (all that match), and dead processes.

    The dead are those listed: the store judges a process gone as it reads each run.
    """
    notes = []
    if asking.runs:
        which = shorts[asking.newest] if asking.runs == 1 and asking.newest else "ID"
        many = f"over {MORE_COUNTED:,} runs" if asking.runs > MORE_COUNTED else plural(asking.runs, "run")
        notes.append(f"note: {many} awaiting approval: runner show {which}{db_hint} "
                     "lists the calls to --approve or --deny")
    dead = [run.run_id for run in found if run.gone]
    if dead:
        which = shorts[dead[0]] if len(dead) == 1 else "ID"
        notes.append(f"note: {plural(len(dead), 'run')} whose process is gone: "
                     f"{resume_command(which, TOOLS_PLACEHOLDER, (), db_hint)} continues it")
    return notes


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--full", is_flag=True, help="Show observations and arguments whole, not cut.")
@common
def show(env: Env, run_ref: str, full: bool) -> None:
    """Show one run as a timeline: model text, tool calls, observations, errors and how it stopped.

    Also its parent and children (each sub-agent's child run under its call, and what the tree spent),
    what a fork or follow-up inherited (swapped observations marked), each resume, approval requests (its
    sub-agents' too), calls left in doubt, and the `runner resume` command that answers a run awaiting
    approval. In "took 3m12s (active 4.10s)" the active time leaves out the waits for an approval or a resume.

    RUN is a run id or any unique prefix of one, as `runner runs` prints.
    """
    with env.store() as store:
        run = store.find_run(run_ref)
        if env.as_json:
            print_json(show_json(store, run))
            return
        linked = children(store, run.run_id)
        shown = nest(store, run, timeline(run, parent_of(store, run)))
        root = root_of(store, run)
        shorts = store.short_ids(list({run.run_id, root.run_id}))
    out = console()
    tree = spent(run, shown) if children_in(shown) else None
    for line in rendered(run, shown, full=full, children=linked, tree=tree):
        out.print(line)
    for line in continue_hint(run, shorts[run.run_id], env.hint(), root=root, root_short=shorts[root.run_id],
                              below=list(waiting_below(shown))):
        out.print(line)
