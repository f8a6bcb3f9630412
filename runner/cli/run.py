"""``runner demo`` and ``runner run TASK``: record (and trace) a run, then say what to try next."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._log.decisions import decider
from .._log.limits import Limits
from .._log.statuses import Status
from .._loop.core import DEFAULT_SYSTEM
from .._loop.results import AgentResult
from .._loop.sync import run_core
from .._run.build import NOT_GIVEN, build_core
from .._run.resume import followed_core
from .._tools.output import OutputSpec, output_by_ref
from .._tools.registry import ToolRegistry
from ..demo import DEMO_TASK, demo_model, demo_registry, demo_typed_model, planner_model
from ..messages import McpRef, Model
from ..prices import Price
from ..store import RunStore
from .costs import PRICES, check_priced, max_cost_option
from .options import EXIT_NO, CliUsageError, Env, checked_name, common, label_option
from .output import output_given, output_options
from .runs import (
    DEFAULTS,
    MAX_TIMEOUT_S,
    OUTPUT_RETRIES,
    PARALLEL,
    QUIET,
    RECORD_CONTENT,
    GivenLimits,
    new_child,
    not_nan,
    progress,
    recorded_limits,
    report,
    traced,
)
from .specs import MODEL_HELP, build_model, continuing_model, model_options
from .streamed import NO_STREAM, Shown, continue_options, drive
from .tooling import ToolsGiven, check, mcp_options, tools_for

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

TIP_SPLIT = "runner.demo:TipSplit"


def record(env: Env, store: RunStore, task: str, model: Model, registry: ToolRegistry, labels: dict[str, str], *,
           shown: Shown, system: str = DEFAULT_SYSTEM, limits: Limits | None = None, record_content: bool = False,
           tools_ref: str | None = None, prices: dict[str, Price] | None = None,
           mcp_servers: Sequence[McpRef] | None = None, decided_by: str | None = None,
           output: OutputSpec | None = None, agent_name: str | None = None) -> AgentResult:
    """A new run recorded in ``store`` and traced (see ``traced``), its replies printed by ``shown``.

    ``limits`` None: the defaults. The run id is chosen here, so that a Ctrl-C can still say which run it stopped.
    """
    run_id = uuid.uuid4().hex

    def go(provider: TracerProvider) -> AgentResult:
        core = build_core(task, model, registry, system, NOT_GIVEN, NOT_GIVEN, listen=shown.listen, store=store,
                          run_id=run_id, tracer_provider=provider, labels=labels, limits=limits,
                          record_content=record_content, tools_ref=tools_ref, prices=prices, mcp_servers=mcp_servers,
                          decided_by=decided_by, output_type=output, agent_name=agent_name, **shown.options())
        return drive(shown, lambda: run_core(core))

    return traced(env, store, go, lambda: run_id)


@click.command()
@click.option("--model", "model_spec", default="scripted", show_default=True, metavar="SPEC",
              help=f"'scripted' (the bundled replies), {MODEL_HELP}.")
@model_options
@max_cost_option("Stop (cost_limit, resumable) once the model calls cost this much, in USD.")
@PRICES
@click.option("--typed", is_flag=True, help="End with a typed result (runner.demo:TipSplit), printed as JSON.")
@click.option("--subagents", is_flag=True,
              help="A planner with two sub-agents: a researcher (the example's tools) and a mailer whose send_mail "
                   "waits for approval (scripted models; the mail stays on this machine).")
@click.option("--resume", "resume_ref", metavar="RUN",
              help="With --subagents: go on with the planner's run RUN, after the decisions given.")
@click.option("--approve", "approved", metavar="CALL_ID", multiple=True,
              help="With --resume: approve this call of a sub-agent's (repeatable).")
@click.option("--deny", "denied", metavar="CALL_ID", multiple=True,
              help="With --resume: refuse this call of a sub-agent's (repeatable).")
@PARALLEL
@QUIET
@NO_STREAM
@RECORD_CONTENT
@common
def demo(env: Env, model_spec: str, base_url: str | None, api_key: str | None, max_cost_usd: float | None,
         prices: dict[str, Price] | None, typed: bool, subagents: bool, resume_ref: str | None,
         approved: tuple[str, ...], denied: tuple[str, ...], max_parallel_tools: int | None, quiet: bool,
         no_stream: bool,
         record_content: bool) -> None:
    """Run the bundled example: an 18% tip on a EUR 127.50 bill split 4 ways, in USD.

    Two safe tools (arithmetic on an AST walk, never eval; currency over a fixed,
    labelled rate table); recorded in the store and traced (OTLP when
    OTEL_EXPORTER_OTLP_ENDPOINT is set). A real model that streams prints its text as it writes it.
    With --subagents a planner hands the sums to a researcher and the mail to a mailer, and
    stops (exit 0) while the mail waits.
    """
    if subagents or resume_ref or approved or denied:
        demo_tree(env, model_spec, max_cost_usd, prices, typed, subagents, resume_ref, approved, denied,
                  max_parallel_tools, quiet, record_content)
        return
    scripted = demo_typed_model() if typed else demo_model()
    model = scripted if model_spec == "scripted" else build_model(model_spec, base_url, api_key)
    check_priced(model, prices, max_cost_usd, given=True)
    shown = Shown(progress(quiet), stream=not no_stream, as_json=env.as_json)
    with env.store(create=True) as store:
        result = record(env, store, DEMO_TASK, model, demo_registry(), {"example": "demo"}, shown=shown,
                        record_content=record_content, tools_ref="runner.demo:demo_registry",
                        limits=GivenLimits(max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools).limits(),
                        prices=prices, output=output_by_ref(TIP_SPLIT) if typed else None)
        replay = "runner replay tests/fixtures/run.json --tools runner.demo:demo_registry"
        report(env, store, result, [replay], tools_spec="runner.demo:demo_registry", streamed=shown.showed(result))
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


def demo_tree(env: Env, model_spec: str, max_cost_usd: float | None, prices: dict[str, Price] | None, typed: bool,
              subagents: bool, resume_ref: str | None, approved: tuple[str, ...], denied: tuple[str, ...],
              max_parallel_tools: int | None, quiet: bool, record_content: bool) -> None:
    """``runner demo --subagents``: start the planner, or go on with one (``--resume``); exit 1 on any other end."""
    from . import demo_subagents

    if not subagents:
        raise CliUsageError("--resume, --approve and --deny go with --subagents")
    if model_spec != "scripted" or typed:
        raise CliUsageError("--subagents runs on the demo's scripted models: leave out --model and --typed")
    if (approved or denied) and resume_ref is None:
        raise CliUsageError("--approve and --deny decide on a run: give it with --resume RUN")
    if set(approved) & set(denied):
        raise CliUsageError(f"call {sorted(set(approved) & set(denied))[0]!r} is both approved and denied")
    with env.store(create=True) as store:
        if resume_ref is None:
            limits = GivenLimits(max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools).limits()
            check_priced(planner_model(), prices, max_cost_usd, given=True)
            result = demo_subagents.start(env, store, limits, progress(quiet), record_content)
        else:
            decisions = {**dict.fromkeys(approved, True), **dict.fromkeys(denied, False)}
            result = demo_subagents.go_on(env, store, resume_ref, decisions, progress(quiet), record_content)
        demo_subagents.show(env, store, result)
    if result.status != Status.DONE and (resume_ref is not None or result.status != Status.AWAITING_APPROVAL):
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
@output_options
@OUTPUT_RETRIES
@PARALLEL
@click.option("--by", "started_by", metavar="NAME", help="Who runs it, logged in run_started (default: the OS user).")
@click.option("--agent-name", metavar="NAME", callback=checked_name,
              help="Name the agent: logged in run_started, its root span is 'invoke_agent NAME' "
                   "(a follow-up keeps its parent's unless given).")
@QUIET
@NO_STREAM
@RECORD_CONTENT
@common
def run(env: Env, task: str, tools_spec: str | None, mcp_commands: tuple[str, ...], mcp_urls: tuple[str, ...],
        model_spec: str | None, base_url: str | None, api_key: str | None, parent_ref: str | None,
        system: str | None, max_steps: int | None, token_budget: int | None, max_tool_calls: int | None,
        timeout_s: float | None, max_cost_usd: float | None, prices: dict[str, Price] | None,
        labels: dict[str, str], output_schema_file: Path | None, output_type_ref: str | None,
        max_output_retries: int | None, max_parallel_tools: int | None, started_by: str | None,
        agent_name: str | None, quiet: bool, no_stream: bool, record_content: bool) -> None:
    """Run TASK with your tools and a real model, recorded and traced; exit 1 unless it ends done.

    The tools come from --tools, from MCP servers (--mcp, --mcp-url), or both.
    With --follow-up RUN, TASK is the next user message of RUN's conversation: a new
    run linked to RUN, starting from its messages. Limits not given keep RUN's.
    With --output-schema or --output-type the run ends with a typed result, printed as JSON.
    A model that streams prints its text on stdout as it writes it (--no-stream: the answer at the end).
    """
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools)
    output = output_given(output_schema_file, output_type_ref)
    given = GivenLimits(max_steps=max_steps, token_budget=token_budget, max_tool_calls=max_tool_calls,
                        timeout_s=timeout_s, max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools,
                        max_output_retries=max_output_retries)
    if started_by is not None and not started_by.strip():
        raise click.BadParameter("must name who runs it", param_hint="--by")
    by = started_by or decider()
    # A typed result is stdout's JSON, as --json's is: the text streams into the log alone.
    shown = Shown(progress(quiet), stream=not no_stream, as_json=env.as_json or output is not None)
    if parent_ref is not None:
        follow(env, parent_ref, task, tools, model_spec, base_url, api_key, system, given, labels, shown,
               record_content, prices, output, by, agent_name)
        return
    if model_spec is None:
        raise CliUsageError(f"runner run needs --model ({MODEL_HELP}); a scripted model cannot answer a new task")
    if model_spec == "scripted":
        raise CliUsageError("a scripted model cannot answer a new task: use --model with " + MODEL_HELP)
    model = build_model(model_spec, base_url, api_key)
    check_priced(model, prices, max_cost_usd, given=True)
    with tools_for(tools) as registry, env.store(create=True) as store:
        result = record(env, store, task, model, registry, labels, shown=shown, system=system or DEFAULT_SYSTEM,
                        limits=given.limits(), record_content=record_content, tools_ref=tools_spec, prices=prices,
                        mcp_servers=tools.refs(), output=output, decided_by=by, agent_name=agent_name)
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools_spec, mcp=tools.refs(), streamed=shown.showed(result))
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


def follow(env: Env, parent_ref: str, message: str, tools: ToolsGiven, model_spec: str | None,
           base_url: str | None, api_key: str | None, system: str | None, limits: GivenLimits,
           labels: dict[str, str], shown: Shown, record_content: bool = False,
           prices: dict[str, Price] | None = None, output: OutputSpec | None = None,
           by: str | None = None, agent_name: str | None = None) -> None:
    """``runner run --follow-up RUN MESSAGE``: a new run continuing RUN's conversation (and agent, unless named)."""
    if system is not None:
        raise CliUsageError("--system cannot change a follow-up's system prompt: it keeps its parent's")
    with tools_for(tools) as registry, env.store(create=True) as store:
        parent = store.find_run(parent_ref)
        model = continuing_model(model_spec, parent, base_url, api_key)
        check_priced(model, prices, *limits.budget(recorded_limits(parent)))
        known = {child.run_id for child in store.children(parent.run_id)}

        def go(provider: TracerProvider) -> AgentResult:
            max_steps, token_budget, options = continue_options(
                {**limits.options(), **shown.options(), "tracer_provider": provider, "labels": labels or None,
                 "record_content": record_content, "tools_ref": tools.spec, "mcp_servers": tools.refs(),
                 "prices": prices, "output_type": output, "decided_by": by, "agent_name": agent_name})
            core = followed_core(store, parent.run_id, message, model, registry, max_steps, token_budget, options,
                                 shown.listen)
            return drive(shown, lambda: run_core(core))

        result = traced(env, store, go, lambda: new_child(store, parent.run_id, known))
        short = store.short_ids([parent.run_id])[parent.run_id]
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools.spec, parent_run_id=parent.run_id, lead=f"follow-up of run {short}", mcp=tools.refs(),
               streamed=shown.showed(result))
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)
