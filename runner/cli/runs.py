"""What the commands that drive a run share: the limit options, tracing, Ctrl-C, and the report after a run.

``runner run``, ``demo``, ``resume`` and ``fork`` import these from here, so that no command
module imports another (tests/test_architecture.py).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
from rich.console import Console
from rich.text import Text

from .._log.limits import Limits
from .._log.state import RunState, fold
from .._log.statuses import Status
from .._loop.results import AgentResult
from .._text import clean, plural
from .._view.continuation import RAISES, going_on, resume_command
from .._view.lineage import pending_approvals
from .._view.summary import money
from ..errors import StoreError
from ..messages import McpRef
from ..progress import ProgressRecorder
from ..recorder import Recorder
from ..store import RunStore, StoredRun
from .costs import PRICES, max_cost_option, prices_file
from .options import EXIT_INTERRUPTED, Env
from .output import shown_output
from .render import console, print_json, status_style
from .specs import configured_endpoint, spans_command, tracer_provider

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

R = TypeVar("R")
DEFAULTS: Final = Limits()
MAX_TIMEOUT_S = 365 * 86400.0  # a year; far beyond it, waiting overflows the platform's timers


def not_nan(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Refuse ``nan`` as a number of seconds."""
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


OUTPUT_RETRIES = click.option("--max-output-retries", type=click.IntRange(min=0), metavar="N",
                              help="Failed attempts at the typed result allowed, in the whole run; the next ends "
                                   "it invalid_output.")


def limit_options(fn: Callable[..., R]) -> Callable[..., R]:
    """``--max-steps``, ``--token-budget``, ``--max-tool-calls``, ``--timeout``, ``--max-cost-usd``, ``--prices``.

    And ``--max-parallel-tools``: the limits of a run that goes on (``resume``, ``fork``).
    Each limit keeps the run's when not given; ``--prices`` are for this process's model calls.
    """
    fn = click.option("--max-parallel-tools", type=click.IntRange(min=1), metavar="N",
                      help=f"{PARALLEL_HELP}  [default: the run's]")(fn)
    fn = OUTPUT_RETRIES(fn)
    fn = PRICES(fn)
    fn = max_cost_option("USD the model calls may cost, in the whole run.")(fn)
    fn = click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
                      callback=not_nan, metavar="SECONDS", help="Wall-clock limit from now on (at most a year).")(fn)
    fn = click.option("--max-tool-calls", type=click.IntRange(min=0), help="Tool calls at most, in the whole run.")(fn)
    fn = click.option("--token-budget", type=click.IntRange(min=1),
                      help="Tokens at most, in the whole run.")(fn)
    fn = click.option("--max-steps", type=click.IntRange(min=1), help="Model calls at most, in the whole run.")(fn)
    return fn


@dataclass(frozen=True, slots=True, kw_only=True)
class GivenLimits:
    """The limits given on the command line; None keeps the stored run's.

    Built by keyword only: six numbers of one type in a row are a swap waiting to happen.
    """

    max_steps: int | None = None
    token_budget: int | None = None
    max_tool_calls: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None
    max_parallel_tools: int | None = None
    max_output_retries: int | None = None

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


def recorded_limits(run: StoredRun, state: RunState | None = None) -> dict[str, Any]:
    """The limits ``run`` last went on with (its latest resume's, else its start's), as a continuation reads them.

    ``state``: the run's log already folded, when the caller has it.
    """
    return (state if state is not None else fold(run.facts, run.run_id)).limits or run.limits


def progress(quiet: bool) -> Recorder | None:
    """The progress printer of ``runner run``/``demo`` (stderr), unless ``--quiet``."""
    return None if quiet else ProgressRecorder()


def new_child(store: RunStore, parent_run_id: str, known: set[str]) -> str | None:
    """The child of ``parent_run_id`` that is not in ``known`` (the one just started), if any."""
    fresh = [child.run_id for child in store.children(parent_run_id) if child.run_id not in known]
    return fresh[-1] if fresh else None


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


def result_cost(result: AgentResult) -> str | None:
    """What the run cost, as the tables say it; None when none of its model calls was priced."""
    if not result.cost_known_usd:
        return None
    return money(result.cost_known_usd, result.cost_usd is None)


def report(env: Env, store: RunStore, result: AgentResult, extra_next: list[str], *, tools_spec: str | None = None,
           parent_run_id: str | None = None, lead: str | None = None, mcp: Sequence[McpRef] = (),
           shown: Sequence[Text] = (), first_next: Sequence[str] = (), more_json: Mapping[str, Any] | None = None,
           streamed: bool = False) -> None:
    """The answer (or the stop), the run id, and the commands to try next (``first_next`` first).

    A run that stopped short names the ``runner resume`` command that continues it (``tools_spec``,
    ``mcp``); one awaiting approval lists the calls it waits on. The run is read again only for what
    the result cannot say (the calls it awaits; for ``--json``, model calls of unknown cost). ``shown``
    goes before the commands (``--json``: ``more_json``'s keys join the object); ``streamed``: the
    answer was printed as the model wrote it, and is not printed again.
    """
    awaiting = result.status == Status.AWAITING_APPROVAL
    limited = result.status in RAISES  # its resume needs a larger limit
    run = store.get_run(result.run_id) if awaiting or limited or (env.as_json and result.cost_usd is None) else None
    pending = list(pending_approvals(run)) if run is not None and awaiting else []
    if env.as_json:
        print_json({"run_id": result.run_id, "status": result.status, "answer": result.answer,
                    "error": result.error, "steps": result.steps, "tokens": result.tokens,
                    "tool_calls": result.tool_calls, "cost_usd": result.cost_usd,
                    "cost_known_usd": result.cost_known_usd, "costs_unknown": run.costs_unknown if run else 0,
                    "parent_run_id": parent_run_id, "awaiting_approval": pending,
                    "output": json.loads(result.answer or "null") if result.output is not None else None,
                    **(more_json or {})})
        return
    out = console()
    if result.status == Status.DONE and result.output is not None:
        click.echo(shown_output(result.answer))
    elif result.status == Status.DONE:
        if not streamed:  # else it was printed as the model wrote it
            out.print(Text(clean(result.answer or "")))
    else:
        out.print(Text(f"stopped: {result.status}: {clean(result.error or '')}", style="bold red"))
    short = store.short_ids([result.run_id])[result.run_id]
    out.print(Text(f"\nrun id: {result.run_id}", style="bold"))
    refused = store.refused_calls([result.run_id])[result.run_id]
    calls = plural(result.tool_calls, "tool call") + (f" (+{refused} refused)" if refused else "")
    cost = result_cost(result)
    out.print(Text(f"status {result.status}, {plural(result.steps, 'step')}, {calls}, "
                   f"{plural(result.tokens, 'token')}" + (f", {cost}" if cost else ""),
                   style=status_style(result.status)))
    if lead:
        out.print(Text(clean(lead), style="dim"))
    for line in shown:
        out.print(line)
    first = list(first_next)
    if (tools_spec is not None or mcp) and result.status != Status.DONE:
        more = going_on(run, prices_file()) if run is not None and limited else ""
        first.append(resume_command(short, tools_spec, pending, more + env.hint(), mcp))
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
