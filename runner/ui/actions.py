"""What the console does to runs: log decisions, go on with a run, resume, fork and cancel.

Every decision is an ``approval_decided`` fact before anything else happens, so any process
can continue the run. The console then continues it itself, in a background thread, when it
can build the run's model and tools the way ``runner resume`` would; it sends a pool run back
to its queue; or it says the decision is recorded and gives the command that goes on.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from .._log.decisions import Decision, decider, refusal
from .._log.records import LIVE, StoredRun
from .._log.state import fold
from .._log.statuses import Status
from .._run.children import undecided_below
from .._run.resume import fork as fork_run
from .._run.resume import resume_stored
from .._text import plural
from .._tools.registry import ToolRegistry
from .._view.continuation import (
    RunHere,
    SendToPool,
    continuation,
    larger_limit,
    last_model,
    pooled,
    resume_command,
)
from .._view.tree import root_of
from ..errors import ActionRefused, CannotResume, RunInUse
from ..events import Event, RunStarted
from ..messages import McpRef, Model
from ..pool.agents import Factory
from ..pool.queued import StoreCancel, request_cancel
from ..pool.submission import BROKER_ENV
from ..pool.take import take
from ..store import RunStore

log = logging.getLogger("runner.ui")

FORK_START_S = 10.0  # how long a fork request waits for the new run to start before answering
CONTINUED, PUBLISHED, RECORDED = "continued", "published", "recorded"


class Continued(NamedTuple):
    """How a run goes on after an action: ``continued`` here, ``published`` to its pool, or only ``recorded``."""

    how: str
    text: str
    command: str | None = None


class Started:
    """A recorder that tells when the run it records has its start committed, and that run's id (a fork's).

    It comes after the store's recorder, so by its ``sync`` after ``run_started`` the run is in the store.
    """

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.seen = threading.Event()

    def record(self, event: Event) -> None:
        """Note the run's id at its ``run_started``."""
        if isinstance(event, RunStarted) and self.run_id is None:
            self.run_id = event.run_id

    def sync(self) -> None:
        """The store has committed what came before: once that includes the start, say so."""
        if self.run_id is not None:
            self.seen.set()


