"""How a stopped run goes on: in this process, back to its worker pool, or only as a command to paste.

``continuation`` is the one rule ``runner resume`` and the console follow. A pool run awaiting
approval goes back to its queue (its workers have its agent), unless the caller drives it here, and
so does one stopped on a limit or an error for a caller that logs it sent back (``run_requeued``);
a caller with the run's tools drives it here; any other caller can only print the ``runner resume``
command that goes on. The rest says how a run goes on: its tools and its model, as the log records them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import NamedTuple

from .._log.records import StoredRun
from .._log.state import fold
from .._log.statuses import REQUEUABLE, Status
from ..events import ModelCalled, RunQueued, RunResumed, RunStarted
from ..messages import McpRef
from ..store import DEFAULT_QUEUE

TOOLS_PLACEHOLDER = "MODULE:ATTR"  # for a run whose log does not say where its tools live
PRICES_PLACEHOLDER = "FILE"  # for a run priced by its caller from a file this process does not know
GIVEN_PRICES = "given"  # the price source of prices a caller gave (``prices.GIVEN``: a view imports no prices)
# What a logged ``tools_ref`` must look like to be printed in a command: the log may come
# from anywhere, and a user copies these commands into a shell.
TOOLS_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


class RunHere(NamedTuple):
    """The run goes on in this process; ``command`` goes on elsewhere, should this process not manage to."""

    command: str


class SendToPool(NamedTuple):
    """The run goes back to ``queue``, where a worker of its pool resumes it; ``command`` publishes it again."""

    queue: str
    command: str


class RecordOnly(NamedTuple):
    """Nothing here can go on with the run: ``command`` does, pasted where its tools are."""

    command: str


Continuation = RunHere | SendToPool | RecordOnly
# The option that raises each limit a run can stop on, and the limit it sets (none for the two with no option).
RAISES = {Status.STEP_LIMIT: ("--max-steps", "max_steps"), Status.TOKEN_BUDGET: ("--token-budget", "token_budget"),
          Status.COST_LIMIT: ("--max-cost-usd", "max_cost_usd"),
          Status.TOOL_BUDGET: ("--max-tool-calls", "max_tool_calls"), Status.DEADLINE: ("--timeout", "timeout_s"),
          Status.INVALID_OUTPUT: ("--max-output-retries", "max_output_retries")}


def continuation(run: StoredRun, *, here: bool, tools_given: bool, short: str, db_hint: str = "",
                 tools_ref: str | None = None, mcp: Sequence[McpRef] = (), requeues: bool = False,
                 max_steps: int | None = None) -> Continuation:
    """Where ``run`` goes on (see the module docstring).

    ``here``: the caller drives even a pool run itself (``--here``; a console with the pool's agents).
    ``tools_given``: the caller has the run's tools. ``tools_ref``/``mcp`` name them in the command
    (else the run's recorded ones); ``short`` and ``db_hint`` are the run id and ``--db`` as printed.
    ``requeues``: the caller logs a stopped pool run sent back (``RunStore.requeue``), so it may go back.
    ``max_steps``: the caller's own ``--max-steps`` for the command, in place of the one ``going_on`` suggests.
    """
    if pooled(run) and run.status == Status.AWAITING_APPROVAL and not here:
        return SendToPool(queue_of(run), resume_command(short, None))
    if pooled(run) and run.status in REQUEUABLE and requeues and not here and not tools_given:
        return SendToPool(queue_of(run), resume_command(short, None))
    more = going_on(run) if max_steps is None or run.status != Status.STEP_LIMIT else ""
    more += f" --max-steps {max_steps}" if max_steps is not None else ""
    if pooled(run):  # its workers have its tools: the command sends it back, or resumes it with --here --tools
        command = resume_command(short, None) + more + db_hint
    else:
        given = tools_ref is not None or bool(mcp)
        tools, servers = (tools_ref, list(mcp)) if given else (recorded_tools(run), recorded_mcp(run))
        command = resume_command(short, tools, (), more + db_hint, servers)
    return RunHere(command) if tools_given else RecordOnly(command)


def going_on(run: StoredRun, prices_file: str | None = None) -> str:
    """`` --max-steps N``, `` --max-cost-usd USD [--prices FILE]``...: what a resume of a run a limit stopped needs.

    A resume keeps the recorded limits and counts the whole run, so with them it stops again at once:
    the option sets the limit reached as large again as what the run used (or as the limit, if more).
    ``--prices`` comes back when the caller priced the run (``prices_file`` names the file, else a
    placeholder) or a call with usage had no price, but for a pool run, whose workers price it;
    a reply with no usage reported has no cost whatever the price. "" for a run no such limit stopped.
    """
    raised = larger_limit(run)
    if raised is None:
        return ""
    more = f" {RAISES[run.status][0]} {raised.shown}"
    if run.status == Status.COST_LIMIT and not pooled(run) and any(
            call.price_source == GIVEN_PRICES or _unpriced(call)
            for call in run.facts if isinstance(call, ModelCalled)):
        more += f" --prices {shlex.quote(prices_file) if prices_file else PRICES_PLACEHOLDER}"
    return more


class Raised(NamedTuple):
    """The limit a run stopped on, set as large again as what the run used (or as the limit, if more)."""

    name: str
    value: int | float

    @property
    def shown(self) -> str:
        """The value as an option takes it: ``12``, ``1.1``."""
        return str(self.value) if isinstance(self.value, int) else format(self.value, ".6g")


def larger_limit(run: StoredRun) -> Raised | None:
    """The limit that lets a resume of ``run`` go on, for a run a limit stopped (None otherwise, or with no limit)."""
    option = RAISES.get(run.status)
    if option is None:
        return None
    name = option[1]
    state = fold(run.facts, run.run_id)
    limit = _positive((state.limits or run.limits).get(name))
    if not limit and run.status != Status.INVALID_OUTPUT:  # max_output_retries=0 is a limit: no retry
        return None
    used = {Status.STEP_LIMIT: run.steps, Status.COST_LIMIT: run.cost_known_usd, Status.TOKEN_BUDGET: state.spent,
            Status.TOOL_BUDGET: state.tool_calls_run,
            Status.INVALID_OUTPUT: state.output_failures}.get(run.status, limit)
    larger = float(max(limit, used) + (limit or 1))
    return Raised(name, int(larger) if larger.is_integer() and name != "max_cost_usd" and name != "timeout_s"
                  else float(format(larger, ".6g")))


def _unpriced(call: ModelCalled) -> bool:
    """Whether a model call reported usage but has no cost: a price would have costed it."""
    return call.cost_usd is None and call.reply is not None and call.reply.usage is not None


def _positive(value: object) -> float:
    """``value`` as a limit, when it is a positive number; else 0 (no such limit)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return 0.0


def pooled(run: StoredRun) -> bool:
    """Whether ``run`` was submitted to a worker pool (``runner submit``): its log opens with ``run_queued``."""
    return any(isinstance(fact, RunQueued) for fact in run.facts)


def queue_of(run: StoredRun) -> str:
    """The queue a pool run was submitted to, from its ``run_queued`` (the default queue for a run not pooled)."""
    queued = next((fact for fact in run.facts if isinstance(fact, RunQueued)), None)
    return (queued.queue if queued is not None else None) or DEFAULT_QUEUE


def resume_command(short: str, tools: str | None, approve: Sequence[str] = (), db_hint: str = "",
                   mcp: Sequence[McpRef] = ()) -> str:
    """``runner resume SHORT --tools TOOLS [--mcp ...] [--approve ID]...``, quoted for a shell (None: no --tools)."""
    approvals = "".join(f" --approve {shlex.quote(call_id)}" for call_id in approve)
    return f"runner resume {shlex.quote(short)}{tools_args(tools, mcp)}{approvals}{db_hint}"


def tools_args(tools: str | None, mcp: Sequence[McpRef] = ()) -> str:
    """`` --tools TOOLS --mcp 'COMMAND ARGS' --mcp-url URL``: tools as options of a command (a leading space)."""
    words = [f" --tools {tools}"] if tools else []
    words += [f" --{'mcp' if ref['transport'] == 'stdio' else 'mcp-url'} {shlex.quote(ref['target'])}" for ref in mcp]
    return "".join(words)


def recorded_tools(run: StoredRun) -> str | None:
    """The ``module:attr`` the run's tools were loaded from, as logged at its start, or a placeholder.

    ``runner run``, ``demo``, ``fork`` and follow-ups log it; the placeholder is for the reader to fill in.
    None for a run whose tools all came from MCP servers (``recorded_mcp``).
    """
    for fact in run.facts:
        if isinstance(fact, RunStarted):
            ref = fact.tools_ref
            if ref is None and fact.mcp_servers:
                return None
            return ref if isinstance(ref, str) and TOOLS_REF.fullmatch(ref) else TOOLS_PLACEHOLDER
    return TOOLS_PLACEHOLDER


def recorded_mcp(run: StoredRun) -> list[McpRef]:
    """The MCP servers the run's tools came from (``--mcp``, ``--mcp-url``), as logged at its start."""
    started = next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)
    return list(started.mcp_servers or []) if started is not None else []


class ModelName(NamedTuple):
    """A model as the log records it: its name and its provider (None when the log says none)."""

    name: str
    provider: str | None


def last_model(run: StoredRun) -> ModelName:
    """The model ``run`` last ran with: the one it started with, or the latest resume's."""
    found = ModelName(run.model, run.provider)
    for fact in run.facts:
        if isinstance(fact, RunResumed) and fact.model:
            found = ModelName(fact.model, fact.provider)
    return found
