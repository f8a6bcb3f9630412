"""``runner export RUN -o FILE`` (a replay fixture) and ``runner replay FIXTURE_OR_RUN --tools module:attr``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from .._replay.fixture import Fixture, fixture_from_run, load_fixture
from .._replay.replayer import replay as replay_fixture
from .._replay.update import HINT_CLI, update_fixture
from .._text import clean, plural
from .._tools.registry import ToolRegistry
from .options import CliError, CliUsageError, Env, common
from .render import console, print_json
from .tooling import ToolsGiven, base_tools, check, mcp_options, tools_for


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write the fixture (JSON); '-' writes it to stdout.")
@common
def export(env: Env, run_ref: str, output: str) -> None:
    """Export a run as a replay fixture: a JSON file a test can replay without a database."""
    with env.store() as store:
        fixture = fixture_from_run(store.find_run(run_ref), store)
    if output == "-":
        click.echo(fixture.dumps(), nl=False)
        return
    try:
        path = fixture.write(output)
    except OSError as exc:
        raise CliError(f"cannot write fixture {output!r}: {exc.strerror or exc}") from None
    run_id = str(fixture.data["run_id"])
    if env.as_json:
        print_json({"path": str(path), "run_id": run_id, "replies": len(fixture.replies)})
        return
    console().print(Text(f"wrote {clean(path)}: run {run_id}, {plural(len(fixture.replies), 'model reply')}, "
                         f"ended {fixture.outcome['status']}"))


def source_fixture(env: Env, source: str) -> Fixture:
    """A fixture file when ``source`` is an existing path, else a run id (or prefix) in ``--db``."""
    if Path(source).is_file():
        return load_fixture(source)
    if source.endswith(".json") or "/" in source:
        return load_fixture(source)  # a missing file: say so, rather than "no run"
    with env.store() as store:
        return fixture_from_run(store.find_run(source), store)


@click.command()
@click.argument("source", metavar="FIXTURE_OR_RUN")
@click.option("--tools", "tools_spec", metavar="MODULE:ATTR",
              help="The tools to replay against: a ToolRegistry, or a function returning one (and/or --mcp).")
@mcp_options
@click.option("--live-side-effects", is_flag=True,
              help="Run tools registered with side_effects=True again, instead of serving their recorded results.")
@click.option("--update", is_flag=True,
              help="Accept an intended change: when the replay differs, rewrite the fixture file from the current "
                   "tools, keeping the recorded model replies.")
@common
def replay(env: Env, source: str, tools_spec: str | None, mcp_commands: tuple[str, ...], mcp_urls: tuple[str, ...],
           live_side_effects: bool, update: bool) -> None:
    """Replay a fixture file (or a stored run) against the current tools; exit 1 when it differs.

    The recorded model replies are played back; the tools without side effects really
    run, the others get their recorded results (unless --live-side-effects), and recorded
    approvals are replayed. The first place where what the model is shown differs from
    the recording is reported. The tools come from --tools, MCP servers (--mcp, --mcp-url), or both.
    """
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools, "a replay")
    base = base_tools(tools)
    if update:
        updated(env, source, tools, base, live_side_effects)
        return
    fixture = source_fixture(env, source)
    with tools_for(tools, base) as registry:
        report = replay_fixture(fixture, registry, live_side_effects=live_side_effects)
    if env.as_json:
        print_json({**report.to_json(), "live_side_effects": live_side_effects})
    else:
        out = console()
        if report.ok:
            out.print(Text("ok  ", style="bold green") + Text(clean(report.explain())))
        else:
            out.print(Text("DIFFERS  ", style="bold red") + Text(clean(report.explain())))
            if Path(source).is_file():
                out.print(Text(f"  ({HINT_CLI})", style="dim"))
    if not report.ok:
        raise click.exceptions.Exit(1)


def updated(env: Env, source: str, tools: ToolsGiven, base: ToolRegistry, live_side_effects: bool) -> None:
    """``runner replay FIXTURE --update``: rewrite a fixture that differs; one that matches is left alone."""
    if not Path(source).is_file():
        raise CliUsageError(f"--update rewrites a fixture file, and {source!r} is none (export a run first: "
                            "runner export RUN -o FILE)")
    load_fixture(source)  # a corrupt fixture: its own one-line error
    with tools_for(tools, base) as registry:
        found = update_fixture(source, registry, live_side_effects=live_side_effects)
    if env.as_json:
        print_json({**found.before.to_json(), "live_side_effects": live_side_effects, "updated": found.wrote})
    elif found.wrote:
        console().print(Text("updated  ", style="bold yellow") + Text(
            f"{clean(source)} now holds what the current tools return (the model's replies kept); it differed: "
            f"{clean(found.before.explain())}"))
    else:
        console().print(Text("ok  ", style="bold green") + Text(clean(found.before.explain()) + "; nothing to update"))
