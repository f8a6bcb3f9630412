"""The worker's task body: take a run by its id, then start it or resume it.

Celery delivers at least once, so every delivery decides from the store alone. A finished run (but
one sent back since, ``run_requeued``), an unknown one, or one live elsewhere, is dropped. A run with
no ``run_started`` has its start built (a wrong agent option leaves it queued), then is claimed by
compare-and-set; a started one is resumed under the in-doubt rules and the limits logged last, one
awaiting approval with the decisions logged. No Celery here, so tests drive it (docs/workers.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from .._log.limits import Limits, limit_names
from .._log.records import LIVE
from .._log.state import fold
from .._log.statuses import REQUEUABLE, Status
from .._loop.core import DEFAULT_SYSTEM, AgentCore
from .._loop.sync import run_core
from .._run.build import RunOptions, check_options, core_for, output_of, run_limits, wiring_of
from .._run.opening import new_run_opening
from .._run.resume import resume_stored
from .._text import plural
from ..errors import CannotResume, PriceUnknown, RunNotFound
from ..events import RunFinished, RunQueued, RunRequeued, RunResumed, RunStarted
from ..store import RunStore, StoredRun
from .agents import Agent, Factory, PoolError, build_agent
from .queued import StoreCancel

log = logging.getLogger("runner.pool")

# Factory options a resume takes (the rest, limits included, are the run's as logged: at its start,
# or since by a resume or a send-back with larger ones).
_RESUME_OPTIONS = ("approve", "recorder", "tracer_provider", "record_content", "prices")
_NOT_FROM_FACTORY = ("run_id", "store", "cancel")


def take(store: RunStore, run_id: str, agents: Mapping[str, Factory], *, cancel_poll_s: float = 0.5,
         by: str | None = None) -> str:
    """Drive run ``run_id`` to its end if it is this worker's to drive; what happened, in a few words.

    ``by``: who a resume is logged as (None: this process's OS user).
    """
    try:
        run = store.get_run(run_id)
    except RunNotFound as exc:
        return _dropped(run_id, str(exc))  # a store that cannot answer raises: the task fails, visibly
    if run.status not in (Status.QUEUED, Status.RUNNING, Status.AWAITING_APPROVAL) and not _sent_back(run):
        return _dropped(run_id, f"it has finished ({run.status})")
    if run.status == Status.RUNNING and run.liveness == LIVE:
        return _dropped(run_id, f"a live process drives it ({run.owner})")
    agent = build_agent(agents, run.agent_name)
    cancel = StoreCancel(store, run.run_id, cancel_poll_s)
    try:
        if any(isinstance(fact, RunStarted) for fact in run.facts):
            options = {k: v for k, v in agent.options.items() if k in _RESUME_OPTIONS}
            result = resume_stored(store, run, agent.model, agent.registry, cancel=cancel, decided_by=by, **options)
        else:
            core = _core_to_start(store, run, agent, cancel)  # before the claim: a mistake leaves it queued
            store.claim_run(run)
            result = run_core(core)
    except CannotResume as exc:  # live elsewhere (RunInUse), or awaiting a decision nobody has logged
        return _dropped(run_id, str(exc))
    log.info("run %s ended %s after %s", run.run_id, result.status, plural(result.steps, "step"))
    return result.status


def _core_to_start(store: RunStore, run: StoredRun, agent: Agent, cancel: StoreCancel) -> AgentCore:
    """``_start``, with a wrong option of the agent's as one ``PoolError``: the run stays queued.

    Wrong: a ``TypeError`` or ``ValueError``, or a cost budget its model has no price for (``PriceUnknown``).
    """
    try:
        return _start(store, run, agent, cancel)
    except (TypeError, ValueError, PriceUnknown) as exc:
        raise PoolError(f"agent {run.agent_name!r} cannot start run {run.run_id}: {exc}") from None


def _start(store: RunStore, run: StoredRun, agent: Agent, cancel: StoreCancel) -> AgentCore:
    """The core of a queued run's start: its agent's options, with the submitted limits and labels on top."""
    queued = next((fact for fact in run.facts if isinstance(fact, RunQueued)), None)
    factory = {k: v for k, v in agent.options.items() if k not in _NOT_FROM_FACTORY}
    system = factory.pop("system", DEFAULT_SYSTEM)
    if queued is not None and queued.output_type is not None:
        factory["output_type"] = queued.output_type  # the submitter's typed result, by reference
    labels = {**dict(factory.pop("labels", None) or {}), **(queued.labels if queued is not None else {})}
    # run_agent's parameters: the limit keywords, max_steps and token_budget among them
    given = {name: factory.pop(name) for name in limit_names() if name in factory}
    check_options(factory)
    options = cast(RunOptions, factory)  # its keys are run options (checked)
    agents = run_limits({}, options, given)
    limits = Limits(**{**agents.to_dict(), **(queued.limits if queued is not None else {})})
    task = queued.task if queued is not None else run.task
    spec = output_of(options, agent.registry)
    first = new_run_opening(run.run_id, task, system, limits, agent.registry, agent.model, run.agent_name, labels,
                            output=spec)
    wiring = replace(wiring_of(options, store), cancel=cancel)
    return core_for(agent.model, agent.registry, run.run_id, limits, first, fold(run.facts, run.run_id), wiring,
                    output_spec=spec)


def _sent_back(run: StoredRun) -> bool:
    """Whether ``run`` stopped on a limit or an error and was sent back to its pool since (its last stop)."""
    if run.status not in REQUEUABLE:
        return False
    for fact in reversed(run.facts):
        match fact:
            case RunRequeued():
                return True
            case RunFinished() | RunResumed():
                return False
            case _:
                pass
    return False


def _dropped(run_id: str, why: str) -> str:
    log.info("run %s: delivery dropped: %s", run_id, why)
    return "dropped"
