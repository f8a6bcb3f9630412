"""``runner demo`` and ``runner run TASK``: record (and trace) a run, then say what to try next."""

from __future__ import annotations

import math
import shlex
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

import click
from rich.console import Console
from rich.text import Text

from .._log.limits import Limits
from .._log.state import fold
from .._log.statuses import Status
from .._loop.core import DEFAULT_SYSTEM
from .._loop.results import AgentResult
from .._loop.sync import run_agent
from .._text import clean
from .._tools.registry import ToolRegistry
from .._view.continuation import resume_command
from .._view.lineage import pending_approvals
from ..demo import DEMO_TASK, demo_model, demo_registry
from ..messages import McpRef, Model
from ..prices import Price
from ..progress import ProgressRecorder
from ..recorder import Recorder
from ..store import RunStore, StoredRun
from .costs import PRICES, check_priced, max_cost_option, run_cost
from .options import EXIT_INTERRUPTED, EXIT_NO, CliUsageError, Env, common, label_option
from .render import console, plural, print_json
from .specs import (
    MODEL_HELP,
    build_model,
    configured_endpoint,
    continuing_model,
    model_options,
    spans_command,
    tracer_provider,
)
from .timeline import status_style
from .tooling import ToolsGiven, check, mcp_options, tools_for

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

DEFAULTS: Final = Limits()
MAX_TIMEOUT_S = 365 * 86400.0  # a year; far beyond it, waiting overflows the platform's timers


