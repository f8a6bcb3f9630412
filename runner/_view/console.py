"""What the console's pages show, as plain values read from the store: the runs, one run, the inbox.

The templates draw these; the handlers in ``ui/pages.py`` only read the request and answer.
A run's page shows its ``timeline`` (the entries ``runner show`` prints, its sub-agents' child runs nested
under their calls) and its lineage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from .._log.records import LIVE, RunSummary, StoredRun, logged_text
from .._log.state import fold
from .._log.statuses import Status
from .._tools.registry import ToolRegistry
from ..events import ApprovalRequested, RunResumed, RunStarted, StepStarted
from ..store import RunStore
from .activity import active_seconds
from .continuation import pooled
from .inherited import InheritedMessage, inherited_shown
from .lineage import Link, children, origin_text, parent_of, pending_approvals
from .listing import RunFilter, runs_page
from .partial import Partial, partial_reply
from .summary import Totals, money, seconds, when
from .timeline import ChildEntry, PartialEntry, Timeline, args_text, timeline
from .tree import children_in, nest, spent, waiting_below
from .waterfall import Waterfall, waterfall

MORE_COUNTED = 1000  # the awaiting-approval badge counts this far ("1000+")
INBOX_RUNS = 200  # runs awaiting approval the inbox reads at once
LIVE_STATUSES = frozenset({Status.RUNNING, Status.QUEUED})


def duration(run: RunSummary) -> str:
    """How long ``run`` took, as the CLI writes it ("-" while it has not finished)."""
    return seconds((run.finished_at - run.started_at).total_seconds() if run.finished_at else None)


@dataclass(frozen=True, slots=True)
class Row:
    """A run as the runs table shows it."""

    run: RunSummary
    short: str
    refused: int
    started: str
    duration: str
    cost: str


@dataclass(frozen=True, slots=True)
class RunsView:
    """The runs page: its rows, whether more match, how many runs await approval, whether any still goes."""

    rows: list[Row]
    more: bool
    awaiting: int
    live: bool


def runs_view(store: RunStore, where: RunFilter, limit: int, offset: int) -> RunsView:
    """The runs page for ``where``, ``limit`` runs from ``offset``."""
    page = runs_page(store, where, limit=limit, offset=offset, count_more=1)
    shorts = store.short_ids([run.run_id for run in page.runs])
    rows = [Row(run=run, short=shorts[run.run_id], refused=page.refused[run.run_id], started=when(run.started_at),
                duration=duration(run), cost=money(run.cost_known_usd, run.costs_unknown))
            for run in page.runs]
    awaiting = store.count_runs(status=Status.AWAITING_APPROVAL, at_most=MORE_COUNTED)
    return RunsView(rows=rows, more=page.more > 0, awaiting=awaiting,
                    live=any(run.status in LIVE_STATUSES for run in page.runs))


@dataclass(frozen=True, slots=True)
class Pending:
    """A call awaiting a decision, as the inbox shows it."""

    run: RunSummary
    short: str
    call: ApprovalRequested
    args: str


def inbox(store: RunStore) -> list[Pending]:
    """Every call awaiting a decision, in the runs awaiting approval, newest run first.

    A few statements however many runs wait: their rows on the status index, then their logs together.
    """
    waiting = store.list_runs(status=Status.AWAITING_APPROVAL, limit=INBOX_RUNS)
    ids = [run.run_id for run in waiting]
    shorts, logs = store.short_ids(ids), store.facts_of(ids)
    found = []
    for summary in waiting:
        facts = logs.get(summary.run_id)
        if facts is None:  # pruned since the list was read
            continue
        state = fold(facts, summary.run_id)
        if state.status != Status.AWAITING_APPROVAL:  # went on since the list was read
            continue
        run = replace(summary, **logged_text(facts))  # its text as logged, as ``get_run`` gives it
        for call in state.pending_approvals.values():
            found.append(Pending(run=run, short=shorts[run.run_id], call=call, args=args_text(call.args)))
    return found


@dataclass(frozen=True, slots=True)
class RunView:
    """A run's page: the run, its timeline, its lineage, the calls it waits on, and its figures as text."""

    run: StoredRun
    short: str
    timeline: Timeline
    links: list[Link]
    origins: dict[str, str]  # how each run on the page came about, by id
    pending: list[ApprovalRequested]
    steps_made: int
    duration: str
    active: str
    pooled: bool
    cost: str
    driver: str | None = None  # who last resumed it (``--by``), when its log says
    tree: Totals | None = None  # what it and its sub-agents' child runs spent, when it has any
    below: list[ChildEntry] = field(default_factory=list)  # the children under it waiting for decisions
    partial: Partial | None = None  # the reply its model is writing (or was, when cut off), not logged whole yet
    waterfall: Waterfall | None = None  # its steps and calls on a time axis, above the timeline

    @property
    def seq(self) -> int:
        """The last event the page was drawn from: a follower of the run's events goes on after it."""
        return self.run.events[-1].seq if self.run.events else 0

    @property
    def inherited(self) -> list[InheritedMessage]:
        """The inherited messages the page shows (``runner show`` shows the same)."""
        carried = self.timeline.inherited
        return inherited_shown(carried, self.run.task) if carried is not None else []

    @property
    def live(self) -> bool:
        """Whether the run still goes: queued, or running in a process that is alive."""
        run = self.run
        return run.status in LIVE_STATUSES and (run.status == Status.QUEUED or run.liveness == LIVE)


def run_view(store: RunStore, ref: str, registry: ToolRegistry | None = None) -> RunView:
    """The page of the run ``ref`` names; ``registry`` judges its calls in doubt as a resume from here would."""
    run = store.find_run(ref)
    state = fold(run.facts, run.run_id)
    links = children(store, run.run_id)
    started = state.started
    origins = {link.run_id: origin_text(link.origin, link.forked_at_step, link.call_id) for link in links}
    if started is not None:
        origins[run.run_id] = origin_text(started.origin, started.forked_at_step, started.parent_call_id)
    shown = nest(store, run, timeline(run, parent_of(store, run), state=state, registry=registry))
    partial = partial_reply(run)
    if partial is not None:  # the reply still being written (or cut off last) is drawn apart, where the page grows it
        shown = dataclasses.replace(shown, entries=[entry for entry in shown.entries
                                                    if not (isinstance(entry, PartialEntry)
                                                            and entry.step == partial.step)])
    return RunView(
        run=run, short=store.short_ids([run.run_id])[run.run_id], timeline=shown,
        tree=spent(run, shown) if children_in(shown) else None, below=list(waiting_below(shown)),
        links=links, origins=origins, pending=list(pending_approvals(run).values()),
        steps_made=max((f.step for f in run.facts if isinstance(f, StepStarted)), default=0),
        duration=duration(run), active=seconds(active_seconds(run.events, run.facts)), pooled=pooled(run),
        cost=money(run.cost_known_usd, run.costs_unknown), partial=partial,
        driver=next((f.by for f in reversed(run.facts) if isinstance(f, (RunResumed, RunStarted))), None),
        waterfall=waterfall(run, shown, now=datetime.now(UTC)))
