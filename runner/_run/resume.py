"""Resume a stored run, fork it, or follow it up: the ordinary loop, started from its log.

``resume`` takes the same run over, with the same id; the log continues after a ``run_resumed`` fact.
What happens to the calls of the interrupted reply is decided from the log alone.
``fork`` makes a new linked run from the parent's messages before a step, with observations swapped.
``follow_up`` makes a new linked run from a finished parent's messages plus a new user message.
``aresume``, ``afork``, ``afollow_up``: the same cores, driven as ``arun_agent`` (docs/durable-execution.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Unpack

from .._log.decisions import Decision, check_decisions, decided_facts, decider
from .._log.ids import derived_span_id, derived_trace_id, is_span_id, is_trace_id
from .._log.limits import Limits
from .._log.records import StoredRun
from .._log.state import fold
from .._log.statuses import UNFINISHED, Status
from .._loop.aio import arun_core
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._loop.sync import run_core
from .._text import plural
from .._tools.output import OutputSpec
from .._tools.registry import ToolRegistry
from ..errors import CannotResume, RunNotFound
from ..events import Event, MessageAppended, RunStarted, StepStarted
from ..messages import AsyncModel, Message, Model
from . import approvals, children
from .build import ContinueOptions, core_for, costing, output_of, run_limits, wiring_of
from .opening import linked_start, opening, resumed
from .wiring import RunWiring

if TYPE_CHECKING:
    from .._loop.stream import Listen
    from ..store import RunStore
    from ..tracing.live import TraceLink


def resume(store: RunStore, run_id: str, model: Model, registry: ToolRegistry, *,
           decisions: Mapping[str, Decision] | None = None,
           max_steps: int | None = None,
           token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> AgentResult:
    """Continue run ``run_id`` where its log stops, in this process.

    It works for a run stopped on any limit, on ``model_error``, ``invalid_reply`` or
    ``awaiting_approval``, and for a run whose process died.
    A tool whose traits differ from the log's record is logged as a ``runner.resume`` warning.

    Args:
        decisions: maps a pending call id to True, False or a denial reason.
            Each is logged as an ``approval_decided`` fact;
            decisions already in the log apply too.
        decided_by: who resumes, took ``decisions`` and owns ``approve``, as logged (default: the OS user).
        max_steps, token_budget: each limit given replaces the recorded one, and the others keep theirs.
            ``max_steps`` counts the whole run. ``limits=Limits(...)`` replaces them all;
            a limit given both ways is a ``TypeError``.
        **options: the ``ContinueOptions``.

    Raises:
        CannotResume: a ``done`` run, a run awaiting approval with no decision,
            or a decision against a logged one.
        RunInUse: a live process drives the run.
    """
    return run_core(resumed_core(store, store.get_run(run_id), model, registry, decisions=decisions,
                                 max_steps=max_steps, token_budget=token_budget, **options))


async def aresume(store: RunStore, run_id: str, model: Model | AsyncModel, registry: ToolRegistry, *,
                  decisions: Mapping[str, Decision] | None = None,
                  max_steps: int | None = None, token_budget: int | None = None,
                  **options: Unpack[ContinueOptions]) -> AgentResult:
    """``resume`` with a model and tools that may be coroutine functions, as ``arun_agent`` runs them.

    The store is read and the run claimed on the event loop's thread, as ``arun_agent`` opens its run.
    """
    return await arun_core(resumed_core(store, store.get_run(run_id), model, registry, decisions=decisions,
                                        max_steps=max_steps, token_budget=token_budget,
                                        **options))


def resume_stored(store: RunStore, run: StoredRun, model: Model, registry: ToolRegistry, *,
                  decisions: Mapping[str, Decision] | None = None,
                  max_steps: int | None = None,
                  token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> AgentResult:
    """``resume`` of a run already read from ``store`` (a pool's worker has it at hand).

    The takeover is a compare-and-set on the row as read: a run changed since is ``RunInUse``.
    """
    return run_core(resumed_core(store, run, model, registry, decisions=decisions,
                                 max_steps=max_steps, token_budget=token_budget, **options))


def resumed_core(store: RunStore, run: StoredRun, model: Model | AsyncModel, registry: ToolRegistry, *,
                 decisions: Mapping[str, Decision] | None = None,
                 max_steps: int | None = None, token_budget: int | None = None, child_of: RunWiring | None = None,
                 listen: Listen | None = None, **options: Unpack[ContinueOptions]) -> AgentCore:
    """The core that resumes ``run``, once checked and claimed: its decisions and ``run_resumed`` come first.

    ``child_of``: a sub-agent's child run resumed by its parent: the parent's cancel watch, the tree's depth
    and streaming, as its parent hands them down; ``listen`` hears each piece of a streamed reply.
    """
    if run.status == Status.DONE:
        raise CannotResume(f"run {run.run_id} is done; nothing to resume (fork it or follow it up instead)")
    state = fold(run.facts, run.run_id)
    if state.started is None:
        raise CannotResume(f"run {run.run_id} has not started ({run.status}); a worker of its pool starts it")
    given = dict(decisions or {})
    if given and state.status == Status.AWAITING_APPROVAL:  # a call its sub-agent waits on is decided on the child
        given = children.route_decisions(store, run.run_id, state, given, options.get("decided_by") or decider())
    checked = check_decisions(run.run_id, state, given)
    refusal = approvals.undecided(run.run_id, state, given, options.get("approve") is not None)
    if refusal is None and not given:
        refusal = children.undecided_below(store, run.run_id, state, options.get("approve") is not None)
    if refusal is not None:
        raise CannotResume(refusal)
    limits = _limits(state.limits or run.limits, max_steps, token_budget, options)
    approvals.report_drift(run.run_id, state, registry)
    spec = output_of(options, registry, state.output_schema)
    wiring = wiring_of(options, store, listen)
    # PriceUnknown before the takeover
    wiring = replace(wiring, costs=costing(model, wiring.prices, limits))
    if child_of is not None:
        wiring = replace(wiring, above=child_of.above, depth=child_of.depth, streaming=child_of.streaming)
    if run.status not in UNFINISHED:  # a request left from before it ended: it asked to stop that run, not this one
        store.clear_cancel(run.run_id)
    for fact in store.claim_run(run, after=run.events[-1].seq if run.events else 0):
        state.apply(fact)  # appended since the read (a call's late result): the log goes on after it
    reason = run.status if run.status != Status.RUNNING else f"its process is gone ({run.liveness})"
    by = options.get("decided_by") or decider()
    decided = decided_facts(state, checked.fresh, by) if checked.fresh else []
    taken = resumed(run.run_id, state.steps, store.owner_id(), reason, limits, checked.applied, registry, model, by,
                    spec if options.get("output_type") is not None else None)
    link = replace(_link_to(run, joins=True), before=run)  # what a dead part left unsent goes first
    return core_for(model, registry, run.run_id, limits, [*decided, taken], state, wiring, link, output_spec=spec)


def fork(store: RunStore, run_id: str, *, at_step: int, model: Model, registry: ToolRegistry,
         observations: Mapping[str, str] | None = None, max_steps: int | None = None,
         token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> AgentResult:
    """Start a new run from ``run_id``'s messages before its ``at_step``-th model call.

    ``observations`` replaces the content of those tool messages by call id, exactly.
    Steps before ``at_step`` are not run again; the new run's steps are numbered on from there.
    The parent is untouched; the new run records ``parent_run_id``.
    Limits are the parent's, with each one given replacing it, or all of them with ``limits=``.
    """
    return run_core(forked_core(store, run_id, at_step, model, registry, observations, max_steps, token_budget,
                                options))


async def afork(store: RunStore, run_id: str, *, at_step: int, model: Model | AsyncModel, registry: ToolRegistry,
                observations: Mapping[str, str] | None = None, max_steps: int | None = None,
                token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> AgentResult:
    """``fork`` with a model and tools that may be coroutine functions, as ``arun_agent`` runs them."""
    return await arun_core(forked_core(store, run_id, at_step, model, registry, observations, max_steps, token_budget,
                                       options))


def forked_core(store: RunStore, run_id: str, at_step: int, model: Model | AsyncModel, registry: ToolRegistry,
                observations: Mapping[str, str] | None, max_steps: int | None, token_budget: int | None,
                options: ContinueOptions, listen: Listen | None = None) -> AgentCore:
    """The core of a fork of ``run_id`` before step ``at_step`` (see ``fork``)."""
    parent = store.get_run(run_id)
    messages = _messages_before_step(parent.run_id, parent.facts, at_step)
    messages = _swap_observations(parent.run_id, messages, dict(observations or {}))
    state = fold(parent.facts)
    limits = _limits(state.limits or parent.limits, max_steps, token_budget, options)
    spec = output_of(options, registry, state.output_schema)  # a fork ends as its parent did, unless told
    started = _linked_start(store, parent, model, registry, limits, "fork", options, forked_at_step=at_step,
                            output=spec)
    return _linked_core(store, parent, started, messages, model, registry, limits, options, spec, listen)


def follow_up(store: RunStore, run_id: str, message: str, model: Model, registry: ToolRegistry, *,
              max_steps: int | None = None, token_budget: int | None = None,
              **options: Unpack[ContinueOptions]) -> AgentResult:
    """Start a new run that continues finished run ``run_id``'s conversation with ``message``.

    Limits are the parent's, with each one given replacing it, or all of them with ``limits=``.
    """
    return run_core(followed_core(store, run_id, message, model, registry, max_steps, token_budget, options))


async def afollow_up(store: RunStore, run_id: str, message: str, model: Model | AsyncModel, registry: ToolRegistry,
                     *, max_steps: int | None = None, token_budget: int | None = None,
                     **options: Unpack[ContinueOptions]) -> AgentResult:
    """``follow_up`` with a model and tools that may be coroutine functions, as ``arun_agent`` runs them."""
    return await arun_core(followed_core(store, run_id, message, model, registry, max_steps, token_budget, options))


def followed_core(store: RunStore, run_id: str, message: str, model: Model | AsyncModel, registry: ToolRegistry,
                  max_steps: int | None, token_budget: int | None, options: ContinueOptions,
                  listen: Listen | None = None) -> AgentCore:
    """The core of a follow-up of ``run_id`` with ``message`` (see ``follow_up``)."""
    parent = store.get_run(run_id)
    if parent.status == Status.RUNNING:
        raise CannotResume(f"run {parent.run_id} has not finished ({parent.liveness}); "
                           "a follow-up continues a finished run")
    state = fold(parent.facts, parent.run_id)
    if state.started is None:  # queued, or cancelled before a worker started it: no conversation to continue
        raise CannotResume(f"run {parent.run_id} never started ({parent.status}); there is no conversation "
                           "to follow up")
    if state.remaining_calls:
        raise CannotResume(f"run {parent.run_id} stopped with {plural(len(state.remaining_calls), 'call')} unanswered "
                           f"({parent.status}); resume it instead")
    if not isinstance(message, str) or not message:
        raise ValueError("a follow-up message must be a non-empty string")
    messages: list[Message] = [*state.messages, {"role": "user", "content": message}]
    limits = _limits(state.limits or parent.limits, max_steps, token_budget, options)
    spec = output_of(options, registry)  # a new question: typed only when output_type= is given again
    started = _linked_start(store, parent, model, registry, limits, "follow_up", options, task=message, output=spec)
    return _linked_core(store, parent, started, messages, model, registry, limits, options, spec, listen)


def _linked_core(store: RunStore, parent: StoredRun, started: RunStarted, messages: list[Message],
                 model: Model | AsyncModel, registry: ToolRegistry, limits: Limits,
                 options: ContinueOptions, spec: OutputSpec | None, listen: Listen | None = None) -> AgentCore:
    link = _link_to(parent, joins=False)
    return core_for(model, registry, started.run_id, limits, opening(started, messages), None,
                    wiring_of(options, store, listen), link, output_spec=spec)


def _linked_start(store: RunStore, parent: StoredRun, model: Model | AsyncModel, registry: ToolRegistry,
                  limits: Limits, origin: str, options: ContinueOptions, *, task: str | None = None,
                  forked_at_step: int | None = None, output: OutputSpec | None = None) -> RunStarted:
    return linked_start(parent, registry, model, limits, origin, session_id=session_of(store, parent),
                        agent_name=options.get("agent_name"), labels=options.get("labels"),
                        tools_ref=options.get("tools_ref"), mcp_servers=options.get("mcp_servers"), task=task,
                        forked_at_step=forked_at_step, by=options.get("decided_by") or decider(),
                        output=output)


def session_of(store: RunStore, parent: StoredRun) -> str:
    """The id of the first run of ``parent``'s conversation.

    A linked run logs it on its ``run_started``; a parent logged before that names
    only its own parent, so the chain is followed up to the run that has none (or,
    should an ancestor have been deleted, to the last one found).
    """
    run, seen = parent, {parent.run_id}
    while True:
        logged = next((fact.session_id for fact in run.facts if isinstance(fact, RunStarted)), None)
        if logged:
            return logged
        up = run.parent_run_id
        if up is None or up in seen:
            return run.run_id
        seen.add(up)
        try:
            run = store.get_run(up)
        except RunNotFound:
            return up


def _limits(recorded: Mapping[str, Any], max_steps: int | None, token_budget: int | None,
            options: ContinueOptions) -> Limits:
    """The recorded limits, with those given replacing theirs (None: not given)."""
    given = {"max_steps": max_steps, "token_budget": token_budget}
    return run_limits(recorded, options, {name: value for name, value in given.items() if value is not None})


def _link_to(run: StoredRun, *, joins: bool) -> TraceLink:
    """Where the spans of a run continued from ``run`` attach (``TraceLink``)."""
    from ..tracing.live import TraceLink  # lazily, as wiring builds the tracer: import runner loads no OpenTelemetry

    trace_id = run.trace_id if is_trace_id(run.trace_id) else derived_trace_id(run.run_id)
    return TraceLink(trace_id, _root_span_id(run), joins=joins)


def _root_span_id(run: StoredRun) -> str:
    """The span id of the run's first root span (its ``run_started`` event's; derived when it logged none valid)."""
    first = next((event for event, fact in zip(run.events, run.facts, strict=True)
                  if isinstance(fact, RunStarted)), None)  # a queued run's is 2nd
    return first.span_id if first is not None and is_span_id(first.span_id) else derived_span_id(run.run_id, "run")


def _messages_before_step(run_id: str, facts: Sequence[Event], at_step: int) -> list[Message]:
    if isinstance(at_step, int) and not isinstance(at_step, bool):
        messages: list[Message] = []
        for fact in facts:
            if isinstance(fact, StepStarted) and fact.step == at_step:
                return messages
            if isinstance(fact, MessageAppended):
                messages.append(fact.message)
    steps = sorted({f.step for f in facts if isinstance(f, StepStarted)})
    if not steps:
        raise ValueError(f"run {run_id} made no model call; there is no step to fork at (got at_step={at_step!r})")
    # A fork's own steps are numbered on from where it was forked, so they need not start at 1.
    raise ValueError(f"run {run_id} made {plural(len(steps), 'model call')}; at_step must be an integer between "
                     f"{steps[0]} and {steps[-1]}, got {at_step!r}")


def _swap_observations(run_id: str, messages: list[Message], observations: dict[str, str]) -> list[Message]:
    out: list[Message] = []
    left = dict(observations)
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    twice = sorted({call_id for call_id in left if answered.count(call_id) > 1})
    if twice:  # a log from before call ids were checked across runs: which result is meant is unclear
        raise ValueError(f"run {run_id} answers call id(s) {twice} more than once before that step; "
                         "cannot tell which result to swap")
    for message in messages:
        if message["role"] == "tool" and message["tool_call_id"] in left:
            content = left.pop(message["tool_call_id"])
            if not isinstance(content, str):
                raise ValueError(f"observation for {message['tool_call_id']!r} must be a string")
            message = {**message, "content": content}
        out.append(message)
    if left:
        raise ValueError(f"run {run_id} has no tool result for call(s) {sorted(left)} before that step")
    return out