def not_nan(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds", ctx, param)
    return value


QUIET = click.option("--quiet", "-q", is_flag=True,
                     help="No progress lines (one per model call and tool call) on stderr.")
RECORD_CONTENT = click.option("--record-content", is_flag=True,
                              help="Put messages, tool arguments and results on the live spans (off: none of that "
                                   "text leaves the store).")
PARALLEL_HELP = "Run at most N of a reply's tool calls at once (1: one by one, in the reply's order)."
PARALLEL = click.option("--max-parallel-tools", type=click.IntRange(min=1), metavar="N",
                        help=f"{PARALLEL_HELP}  [default: {DEFAULTS.max_parallel_tools}]")


def progress(quiet: bool) -> Recorder | None:
    """The progress printer of ``runner run``/``demo`` (stderr), unless ``--quiet``."""
    return None if quiet else ProgressRecorder()


def record(env: Env, store: RunStore, task: str, model: Model, registry: ToolRegistry, labels: dict[str, str], *,
           system: str = DEFAULT_SYSTEM, limits: Limits | None = None, recorder: Recorder | None = None,
           record_content: bool = False, tools_ref: str | None = None,
           prices: dict[str, Price] | None = None, mcp_servers: Sequence[McpRef] | None = None) -> AgentResult:
    """``run_agent`` recorded in ``store`` and traced (see ``traced``); ``limits`` None: the defaults.

    The run id is chosen here, so that a Ctrl-C can still say which run it stopped.
    """
    run_id = uuid.uuid4().hex

    def go(provider: TracerProvider) -> AgentResult:
        return run_agent(task, model, registry, system, store=store, run_id=run_id, tracer_provider=provider,
                         labels=labels, limits=limits, recorder=recorder, record_content=record_content,
                         tools_ref=tools_ref, prices=prices, mcp_servers=mcp_servers)

    return traced(env, store, go, lambda: run_id)


def traced(env: Env, store: RunStore, go: Callable[[TracerProvider], AgentResult],
           run_id: Callable[[], str | None]) -> AgentResult:
    """``go`` (a run, resume, fork or follow-up) traced, flushing the spans before returning.

    A Ctrl-C (which the loop answers by closing the run as ``cancelled`` and re-raising)
    says which run it stopped: ``run_id`` names it, or None when none was recorded.
    """
    provider, flush = tracer_provider(env.hint())
    try:
        return go(provider)
    except KeyboardInterrupt:
        interrupted(env, store, run_id())
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    finally:
        flush()


def interrupted(env: Env, store: RunStore, run_id: str | None) -> None:
    """After Ctrl-C: the run's id and the status the log closed it with, and how to look at it."""
    from ..errors import StoreError

    try:
        if run_id is None:
            raise StoreError("no run recorded")
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
    assert run_id is not None
    out.print(Text(f"  runner show {store.short_ids([run_id])[run_id]}{env.hint()}"))


def report(env: Env, store: RunStore, result: AgentResult, extra_next: list[str], *, tools_spec: str | None = None,
           parent_run_id: str | None = None, lead: str | None = None, mcp: Sequence[McpRef] = ()) -> None:
    """The answer (or the stop), the run id, and the commands to try next.

    A run that stopped short names the ``runner resume`` command that continues it
    (``tools_spec`` and the ``mcp`` servers in it); one awaiting approval lists the calls it waits on.
    """
    run = store.get_run(result.run_id)
    pending = list(pending_approvals(run)) if result.status == Status.AWAITING_APPROVAL else []
    if env.as_json:
        print_json({"run_id": result.run_id, "status": result.status, "answer": result.answer,
                    "error": result.error, "steps": result.steps, "tokens": result.tokens,
                    "tool_calls": result.tool_calls, "cost_usd": run.cost_usd, "cost_known_usd": run.cost_known_usd,
                    "costs_unknown": run.costs_unknown, "parent_run_id": parent_run_id, "awaiting_approval": pending})
        return
    out = console()
    if result.status == Status.DONE:
        out.print(Text(clean(result.answer or "")))
    else:
        out.print(Text(f"stopped: {result.status}: {clean(result.error or '')}", style="bold red"))
    short = store.short_ids([result.run_id])[result.run_id]
    out.print(Text(f"\nrun id: {result.run_id}", style="bold"))
    refused = store.refused_calls([result.run_id])[result.run_id]
    calls = plural(result.tool_calls, "tool call") + (f" (+{refused} refused)" if refused else "")
    cost = run_cost(run)
    out.print(Text(f"status {result.status}, {plural(result.steps, 'step')}, {calls}, "
                   f"{plural(result.tokens, 'token')}" + (f", {cost}" if cost else ""),
                   style=status_style(result.status)))
    if lead:
        out.print(Text(clean(lead), style="dim"))
    first = []
    if (tools_spec is not None or mcp) and result.status != Status.DONE:
        first.append(resume_command(short, tools_spec, pending, env.hint(), mcp))
        if pending:  # the other answer, for the first call
            refuse = resume_command(short, tools_spec, (), "", mcp)
            first.append(f"{refuse} --deny {shlex.quote(pending[0])} --reason TEXT{env.hint()}")
    _next(out, env, short, first, extra_next)


def _next(out: Console, env: Env, short: str, first: list[str], extra: list[str]) -> None:
    db = env.hint()
    commands = [*first, f"runner show {short}{db}", f"runner runs{db}", f"runner stats{db}", f"runner ui{db}",
                f"runner export {short} -o tests/fixtures/run.json{db}", *extra,
                spans_command(short, db, configured_endpoint())]
    out.print(Text("\nnext, try:", style="bold"))
    for command in dict.fromkeys(commands):
        out.print(Text(f"  {clean(command)}"))


@click.command()
@click.option("--model", "model_spec", default="scripted", show_default=True, metavar="SPEC",
              help=f"'scripted' (the bundled replies), {MODEL_HELP}.")
@model_options
@max_cost_option("Stop (cost_limit, resumable) once the model calls cost this much, in USD.")
@PRICES
@PARALLEL
@QUIET
@RECORD_CONTENT
@common
def demo(env: Env, model_spec: str, base_url: str | None, api_key: str | None, max_cost_usd: float | None,
         prices: dict[str, Price] | None, max_parallel_tools: int | None, quiet: bool, record_content: bool) -> None:
    """Run the bundled example: an 18% tip on a EUR 127.50 bill split 4 ways, in USD.

    Two safe tools (arithmetic on an AST walk, never eval; currency over a fixed,
    labelled rate table); recorded in the store and traced (OTLP when
    OTEL_EXPORTER_OTLP_ENDPOINT is set).
    """
    model = demo_model() if model_spec == "scripted" else build_model(model_spec, base_url, api_key)
    check_priced(model, prices, max_cost_usd, given=True)
    with env.store(create=True) as store:
        result = record(env, store, DEMO_TASK, model, demo_registry(), {"example": "demo"}, recorder=progress(quiet),
                        record_content=record_content, tools_ref="runner.demo:demo_registry",
                        limits=GivenLimits(max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools).limits(),
                        prices=prices)
        replay = "runner replay tests/fixtures/run.json --tools runner.demo:demo_registry"
        report(env, store, result, [replay], tools_spec="runner.demo:demo_registry")
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


@click.command()
@click.argument("task")
@click.option("--tools", "tools_spec", metavar="MODULE:ATTR",
              help="Your tools: a ToolRegistry, or a function returning one (or MCP servers' tools: --mcp).")
@mcp_options
@click.option("--model", "model_spec", metavar="SPEC",
              help=f"Required: {MODEL_HELP}. A follow-up defaults to its parent's.")
@model_options
@click.option("--follow-up", "parent_ref", metavar="RUN",
              help="Continue finished run RUN's conversation: TASK is the next user message (a new, linked run).")
@click.option("--system", default=None, help="The system prompt (a follow-up keeps its parent's).")
@click.option("--max-steps", type=click.IntRange(min=1), help=f"Model calls at most.  [default: {DEFAULTS.max_steps}]")
@click.option("--token-budget", type=click.IntRange(min=1),
              help=f"Tokens (prompt + reply, estimated or reported) at most.  [default: {DEFAULTS.token_budget}]")
@click.option("--max-tool-calls", type=click.IntRange(min=0), help="Tool calls at most.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
              callback=not_nan, metavar="SECONDS", help="Wall-clock limit for the whole run (at most a year).")
@max_cost_option("USD the model calls may cost; the run stops cost_limit (resumable) once they reach it.")
@PRICES
@label_option("Label the run (repeatable), for `runner runs --label`.")
@PARALLEL
@QUIET
@RECORD_CONTENT
@common
def run(env: Env, task: str, tools_spec: str | None, mcp_commands: tuple[str, ...], mcp_urls: tuple[str, ...],
        model_spec: str | None, base_url: str | None, api_key: str | None, parent_ref: str | None,
        system: str | None, max_steps: int | None, token_budget: int | None, max_tool_calls: int | None,
        timeout_s: float | None, max_cost_usd: float | None, prices: dict[str, Price] | None,
        labels: dict[str, str], max_parallel_tools: int | None, quiet: bool, record_content: bool) -> None:
    """Run TASK with your tools and a real model, recorded and traced; exit 1 unless it ends done.

    The tools come from --tools, from MCP servers (--mcp, --mcp-url), or both.
    With --follow-up RUN, TASK is the next user message of RUN's conversation: a new
    run linked to RUN, starting from its messages. Limits not given keep RUN's.
    """
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools)
    given = GivenLimits(max_steps, token_budget, max_tool_calls, timeout_s, max_cost_usd, max_parallel_tools)
    if parent_ref is not None:
        follow(env, parent_ref, task, tools, model_spec, base_url, api_key, system, given, labels,
               progress(quiet), record_content, prices)
        return
    if model_spec is None:
        raise CliUsageError(f"runner run needs --model ({MODEL_HELP}); a scripted model cannot answer a new task")
    if model_spec == "scripted":
        raise CliUsageError("a scripted model cannot answer a new task: use --model with " + MODEL_HELP)
    model = build_model(model_spec, base_url, api_key)
    check_priced(model, prices, max_cost_usd, given=True)
    with tools_for(tools) as registry, env.store(create=True) as store:
        result = record(env, store, task, model, registry, labels, system=system or DEFAULT_SYSTEM,
                        limits=given.limits(), recorder=progress(quiet), record_content=record_content,
                        tools_ref=tools_spec, prices=prices, mcp_servers=tools.refs())
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools_spec, mcp=tools.refs())
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


