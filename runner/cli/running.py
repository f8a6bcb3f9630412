"""``runner demo`` and ``runner run TASK``: record (and trace) a run, then say what to try next."""

from __future__ import annotations

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
from .options import CliUsageError, Env, common, label_option
from .queries import short_ids
from .render import clean, console, print_json


def record(store: RunStore, task: str, model: Model, registry: ToolRegistry, labels: dict[str, str], *,
           system: str = DEFAULT_SYSTEM, max_steps: int = 8, token_budget: int = 4000,
           max_tool_calls: int | None = None, timeout_s: float | None = None) -> AgentResult:
    """``run_agent`` recorded in ``store`` and traced, flushing the spans before returning."""
    provider, flush = tracer_provider()
    try:
        return run_agent(task, model, registry, system, max_steps, token_budget, store=store,
                         tracer_provider=provider, labels=labels, max_tool_calls=max_tool_calls, timeout_s=timeout_s)
    finally:
        flush()


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
    out.print(Text(f"status {result.status}, {result.steps} steps, {result.tool_calls} tool calls, "
                   f"{result.tokens} tokens", style=status_style(result.status)))
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
        result = record(store, DEMO_TASK, model, demo_registry(), {"example": "demo"})
        replay = "runner replay tests/fixtures/run.json --tools runner.demo:demo_registry"
        report(env, store, result, [replay])
    if result.status != "done":
        raise click.exceptions.Exit(1)


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
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Wall-clock limit for the whole run.")
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
        result = record(store, task, model, registry, labels, system=system, max_steps=max_steps,
                        token_budget=token_budget, max_tool_calls=max_tool_calls, timeout_s=timeout_s)
        report(env, store, result, [f"runner replay tests/fixtures/run.json --tools {tools_spec}"])
    if result.status != "done":
        raise click.exceptions.Exit(1)
