"""``rerun``: start finished runs' work over on another model (or prompt), concurrently, and say what changed.

Each candidate is an ordinary stored run, linked to its baseline (``parent_run_id``, origin ``rerun``)
and labelled ``rerun=<rerun id>``. The candidates run on a pool of ``concurrency`` threads; Ctrl-C (or
``cancel``) stops them all, each closed ``cancelled``, and the report covers the cases that finished.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, NamedTuple

from .._log.records import StoredRun
from .._log.statuses import UNSETTLED, Status
from .._loop.drive import drive, ended
from .._loop.results import AgentResult
from .._loop.waits import Cancel
from .._run.build import NOT_GIVEN, build_core, costing
from .._run.identity import model_identity, new_run_id
from .._run.opening import Lineage
from .._tools.output import OutputSpec, output_from_log
from .._tools.registry import ToolRegistry
from .._view.lineage import RERUN
from ..events import RunStarted
from ..messages import Message, Model, ToolCall
from ..prices import Price, PriceBook, price_book
from .agents import every_agent, recorded_agents
from .diff import figures
from .recording import Baseline, read_baseline
from .report import NO_BASELINES, Case, RerunReport, make_case, skipped_note
from .stored import CASE_LABEL, SAMPLE_LABEL, position
from .tools import CandidateTools, RecordedTools, ToolCounts

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..store import RunStore

WAIT_S = 0.1  # how often the waiting thread looks at ``cancel``
MAX_SAMPLES = 1000  # candidates per baseline: more is a typo, not a measure of noise
Progress = Callable[[Case, int, int], None]


class Finished(NamedTuple):
    """A candidate that ran to its end: how it ended, and how its calls were answered."""

    result: AgentResult
    tools: ToolCounts


class Job(NamedTuple):
    """One candidate to run: the ``sample``-th of the ``case``-th baseline."""

    case: int
    sample: int


def rerun(store: RunStore, run_ids: Sequence[str], model: Model, *, registry: ToolRegistry | None = None,
          samples: int = 1, system: str | None = None, concurrency: int = 4, max_cost_usd: float | None = None,
          prices: PriceBook | Mapping[str, Price | Mapping[str, float]] | None = None, cancel: Cancel | None = None,
          progress: Progress | None = None, tracer_provider: TracerProvider | None = None) -> RerunReport:
    """Run each baseline's task again on ``model``, ``samples`` times, and report what changed.

    Each candidate gets the baseline's first messages (``system`` replaces its system prompt), its
    recorded tool specs and its limits (``max_cost_usd`` replaces its budget). A call the baseline made
    gets its recorded observation; another runs live only with ``registry`` and on a tool with no side
    effects and no approval; else the model reads that the call is not in the recording.

    Args:
        run_ids: the baselines: run ids or unique prefixes of runs that have ended. One not ended (running,
            queued, awaiting approval) is skipped with a ``UserWarning`` and named in the report's ``skipped``;
            with no baseline left, a ``UserWarning`` and an empty report.
        progress: called on this thread as each case finishes, with the case, how many have, and how many there are.
        cancel: an event (``threading.Event``) that stops the rerun as Ctrl-C does.
        tracer_provider, prices: as for ``run_agent``.

    Raises:
        ValueError: a run that never started, or bad ``samples``/``concurrency``. ``PriceUnknown``: a budget
            on a model with no price. ``RunNotFound``: no such run.
    """
    _check_counts(samples, concurrency)
    if isinstance(run_ids, str):
        raise TypeError("run_ids must be a list of run ids, not one string")
    found = {run.run_id: run for run in (store.find_run(ref) for ref in dict.fromkeys(run_ids))}  # a run once
    going = [(run.run_id, run.status) for run in found.values() if run.status in UNSETTLED]
    if going:
        warnings.warn(skipped_note(going), UserWarning, stacklevel=2)
    baselines = [read_baseline(run) for run in found.values() if run.status not in UNSETTLED]
    if not baselines:
        warnings.warn(NO_BASELINES, UserWarning, stacklevel=2)
    runs = Rerun(store, baselines, model, registry, samples, system, max_cost_usd, prices, tracer_provider)
    report = runs.go(concurrency, cancel, progress)
    return dataclasses.replace(report, skipped=tuple(run_id for run_id, _ in going))


def _check_counts(samples: int, concurrency: int) -> None:
    for name, value in (("samples", samples), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if samples > MAX_SAMPLES:
        raise ValueError(f"samples must be at most {MAX_SAMPLES}, got {samples}")


def new_rerun_id() -> str:
    """``r`` and the time in milliseconds (11 hex digits), then 4 random ones: newer reruns' ids sort higher.

    So the console reads the newest reruns from the label index in order; the ``r`` sorts them above the
    ids of older versions (12 random hex digits).
    """
    return f"r{time.time_ns() // 1_000_000:011x}{secrets.token_hex(2)}"


class Rerun:
    """One rerun under way: its baselines, what each candidate is started with, and the cases as they finish."""

    def __init__(self, store: RunStore, baselines: list[Baseline], model: Model, registry: ToolRegistry | None,
                 samples: int, system: str | None, max_cost_usd: float | None,
                 prices: PriceBook | Mapping[str, Price | Mapping[str, float]] | None,
                 tracer_provider: TracerProvider | None) -> None:
        self.store, self.baselines, self.model, self.registry = store, baselines, model, registry
        self.samples, self.system, self.tracer_provider = samples, system, tracer_provider
        self.prices = price_book(prices) if prices is not None else None
        agents = [recorded_agents(store, [b.run]) for b in baselines]  # their sub-agents: a rerun reruns the tree
        self.recorded = [RecordedTools(b.specs, b.traits, found, model, registry)  # read only: shared by the samples
                         for b, found in zip(baselines, agents, strict=True)]
        self.limits = [b.limits if max_cost_usd is None else dataclasses.replace(b.limits, max_cost_usd=max_cost_usd)
                       for b in baselines]
        for limits in [*self.limits, *(a.baseline.limits for found in agents for a in every_agent(found))]:
            costing(model, self.prices, limits)  # a budget that cannot be counted is refused before any candidate
        self.rerun_id = new_rerun_id()
        self.stop = threading.Event()
        self.finished: dict[int, dict[int, Finished]] = {i: {} for i in range(len(baselines))}
        self.cases: dict[int, Case] = {}

    def go(self, concurrency: int, cancel: Cancel | None, progress: Progress | None) -> RerunReport:
        """Run every candidate, ``concurrency`` at a time, until all finish or a stop; then report."""
        started = time.monotonic()
        interrupted = False
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"rerun-{self.rerun_id}")
        queue = (Job(i, s) for i in range(len(self.baselines)) for s in range(self.samples))
        jobs: dict[Future[Finished], Job] = {}
        pending: set[Future[Finished]] = set()
        done: set[Future[Finished]] = set()
        try:
            while True:
                for job in itertools.islice(queue, concurrency - len(pending)):  # a job made as a thread frees up
                    future = pool.submit(self.candidate, job)
                    jobs[future] = job
                    pending.add(future)
                for future in done:  # taken once the next candidates have started, so none waits on ``progress``
                    self.take(jobs[future], future.result(), progress)
                if not pending:
                    break
                if cancel is not None and cancel.is_set():
                    interrupted = True
                    break
                done, pending = wait(pending, timeout=WAIT_S, return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.stop.set()  # whatever is still running closes ``cancelled``; what has not started never starts
            pool.shutdown(wait=True, cancel_futures=True)
        if interrupted:  # what finished before the stop, should the interrupt have come before it was taken
            for future, job in jobs.items():
                if future.done() and not future.cancelled() and future.exception() is None \
                        and job.case not in self.cases:
                    self.take(job, future.result(), progress)
        return self.report(interrupted, time.monotonic() - started)

    def take(self, job: Job, finished: Finished, progress: Progress | None) -> None:
        """Note a finished candidate; once its case's samples have all finished, the case is made."""
        self.finished[job.case][job.sample] = finished
        results = self.finished[job.case]
        stopped = self.stop.is_set() and any(f.result.status == Status.CANCELLED for f in results.values())
        if job.case in self.cases or len(results) < self.samples or stopped:
            return
        ordered = [results[s] for s in range(self.samples)]
        candidates = [figures(self.store.get_run(f.result.run_id)) for f in ordered]
        baseline = self.baselines[job.case]
        case = make_case(baseline.task, figures(baseline.run), candidates, [f.tools for f in ordered])
        self.cases[job.case] = case
        if progress is not None:
            progress(case, len(self.cases), len(self.baselines))

    def candidate(self, job: Job) -> Finished:
        """Run one candidate to its end (on a pool thread)."""
        baseline = self.baselines[job.case]
        if self.stop.is_set():  # stopped while it waited for a thread: never started, never recorded
            raise Stopped
        system = self.system if self.system is not None else baseline.system
        tools = CandidateTools(baseline, self.registry)
        link = Lineage(baseline.run_id, RERUN, self.opening(baseline) or None)
        core = build_core(baseline.task, self.model, self.recorded[job.case], system, NOT_GIVEN, NOT_GIVEN, link=link,
                          run_id=new_run_id(), limits=self.limits[job.case], store=self.store,
                          labels=self.labels(job), cancel=self.stop, approve=approve_all,
                          tracer_provider=self.tracer_provider, prices=self.prices,
                          agent_name=baseline.run.agent_name, output_type=typed_as(baseline.run))
        return Finished(ended(drive(core, tools.perform_for(core))), tools.counts)

    def labels(self, job: Job) -> dict[str, str]:
        """A candidate's labels: the rerun's id, and which case and sample it is (``2/4``), to rebuild the report."""
        return {RERUN: self.rerun_id, CASE_LABEL: position(job.case, len(self.baselines)),
                SAMPLE_LABEL: position(job.sample, self.samples)}

    def opening(self, baseline: Baseline) -> list[Message]:
        """The baseline's first messages, with ``system`` in place of its system prompt when given."""
        if self.system is None:
            return list(baseline.opening)
        return [{"role": "system", "content": self.system} if m["role"] == "system" else m for m in baseline.opening]

    def report(self, interrupted: bool, elapsed_s: float) -> RerunReport:
        name, provider = model_identity(self.model)
        cases = tuple(self.cases[i] for i in sorted(self.cases))
        left = tuple(b.run_id for i, b in enumerate(self.baselines) if i not in self.cases)
        return RerunReport(self.rerun_id, name, provider, self.samples, cases, left, interrupted, elapsed_s)


class Stopped(Exception):
    """A candidate the stop came before: it never started."""


def typed_as(run: StoredRun) -> OutputSpec | None:
    """The typed result ``run`` was to end with (its schema as logged), for its candidates to end with too."""
    declared = next((fact.output_schema for fact in run.facts if isinstance(fact, RunStarted)), None)
    return output_from_log(declared) if declared is not None else None


def approve_all(call: ToolCall) -> bool:
    """The rerun's approver: every call goes on to its driver, which never runs a tool that needs approval."""
    return True