@dataclass(frozen=True, slots=True)
class GivenLimits:
    """The limits given on the command line; None keeps the stored run's."""

    max_steps: int | None = None
    token_budget: int | None = None
    max_tool_calls: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None
    max_parallel_tools: int | None = None

    def options(self) -> dict[str, Any]:
        """The limits given, as keyword arguments for ``resume``, ``fork`` and ``follow_up``."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    def limits(self) -> Limits:
        """The limits of a new run: those given, ``Limits``' defaults for the rest."""
        return Limits(**self.options())

    def budget(self, recorded: Mapping[str, Any]) -> tuple[float | None, bool]:
        """The cost budget a continued run goes on with, and whether it was given here (else ``recorded``)."""
        if self.max_cost_usd is not None:
            return self.max_cost_usd, True
        found = recorded.get("max_cost_usd")
        return (float(found), False) if isinstance(found, (int, float)) else (None, False)


def follow(env: Env, parent_ref: str, message: str, tools: ToolsGiven, model_spec: str | None,
           base_url: str | None, api_key: str | None, system: str | None, limits: GivenLimits,
           labels: dict[str, str], recorder: Recorder | None = None, record_content: bool = False,
           prices: dict[str, Price] | None = None) -> None:
    """``runner run --follow-up RUN MESSAGE``: a new run continuing RUN's conversation."""
    from .._loop.resume import follow_up

    if system is not None:
        raise CliUsageError("--system cannot change a follow-up's system prompt: it keeps its parent's")
    with tools_for(tools) as registry, env.store(create=True) as store:
        parent = store.find_run(parent_ref)
        model = continuing_model(model_spec, parent, base_url, api_key)
        check_priced(model, prices, *limits.budget(recorded_limits(parent)))
        known = {child.run_id for child in store.children(parent.run_id)}

        def go(provider: TracerProvider) -> AgentResult:
            return follow_up(store, parent.run_id, message, model, registry, tracer_provider=provider,
                             labels=labels or None, recorder=recorder, record_content=record_content,
                             tools_ref=tools.spec, mcp_servers=tools.refs(), prices=prices, **limits.options())

        result = traced(env, store, go, lambda: new_child(store, parent.run_id, known))
        short = store.short_ids([parent.run_id])[parent.run_id]
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools.spec, parent_run_id=parent.run_id, lead=f"follow-up of run {short}", mcp=tools.refs())
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


def recorded_limits(run: StoredRun) -> dict[str, Any]:
    """The limits ``run`` last went on with (its latest resume's, else its start's), as a continuation reads them."""
    return fold(run.facts, run.run_id).limits or run.limits


def new_child(store: RunStore, parent_run_id: str, known: set[str]) -> str | None:
    """The child of ``parent_run_id`` that is not in ``known`` (the one just started), if any."""
    fresh = [child.run_id for child in store.children(parent_run_id) if child.run_id not in known]
    return fresh[-1] if fresh else None