class Actions:
    """The console's actions on one store.

    ``registry`` and a model (``model`` for every run, else ``model_for(run)``, else the run's recorded
    model from the SDK's environment variables) continue runs started by ``runner run``; ``agents``
    continue pool runs here; without them a pool run is published to ``broker``.
    """

    def __init__(self, store: RunStore, *, registry: ToolRegistry | None = None,
                 agents: Mapping[str, Factory] | None = None, model: Model | None = None,
                 model_for: Callable[[StoredRun], Model] | None = None, broker: str | None = None,
                 decided_by: str | None = None, tools_ref: str | None = None, db_hint: str = "",
                 mcp_servers: Sequence[McpRef] = ()) -> None:
        self.store, self.registry, self.agents = store, registry, agents
        self.model, self.model_for, self.broker = model, model_for, broker
        self.decider = decided_by if decided_by is not None else decider()
        self.tools_ref, self.db_hint, self.mcp_servers = tools_ref, db_hint, list(mcp_servers)
        self.threads: set[threading.Thread] = set()
        self.lock = threading.Lock()

    # -- decisions -----------------------------------------------------------

    def decide(self, run_id: str, decisions: Mapping[str, Decision], by: str | None = None) -> Continued:
        """Log each decision on a run awaiting approval, then go on with the run if none is left to make.

        ``by``: who decides, as logged (None: the console's ``decided_by``); the resume that follows is theirs too.
        """
        by = by if by is not None else self.decider
        run = self.store.get_run(run_id)
        if not decisions:
            raise ActionRefused("no decision given")
        if run.status == Status.DONE:
            raise ActionRefused(f"run {run.run_id} is done; it awaits no decision")
        refused = refusal(fold(run.facts, run.run_id), decisions)  # all before any is logged: a refusal logs none
        if refused is not None:
            raise ActionRefused(refused.text)
        run = self.store.decide_all(run, decisions, by)
        left = fold(run.facts, run.run_id).pending_approvals
        if left:
            return Continued(RECORDED, f"decision recorded; {plural(len(left), 'more call')} of this run "
                                               f"{'awaits' if len(left) == 1 else 'await'} a decision")
        return self.go_on(run, by=by)

    def go_on(self, run: StoredRun, max_steps: int | None = None, by: str | None = None) -> Continued:
        """Continue a stopped run: here when its model and tools can be built, else to its pool, else a command.

        ``by``: who resumes it here, as logged (None: the console's ``decided_by``). A sub-agent's child run its
        parent waits on goes on as its tree does: from its root, whose resume drives it.
        """
        child, run = run, root_of(self.store, run)
        if run.run_id != child.run_id:
            went = self.go_on(run, max_steps, by)
            return went._replace(text=f"{went.text} (from run {self.store.short_ids([run.run_id])[run.run_id]}, "
                                      "the root of its tree, whose resume drives it)")
        if run.status == Status.AWAITING_APPROVAL and not fold(run.facts, run.run_id).pending_approvals:
            below = undecided_below(self.store, run.run_id, fold(run.facts, run.run_id), False)
            if below is not None:  # it waits on its sub-agents: their calls are decided on their own runs
                raise ActionRefused(below)
        if run.status == Status.DONE:
            raise ActionRefused(f"run {run.run_id} is done; nothing to resume")
        if run.status == Status.RUNNING and run.liveness == LIVE:
            raise ActionRefused(f"run {run.run_id} is being driven by a live process ({run.owner})")
        short = self.store.short_ids([run.run_id])[run.run_id]
        agents = self.agents if pooled(run) and max_steps is None else None  # a pool run goes on with its agent
        tools_given = agents is not None or (self.registry is not None and not pooled(run))
        broker = bool(self.broker or _env_broker())
        how = continuation(run, here=agents is not None, tools_given=tools_given, short=short,
                           db_hint=self.db_hint, tools_ref=self.tools_ref, mcp=self.mcp_servers, max_steps=max_steps,
                           requeues=broker)
        match how:
            case SendToPool(queue, command) if broker and run.status != Status.AWAITING_APPROVAL:
                return self._requeue(run, queue, command, max_steps, by if by is not None else self.decider)
            case SendToPool(queue, command) if max_steps is None and broker:
                return self._publish(run, queue, command)
            case RunHere() if agents is not None:
                self._background(run.run_id, lambda: take(self.store, run.run_id, agents, by=by or self.decider))
                return Continued(CONTINUED, "decision recorded; the console continues the run with its agent")
            case RunHere(command):
                return self._resume_here(run, command, max_steps, by if by is not None else self.decider)
            case _ if pooled(run):
                return Continued(RECORDED, "decision recorded; this console has no agents or broker to go on with",
                                 resume_command(short, None) + self.db_hint)
            case _:
                return Continued(RECORDED, "recorded; this console was started without --tools, so it cannot run "
                                           "them", how.command)

    def _publish(self, run: StoredRun, queue: str, command: str,
                 done: str | None = None) -> Continued:
        """Send a pool run back to ``queue``, where a worker resumes it; ``done`` says so."""
        from ..pool.app import publish  # Celery loads with it: only a console with a broker pays for it

        broker = self.broker or _env_broker()
        assert broker is not None
        try:
            publish(broker, run.run_id, queue)
        except Exception as exc:
            return Continued(RECORDED, f"recorded, but the broker did not take the run "
                                       f"({type(exc).__name__}: {exc})", command)
        return Continued(PUBLISHED, done or f"decision recorded; sent back to queue {queue}, where a worker resumes it")

    def _requeue(self, run: StoredRun, queue: str, command: str, max_steps: int | None, by: str) -> Continued:
        """Send a pool run a limit or an error stopped back to ``queue``, under a limit that lets it go on.

        Logged first (``run_requeued``, by ``by``), as ``runner resume`` does: a worker takes a stopped run
        only when that fact follows its stop. ``max_steps`` given replaces the larger limit suggested.
        """
        raised = larger_limit(run)
        limits: dict[str, int | float] = {raised.name: raised.value} if raised is not None else {}
        if max_steps is not None:
            limits = {"max_steps": max_steps}
        try:
            self.store.requeue(run, limits, by)
        except (ValueError, CannotResume, RunInUse) as exc:
            raise ActionRefused(str(exc)) from None
        given = ", ".join(f"{name} {value}" for name, value in limits.items()) or "its limits"
        return self._publish(run, queue, command, f"sent back to queue {queue} with {given}, where a worker resumes it")

    def _resume_here(self, run: StoredRun, command: str, max_steps: int | None, by: str) -> Continued:
        """Resume ``run`` in a background thread with the console's tools and the run's model, logged as ``by``'s."""
        registry = self.registry
        assert registry is not None
        try:
            model = self.model if self.model is not None else (self.model_for or recorded_model)(run)
        except Exception as exc:
            return Continued(RECORDED, f"recorded; the console cannot build the run's model ({exc})", command)

        def go() -> None:
            resume_stored(self.store, run, model, registry, cancel=StoreCancel(self.store, run.run_id),
                          max_steps=max_steps, decided_by=by)

        self._background(run.run_id, go)
        return Continued(CONTINUED, "the console continues the run")

    # -- resume, fork, cancel ------------------------------------------------

    def resume(self, run_id: str, max_steps: int | None, by: str | None = None) -> Continued:
        """Go on with a stopped run, allowing it ``max_steps`` model calls in all (None: its own limit), as ``by``."""
        run = self.store.get_run(run_id)
        if max_steps is not None and max_steps <= run.steps:
            raise ActionRefused(f"max steps must be more than the {run.steps} the run has made")
        return self.go_on(run, max_steps, by)

    def fork(self, run_id: str, at_step: int, observations: Mapping[str, str]) -> str:
        """Start a fork of ``run_id`` at ``at_step`` in the background; the new run's id once it has started."""
        parent = self.store.get_run(run_id)
        if self.registry is None:
            raise ActionRefused("this console was started without --tools, so it cannot fork a run")
        try:
            model = self.model if self.model is not None else (self.model_for or recorded_model)(parent)
        except Exception as exc:
            raise ActionRefused(f"cannot build the run's model: {exc}") from None
        started, failed = Started(), []
        registry = self.registry

        def go() -> None:
            try:
                fork_run(self.store, parent.run_id, at_step=at_step, model=model, registry=registry,
                         observations=observations, recorder=started, tools_ref=self.tools_ref,
                         mcp_servers=self.mcp_servers)
            except Exception as exc:
                failed.append(exc)
                started.seen.set()
                raise

        self._background(parent.run_id, go)
        started.seen.wait(FORK_START_S)
        if failed:
            raise ActionRefused(f"the fork did not start: {failed[0]}")
        if started.run_id is None:
            raise ActionRefused(f"the fork did not start within {FORK_START_S:g} s")
        return started.run_id

    def cancel(self, run_id: str) -> str:
        """Ask for a queued or running run to stop; its status now (``cancelled`` for a queued one)."""
        return request_cancel(self.store, run_id, self.decider)

    # -- background runs -----------------------------------------------------

    def _background(self, run_id: str, work: Callable[[], object]) -> None:
        def body() -> None:
            try:
                work()
            except CannotResume as exc:  # another process took it first: nothing lost
                log.warning("run %s: %s", run_id, exc)
            except Exception:
                log.exception("run %s: continuing it failed", run_id)
            finally:
                with self.lock:
                    self.threads.discard(threading.current_thread())

        thread = threading.Thread(target=body, name=f"runner-ui-{run_id[:8]}", daemon=True)
        with self.lock:
            self.threads.add(thread)
        thread.start()

    def running(self) -> int:
        """How many runs the console is driving now."""
        with self.lock:
            return len(self.threads)

    def wait(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the runs the console drives; how many are still going."""
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(timeout_s)
        return self.running()


def recorded_model(run: StoredRun) -> Model:
    """The model ``run`` last ran with, built from the SDK's environment variables (its server and key)."""
    from .. import adapters

    name, provider = last_model(run)
    if provider == "openai":
        return adapters.openai_model(name)
    if provider == "anthropic":
        return adapters.anthropic_model(name)
    raise ActionRefused(f"run {run.run_id} ran with model {name!r}, which cannot be rebuilt from the log "
                      "(start the console with --model)")


def _env_broker() -> str | None:
    return os.environ.get(BROKER_ENV) or None
