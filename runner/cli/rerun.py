"""``runner rerun``: finished runs started over on another model or prompt, and what changed (``runner.rerun``)."""

from __future__ import annotations

from datetime import datetime

import click

from .._log.statuses import UNSETTLED, Status
from .._rerun import RerunReport, rerun
from .._rerun.html import write as write_html
from .._rerun.report import NO_BASELINES, skipped_note
from .._rerun.session import MAX_SAMPLES
from .._text import plural
from .._view.lineage import RERUN
from ..errors import PriceUnknown
from ..prices import Price
from ..store import RunStore
from .costs import PRICES, check_priced, max_cost_option
from .options import (
    EXIT_INTERRUPTED,
    EXIT_NO,
    MAX_LIMIT,
    CliError,
    CliUsageError,
    Env,
    common,
    label_option,
    when_option,
)
from .render import print_json
from .rerun_table import print_report, progress_line
from .specs import MODEL_HELP, build_model, load_tools, model_options, tracer_provider

ENDED = [status.value for status in Status if status not in UNSETTLED]


def at_most_max_samples(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value > MAX_SAMPLES:
        raise click.BadParameter(f"{value} is more than {MAX_SAMPLES}, the most samples a rerun takes", ctx, param)
    return value


@click.command("rerun")
@click.argument("run_refs", nargs=-1, metavar="[RUN]...")
@click.option("--status", "statuses", multiple=True, type=click.Choice(ENDED),
              help="Baselines: the runs that ended so (repeatable: any of them).")
@click.option("--since", callback=when_option, metavar="WHEN",
              help="Baselines: runs started at or after WHEN: 30m, 2h, 3d, 1w ago, or an ISO date/datetime (UTC).")
@label_option("Baselines: runs with this label (repeatable: all of them).")
@click.option("--tool", metavar="NAME", help="Baselines: runs that called this tool.")
@click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=20, show_default=True,
              help="Baselines: at most this many of the runs the filters select, newest first.")
@click.option("--model", "model_spec", required=True, metavar="SPEC", help=f"The new model: {MODEL_HELP}.")
@model_options
@click.option("--system", default=None, help="A new system prompt (default: each baseline's own).")
@click.option("--tools", "tools_spec", metavar="MODULE:ATTR",
              help="Live tools for calls the recording does not hold: only those with no side effects and no "
                   "approval ever run. Without it, no tool runs.")
@click.option("--samples", type=click.IntRange(min=1), callback=at_most_max_samples, default=1, show_default=True,
              help=f"Candidates per baseline, at most {MAX_SAMPLES} (more tell a change from noise).")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
              help="Candidates running at once.")
@max_cost_option("Each candidate stops cost_limit once its model calls cost that much (default: its baseline's "
                 "budget).")
