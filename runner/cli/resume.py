"""``runner resume RUN`` and ``runner fork RUN --at STEP``: go on with a stored run, or branch it.

Both are thin layers over ``runner.resume`` and ``runner.fork``.
``--approve ID`` runs a call, ``--deny ID`` refuses it, and a ``--reason`` right after a ``--deny`` is its reason.
Click gathers each option's values apart, so ``ResumeCommand`` also keeps the order the options came in.
One read of the run, one check of the decisions, then ``continuation`` says where it goes on: here, or back
to its pool's queue (logged first: the decisions, or for a run stopped on a limit the limits, ``run_requeued``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import click

from .._log.decisions import Checked, check_decisions, decider, describe, refusal
from .._log.records import LIVE
from .._log.state import RunState, fold
from .._log.statuses import Status
from .._loop.results import AgentResult
from .._loop.sync import run_core
from .._run import approvals
from .._run.resume import forked_core, resumed_core
from .._text import clean, plural
from .._view.continuation import RecordOnly, SendToPool, continuation, pooled
from ..events import StepStarted
from ..pool.submission import BROKER_ENV, broker_url
from ..prices import Price
from ..store import RunStore, StoredRun
from . import trees
from .costs import check_priced
from .options import EXIT_NO, CliError, CliUsageError, Env, common, parse_pairs
from .render import print_json
from .runs import (
    QUIET,
    RECORD_CONTENT,
    GivenLimits,
    limit_options,
    new_child,
    progress,
    recorded_limits,
    report,
    traced,
)
from .specs import MODEL_HELP, continuing_model, load_tools, model_options
from .streamed import NO_STREAM, Shown, continue_options, drive
from .tooling import ToolsGiven, base_tools, check, mcp_options, tools_for

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

R = TypeVar("R")
ORDER = "runner.option_order"
Decisions = dict[str, bool | str]


class ResumeCommand(click.Command):
    """A command that also records the order its options came in (``ctx.meta[ORDER]``).

    The command line is parsed once more for it, with click's own parser (parsing
    runs no callbacks); what it finds is the same as the real parse.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        ctx.meta[ORDER] = [param.name for param in order]
        return super().parse_args(ctx, args)


def decisions_from(order: list[str], approve: tuple[str, ...], deny: tuple[str, ...],
                   reasons: tuple[str, ...]) -> Decisions:
    """``{call_id: True | False | reason}`` from the decision options in command-line order."""
    values = {"approve": iter(approve), "deny": iter(deny), "reason": iter(reasons)}
    decisions: Decisions = {}
    denied: str | None = None  # the call of the --deny just before, while it has no reason yet
    for name in order:
        if name not in values:
            continue
        value = next(values[name])
        if name == "reason":
            if denied is None:
                raise CliUsageError(f"--reason {value!r} must come right after the --deny it explains")
            if not value.strip():
                raise CliUsageError(f"--reason for {denied!r} is empty (a --deny alone refuses without one)")
            decisions[denied], denied = value, None
            continue
        if value in decisions:
            raise CliUsageError(f"call {value!r} is decided twice (one --approve or --deny per call)")
        decisions[value] = name == "approve"
        denied = value if name == "deny" else None
    return decisions


def check_resumable(run: StoredRun, short: str) -> None:
    """An error (exit 3) for a done run, or one a live process drives, before a model is set up.

    ``resume`` refuses both too, and settles a race for the run atomically; this says
    so before asking for a model the run may not name.
    """
    if run.status == Status.DONE:
        raise CliError(f"run {short} is done; nothing to resume (runner fork {short} --at STEP, or "
                       f"runner run --follow-up {short} MESSAGE, goes on from it)")
    if run.liveness == LIVE:
        raise CliError(f"run {short} is being driven by a live process ({run.owner}); it cannot be taken over")


def check_given(state: RunState, short: str, decisions: Decisions) -> None:
    """The decisions given, checked against the log before anything is set up or written.

    A usage error for a call the run does not wait on; an error (exit 3) for a call in doubt or a
    decision against a logged one (``decisions.refusal``), and for a run awaiting approval left
    with none to go on with.
    """
    refused = refusal(state, decisions, run=short)
    if refused is not None and refused.unknown:
        option = "--approve" if decisions[refused.call_id] is True else "--deny"
        raise CliUsageError(f"{option} {refused.call_id}: {refused.text}")
    if refused is not None:
        raise CliError(refused.text)
    undecided = approvals.undecided(short, state, decisions, asks=False)
    if undecided is not None:
        raise CliError(f"{undecided} (--approve or --deny decides)")


