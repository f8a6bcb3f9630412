"""``runner demo`` and ``runner run TASK``: record (and trace) a run, then say what to try next."""

from __future__ import annotations

import math
import uuid

import click
from rich.console import Console
from rich.text import Text

from ..core import DEFAULT_SYSTEM
from ..demo import DEMO_TASK, demo_model, demo_registry
from ..loop import run_agent
from ..messages import Model
from ..results import AgentResult
from ..store import RunStore
from ..tools import ToolRegistry
from .inspect import status_style
from .loading import MODEL_HELP, build_model, load_tools, model_options, tracer_provider
from .options import EXIT_INTERRUPTED, EXIT_NO, CliUsageError, Env, common, label_option
from .queries import refused_calls, short_ids
from .render import clean, console, plural, print_json

MAX_TIMEOUT_S = 365 * 86400.0  # a year; far beyond it, waiting overflows the platform's timers


def not_nan(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds", ctx, param)
    return value


def record(env: Env, store: RunStore, task: str, model: Model, registry: ToolRegistry, labels: dict[str, str], *,
           system: str = DEFAULT_SYSTEM, max_steps: int = 8, token_budget: int = 4000,
           max_tool_calls: int | None = None, timeout_s: float | None = None) -> AgentResult:
    """``run_agent`` recorded in ``store`` and traced, flushing the spans before returning.

    The run id is chosen here, so that a Ctrl-C (which ``run_agent`` answers by closing
    the run as ``cancelled`` and re-raising) can still say which run it stopped.
    """
    run_id = uuid.uuid4().hex
    provider, flush = tracer_provider()
    try:
        return run_agent(task, model, registry, system, max_steps, token_budget, store=store, run_id=run_id,
                         tracer_provider=provider, labels=labels, max_tool_calls=max_tool_calls, timeout_s=timeout_s)
    except KeyboardInterrupt:
        interrupted(env, store, run_id)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    finally:
        flush()


def interrupted(env: Env, store: RunStore, run_id: str) -> None:
    """After Ctrl-C: the run's id and the status the log closed it with, and how to look at it."""
    from ..errors import StoreError

    try:
        run = store.get_run(run_id)
    except StoreError:  # interrupted before the run was recorded
        status, error = None, None
    else:
        status, error = run.status, run.error
    if env.as_json:
        print_json({"run_id": run_id if status else None, "status": status, "error": error, "interrupted": True})
        return
    out = console()
    if status is None:
        out.print(Text("interrupted before the run was recorded", style="bold red"))
        return
    out.print(Text(f"interrupted: run {run_id} is {status}" + (f" ({clean(error)})" if error else ""),
                   style="bold red"))
    out.print(Text(f"  runner show {short_ids(store, [run_id])[run_id]}{env.hint()}"))


def report(env: Env, store: RunStore, result: AgentResult, extra_next: list[str]) -> None:
    """The answer (or the stop), the run id, and the commands to try next."""
    if env.as_json:
        print_json({"run_id": result.run_id, "status": result.status, "answer": result.answer,
                    "error": result.error, "steps": result.steps, "tokens": result.tokens,
                    "tool_calls": result.tool_calls})
        return
    out = console()
    if result.status == "done":
        out.print(Text(clean(result.answer or "")))
    else:
        out.print(Text(f"stopped: {result.status}: {clean(result.error or '')}", style="bold red"))
    short = short_ids(store, [result.run_id])[result.run_id]
    out.print(Text(f"\nrun id: {result.run_id}", style="bold"))
    refused = refused_calls(store, [result.run_id])[result.run_id]
    calls = plural(result.tool_calls, "tool call") + (f" (+{refused} refused)" if refused else "")
    out.print(Text(f"status {result.status}, {plural(result.steps, 'step')}, {calls}, "
                   f"{plural(result.tokens, 'token')}", style=status_style(result.status)))
    _next(out, env, short, extra_next)


def _next(out: Console, env: Env, short: str, extra: list[str]) -> None:
    db = env.hint()
    commands = [f"runner show {short}{db}", f"runner runs{db}", f"runner stats{db}",
                f"runner export {short} -o tests/fixtures/run.json{db}", *extra,
                f"runner spans {short} --endpoint http://127.0.0.1:4318/v1/traces{db}"]
    out.print(Text("\nnext, try:", style="bold"))
    for command in commands:
        out.print(Text(f"  {command}"))


@click.command()
@click.option("--model", "model_spec", default="scripted", show_default=True, metavar="SPEC",
              help=f"'scripted' (the bundled replies), {MODEL_HELP}.")
@model_options
@common
def demo(env: Env, model_spec: str, base_url: str | None, api_key: str | None) -> None:
    """Run the bundled example: an 18% tip on a EUR 127.50 bill split 4 ways, in USD.

    Two safe tools (arithmetic on an AST walk, never eval; currency over a fixed,
    labelled rate table); recorded in the store and traced (OTLP when
    OTEL_EXPORTER_OTLP_ENDPOINT is set).
    """
    model = demo_model() if model_spec == "scripted" else build_model(model_spec, base_url, api_key)
    with env.store(create=True) as store:
        result = record(env, store, DEMO_TASK, model, demo_registry(), {"example": "demo"})
        replay = "runner replay tests/fixtures/run.json --tools runner.demo:demo_registry"
        report(env, store, result, [replay])
    if result.status != "done":
        raise click.exceptions.Exit(EXIT_NO)


@click.command()
@click.argument("task")
@click.option("--tools", "tools_spec", required=True, metavar="MODULE:ATTR",
              help="Your tools: a ToolRegistry, or a function returning one.")
@click.option("--model", "model_spec", metavar="SPEC", help=f"Required: {MODEL_HELP}.")
@model_options
@click.option("--system", default=DEFAULT_SYSTEM, help="The system prompt.")
@click.option("--max-steps", type=click.IntRange(min=1), default=8, show_default=True, help="Model calls at most.")
@click.option("--token-budget", type=click.IntRange(min=1), default=4000, show_default=True,
              help="Tokens (prompt + reply, estimated or reported) at most.")
@click.option("--max-tool-calls", type=click.IntRange(min=0), help="Tool calls at most.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
              callback=not_nan, metavar="SECONDS", help="Wall-clock limit for the whole run (at most a year).")
@label_option("Label the run (repeatable), for `runner runs --label`.")
@common
def run(env: Env, task: str, tools_spec: str, model_spec: str | None, base_url: str | None, api_key: str | None,
        system: str, max_steps: int, token_budget: int, max_tool_calls: int | None, timeout_s: float | None,
        labels: dict[str, str]) -> None:
    """Run TASK with your tools and a real model, recorded and traced; exit 1 unless it ends done."""
    if model_spec is None:
        raise CliUsageError(f"runner run needs --model ({MODEL_HELP}); a scripted model cannot answer a new task")
    if model_spec == "scripted":
        raise CliUsageError("a scripted model cannot answer a new task: use --model with " + MODEL_HELP)
    registry = load_tools(tools_spec)
    model = build_model(model_spec, base_url, api_key)
    with env.store(create=True) as store:
        result = record(env, store, task, model, registry, labels, system=system, max_steps=max_steps,
                        token_budget=token_budget, max_tool_calls=max_tool_calls, timeout_s=timeout_s)
        report(env, store, result, [f"runner replay tests/fixtures/run.json --tools {tools_spec}"])
    if result.status != "done":
        raise click.exceptions.Exit(EXIT_NO)