@PRICES
@click.option("--html", "html_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write the report as one self-contained HTML page.")
@click.option("--quiet", "-q", is_flag=True, help="No progress line (one per finished case) on stderr.")
@common
def rerun_command(env: Env, run_refs: tuple[str, ...], statuses: tuple[str, ...], since: datetime | None,
          labels: dict[str, str], tool: str | None, limit: int, model_spec: str, base_url: str | None,
          api_key: str | None, system: str | None, tools_spec: str | None, samples: int, concurrency: int,
          max_cost_usd: float | None, prices: dict[str, Price] | None, html_path: str | None, quiet: bool) -> None:
    """Rerun finished runs (the baselines) on a new model and report what changed; exit 1 if a case regressed.

    The baselines are the RUN ids given, or the runs the filters select (as `runner runs` does; runs
    not ended, running, queued or awaiting approval, are skipped with a note, and earlier reruns'
    candidates left out). No baseline left is a usage error (exit 2). Each gets --samples new runs with its
    task, system prompt, tool specs and limits, linked to it and labelled rerun=ID. A call the baseline
    made gets its recorded result: no tool runs again, and no side effect is ever repeated.

    \b
      runner rerun --status done --since 1d --model openai:gpt-4.1-mini
      runner rerun 1f2e3d4c --model openai:local --base-url http://127.0.0.1:8088/v1 --samples 3 --json
    """
    filtered = bool(statuses or since or labels or tool)
    if run_refs and filtered:
        raise CliUsageError("give RUN ids or filters (--status, --since, --label, --tool), not both")
    if not run_refs and not filtered:
        raise CliUsageError("name the baselines: RUN ids, or filters such as --status done --since 1d")
    if model_spec == "scripted":
        raise CliUsageError("a scripted model cannot answer a rerun: use --model with " + MODEL_HELP)
    registry = load_tools(tools_spec) if tools_spec is not None else None
    model = build_model(model_spec, base_url, api_key)
    check_priced(model, prices, max_cost_usd, given=True)
    with env.store(create=True) as store:
        run_ids = given(store, run_refs) if run_refs else selected(store, statuses, since, labels, tool, limit)
        if not run_ids:
            raise CliUsageError(NO_BASELINES)
        provider, flush = tracer_provider(env.hint())
        try:
            report = rerun(store, run_ids, model, registry=registry, samples=samples, system=system,
                                concurrency=concurrency, max_cost_usd=max_cost_usd, prices=prices,
                                progress=None if quiet else progress_line, tracer_provider=provider)
        except PriceUnknown as exc:
            raise CliUsageError(str(exc)) from None
        except ValueError as exc:
            raise CliError(str(exc)) from None
        finally:
            flush()
        if html_path is not None:
            html(report, html_path)
        if env.as_json:
            print_json(report.to_json())
        else:
            print_report(report, store, env.hint(), html_path)
    finish(report)


def given(store: RunStore, refs: tuple[str, ...]) -> list[str]:
    """The ids of the RUN refs given, each once; those not ended (running, queued, awaiting approval) are skipped."""
    found = {run.run_id: run for run in (store.find_run(ref) for ref in refs)}
    going = [(run.run_id, run.status) for run in found.values() if run.status in UNSETTLED]
    if going:
        click.echo(f"note: {skipped_note(going)}", err=True)
    return [run_id for run_id, run in found.items() if run.status not in UNSETTLED]


def selected(store: RunStore, statuses: tuple[str, ...], since: datetime | None, labels: dict[str, str],
             tool: str | None, limit: int) -> list[str]:
    """The runs the filters select, as ``runner runs --top`` lists them, less those still going and earlier candidates.

    An earlier rerun's candidates are kept when the filters ask for them by their ``rerun`` label. A
    sub-agent's child run is never a baseline: its tree is rerun from its root.
    """
    found = store.list_runs(status=list(statuses) or None, since=since, tool=tool, label=labels or None, limit=limit,
                            top=True)
    candidates_too = RERUN in labels  # asked for by their label: an earlier rerun's candidates are the baselines
    going = [(run.run_id, run.status) for run in found if run.status in UNSETTLED]
    earlier = sum(1 for run in found if run.status not in UNSETTLED and not candidates_too and RERUN in run.labels)
    if going:
        click.echo(f"note: {skipped_note(going)}", err=True)
    if earlier:
        click.echo(f"note: left out {plural(earlier, 'candidate')} of an earlier rerun (select them with "
                   "--label rerun=ID)", err=True)
    return [run.run_id for run in found
            if run.status not in UNSETTLED and (candidates_too or RERUN not in run.labels)]


def html(report: RerunReport, path: str) -> None:
    try:
        write_html(report, path)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def finish(report: RerunReport) -> None:
    """Exit 130 when interrupted, 1 when a case regressed, else 0."""
    if report.interrupted:
        raise click.exceptions.Exit(EXIT_INTERRUPTED)
    if not report.ok:
        raise click.exceptions.Exit(EXIT_NO)