def send_back(env: Env, store: RunStore, run: StoredRun, short: str, state: RunState, decisions: Decisions, by: str,
              broker: str | None, queue: str) -> None:
    """Log a pool run's decisions (``RunStore.decide_all``) and publish the run to its queue.

    A worker resumes it with its agent's model and tools, so this process needs neither.
    """
    url = broker_url(broker)  # no broker: refused before anything is logged
    checked: Checked = check_decisions(short, state, decisions)  # checked above: which are new, which apply
    store.decide_all(run, decisions, by)
    from ..pool.app import publish  # Celery loads with it: only a pool run sent back pays for it

    try:
        publish(url, run.run_id, queue)
    except Exception as exc:
        raise CliError(f"run {short}: the decision is logged, but the broker did not take the run "
                       f"({type(exc).__name__}: {exc}); runner resume {short} publishes it again") from None
    if env.as_json:
        print_json({"run_id": run.run_id, "status": run.status, "decisions": checked.applied, "decided_by": by,
                    "queue": queue, "published": True})
        return
    what = (", ".join(f"{call_id} {describe(verdict)}" for call_id, verdict in checked.fresh.items())
            + f" by {by}") if checked.fresh else "its decisions are logged already"
    click.echo(clean(f"run {short}: {what}; sent back to queue {queue}, where a worker resumes it"))


def requeue(env: Env, store: RunStore, run: StoredRun, short: str, limits: GivenLimits, by: str, broker: str | None,
            queue: str) -> None:
    """Log a pool run stopped on a limit or an error as sent back with ``limits`` (``RunStore.requeue``), publish it.

    A worker resumes it with its agent and those limits, so this process needs neither its model nor its tools.
    """
    url = broker_url(broker)  # no broker: refused before anything is logged
    given = limits.options()
    try:
        store.requeue(run, given, by)
    except (TypeError, ValueError) as exc:
        raise CliUsageError(str(exc)) from None
    from ..pool.app import publish  # Celery loads with it: only a pool run sent back pays for it

    try:
        publish(url, run.run_id, queue)
    except Exception as exc:
        raise CliError(f"run {short}: the new limits are logged, but the broker did not take the run "
                       f"({type(exc).__name__}: {exc}); runner resume {short} publishes it again") from None
    if env.as_json:
        print_json({"run_id": run.run_id, "status": run.status, "limits": given, "requeued_by": by, "queue": queue,
                    "published": True})
        return
    raised = ", ".join(f"{name}={value!r}" for name, value in given.items())
    click.echo(clean(f"run {short} ({run.status})" + (f" goes on with {raised}" if raised else "")
                     + f": sent back to queue {queue} by {by}, where a worker resumes it"))


class Warned(logging.Handler):
    """Prints each warning of the ``runner.resume`` logger as one ``warning:`` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(clean(f"warning: {record.getMessage()}"), err=True)


@contextmanager
def warnings_printed() -> Iterator[None]:
    """While resuming: ``resume``'s warnings (a registry that differs from the log) on stderr, once each."""
    logger, handler = logging.getLogger(approvals.log.name), Warned(logging.WARNING)
    propagates, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagates


def tools_and_model(fn: Callable[..., R], *, pooled: bool = False) -> Callable[..., R]:
    """``--tools``, ``--mcp``, ``--mcp-url`` (one of them needed, but to send a pool run back), and the model."""
    fn = model_options(fn)
    fn = click.option("--model", "model_spec", metavar="SPEC",
                      help=f"{MODEL_HELP}; default: the model the run last ran with.")(fn)
    fn = mcp_options(fn)
    fn = click.option("--tools", "tools_spec", metavar="MODULE:ATTR",
                      help="The run's tools: a ToolRegistry, or a function returning one (and/or --mcp)"
                           + (" (not needed to send a pool run back to its workers)." if pooled else "."))(fn)
    return fn


def tools_unless_pooled(fn: Callable[..., R]) -> Callable[..., R]:
    """``tools_and_model`` with ``--tools`` optional: a pool run's decisions go back to its workers, who have them."""
    return tools_and_model(fn, pooled=True)


def finish(result: AgentResult) -> None:
    """Exit 1 unless the run ended done, as ``runner run`` does."""
    if result.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)


@click.command(cls=ResumeCommand)
@click.argument("run_ref", metavar="RUN")
@tools_unless_pooled
@limit_options
@click.option("--approve", multiple=True, metavar="CALL_ID", help="Run this call awaiting approval (repeatable).")
@click.option("--deny", multiple=True, metavar="CALL_ID", help="Refuse this call awaiting approval (repeatable).")
@click.option("--reason", multiple=True, metavar="TEXT",
              help="After a --deny: the reason the model reads for that refusal.")
@click.option("--by", "decided_by", metavar="NAME", help="Who resumes and decides, logged with the resume and each "
                                                         "decision (default: the OS user).")
@click.option("--here", is_flag=True, help="Resume a pool run in this process rather than send it back to its "
                                           "workers.")
@click.option("--broker", metavar="URL", envvar=BROKER_ENV, show_envvar=True,
              help="The pool's Celery broker, to send a pool run back to its queue.")
@QUIET
@NO_STREAM
@RECORD_CONTENT
@common
def resume(env: Env, run_ref: str, tools_spec: str | None, mcp_commands: tuple[str, ...], mcp_urls: tuple[str, ...],
           model_spec: str | None, base_url: str | None, api_key: str | None, max_steps: int | None,
           token_budget: int | None, max_tool_calls: int | None, timeout_s: float | None, max_cost_usd: float | None,
           prices: dict[str, Price] | None, max_parallel_tools: int | None, max_output_retries: int | None,
           approve: tuple[str, ...],
           deny: tuple[str, ...], reason: tuple[str, ...], decided_by: str | None, here: bool, broker: str | None,
           quiet: bool, no_stream: bool, record_content: bool) -> None:
    """Continue RUN where its log stops: after a limit, an error, a crash, or awaiting approval.

    The same run goes on, with the same id; calls that finished are not run again, and a call the process
    died inside runs again only if its tool had no side effects, has an idempotency key or is idempotent.
    Each decision is logged with who made it (--by). A sub-agent's child run its parent waits on gets its
    decisions, then its tree goes on from its root (--tools: the root's). A pool run awaiting approval, or
    stopped on a limit or an error, goes back to its queue (--here: resumes it here). Exit 3: done, live, no decision.

    \b
      runner resume 1f2e3d4c --tools myapp.tools:registry --max-steps 12
      runner resume 1f2e3d4c --tools myapp.tools:registry --approve call_1 --deny call_2 --reason "over limit"
      runner resume 1f2e3d4c --approve call_1 --by alice          # a pool run: back to its workers
      runner resume 1f2e3d4c --max-cost-usd 5                     # a pool run: back, with a larger budget
    """
    decisions = decisions_from(click.get_current_context().meta[ORDER], approve, deny, reason)
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools, None)
    base = load_tools(tools_spec) if tools_spec is not None else None
    limits = GivenLimits(max_steps=max_steps, token_budget=token_budget, max_tool_calls=max_tool_calls,
                         timeout_s=timeout_s, max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools,
                         max_output_retries=max_output_retries)
    by = decided_by if decided_by is not None else decider()
    with env.store(create=True) as store:
        run = store.find_run(run_ref)  # the one read before the run goes on: resumed_core takes it over as read
        short = store.short_ids([run.run_id])[run.run_id]
        check_resumable(run, short)
        state = fold(run.facts, run.run_id)
        run, short, state = trees.descended(store, run, short, state, decisions)  # a child's call given to its root
        check_given(state, short, decisions)
        # A sub-agent's child run its parent waits on: its decisions are logged on it, and its tree's root goes on.
        run, short, state, climb = trees.climbed(store, run, short, state, decisions)
        if climb is not None:
            check_resumable(run, short)
            decisions = {}
        match continuation(run, here=here, tools_given=tools.given, short=short, requeues=True):
            case SendToPool(queue) if run.status == Status.AWAITING_APPROVAL:
                trees.log_decisions(store, climb, by)
                trees.say_sent_back(climb, by, short, env.as_json)
                send_back(env, store, run, short, state, decisions, by, broker, queue)
                return
            case SendToPool(queue):
                requeue(env, store, run, short, limits, by, broker, queue)
                return
            case RecordOnly() if pooled(run) and run.status == Status.CANCELLED:
                raise CliError(f"run {short} is a pool run that ended {run.status}; only a run stopped on a limit "
                               "or an error goes back to its pool (--here --tools MODULE:ATTR resumes it in this "
                               "process)")
            case RecordOnly():
                raise CliUsageError("Missing option '--tools', '--mcp' or '--mcp-url' (a run not submitted to a "
                                    "pool, or --here).")
        model = continuing_model(model_spec, run, base_url, api_key)
        check_priced(model, prices, *limits.budget(recorded_limits(run, state)))
        shown = Shown(progress(quiet), stream=not no_stream, as_json=env.as_json)
        with tools_for(tools, base) as registry:
            trees.log_decisions(store, climb, by)  # all checked: a child's, then its root goes on

            def go(provider: TracerProvider) -> AgentResult:  # the decisions are logged with run_resumed, by --by
                core = resumed_core(store, run, model, registry, decisions=decisions, decided_by=by,
                                    tracer_provider=provider, listen=shown.listen, record_content=record_content,
                                    prices=prices, **limits.options(), **shown.options())
                return drive(shown, lambda: run_core(core))

            with warnings_printed():
                result = traced(env, store, go, lambda: run.run_id)
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools_spec, parent_run_id=run.parent_run_id, mcp=tools.refs(),
               lead=trees.lead(climb, by, short), streamed=shown.showed(result))
    finish(result)


def parse_observations(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--observation CALL_ID=TEXT`` (repeatable) as a dict; TEXT may hold ``=`` and be empty."""
    return parse_pairs(ctx, param, values, shape="CALL_ID=TEXT", once="call")


def model_calls(run: StoredRun) -> int:
    return max((f.step for f in run.facts if isinstance(f, StepStarted)), default=0)


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--at", "at_step", required=True, type=click.IntRange(min=1), metavar="STEP",
              help="Start from the messages RUN had before its STEP-th model call.")
@click.option("--observation", "observations", multiple=True, metavar="CALL_ID=TEXT", callback=parse_observations,
              help="Replace that call's tool result with TEXT, exactly (repeatable): a what-if.")
@tools_and_model
@limit_options
@QUIET
@NO_STREAM
@RECORD_CONTENT
@common
def fork(env: Env, run_ref: str, at_step: int, observations: dict[str, str], tools_spec: str | None,
         mcp_commands: tuple[str, ...], mcp_urls: tuple[str, ...], model_spec: str | None, base_url: str | None,
         api_key: str | None, max_steps: int | None, token_budget: int | None, max_tool_calls: int | None,
         timeout_s: float | None, max_cost_usd: float | None, prices: dict[str, Price] | None,
         max_parallel_tools: int | None, max_output_retries: int | None, quiet: bool, no_stream: bool,
         record_content: bool) -> None:
    """Branch RUN into a new, linked run from before its STEP-th model call; RUN is untouched.

    Steps before STEP are not run again. --observation swaps a tool result the new run
    starts from. Prints the new run's id and how it ended; exit 1 unless it ends done.

    \b
    runner fork 1f2e3d4c --at 2 --tools myapp.tools:registry --observation call_1='{"celsius": 35}'
    """
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools, "a fork")
    base = base_tools(tools)
    limits = GivenLimits(max_steps=max_steps, token_budget=token_budget, max_tool_calls=max_tool_calls,
                         timeout_s=timeout_s, max_cost_usd=max_cost_usd, max_parallel_tools=max_parallel_tools,
                         max_output_retries=max_output_retries)
    with env.store(create=True) as store:
        parent = store.find_run(run_ref)
        short = store.short_ids([parent.run_id])[parent.run_id]
        made = model_calls(parent)
        if at_step > made:
            raise CliUsageError(f"--at {at_step}: run {short} made {plural(made, 'model call')}"
                                + (f"; --at must be between 1 and {made}" if made else ", so there is nothing to fork"))
        model = continuing_model(model_spec, parent, base_url, api_key)
        check_priced(model, prices, *limits.budget(recorded_limits(parent)))
        known = {child.run_id for child in store.children(parent.run_id)}
        shown = Shown(progress(quiet), stream=not no_stream, as_json=env.as_json)
        with tools_for(tools, base) as registry:

            def go(provider: TracerProvider) -> AgentResult:
                max_steps, token_budget, options = continue_options(
                    {**limits.options(), **shown.options(), "tracer_provider": provider, "tools_ref": tools_spec,
                     "mcp_servers": tools.refs(), "record_content": record_content, "prices": prices})
                try:
                    core = forked_core(store, parent.run_id, at_step, model, registry, observations, max_steps,
                                       token_budget, options, shown.listen)
                except ValueError as exc:  # an --observation for a call with no result before that step
                    raise CliUsageError(f"--observation: {exc}") from None
                return drive(shown, lambda: run_core(core))

            result = traced(env, store, go, lambda: new_child(store, parent.run_id, known))
        report(env, store, result, [f"runner replay tests/fixtures/run.json{tools.args()}"],
               tools_spec=tools_spec, parent_run_id=parent.run_id, lead=f"fork of run {short} at step {at_step}",
               mcp=tools.refs(), streamed=shown.showed(result))
    finish(result)

