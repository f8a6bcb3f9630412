"""A rerun's report read back from the store: the candidates found by their ``rerun`` label, each case rebuilt.

Each candidate is labelled ``rerun=<id>``, ``rerun.case=<i>/<cases>`` and ``rerun.sample=<s>/<samples>``
and names its baseline (``parent_run_id``, origin ``rerun``): the cases, their order and their samples come
back as the rerun had them, and ``answered`` counts how calls were answered. The store does not hold the runs
given that were skipped, the rerun's own wall time (the candidates' span stands in), nor the baselines none
of whose candidates started (so ``left`` does not name them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from .._log.records import RunSummary
from .._log.statuses import UNSETTLED, Status
from .._view.lineage import RERUN
from .._view.summary import when
from ..errors import RunNotFound
from ..events import RunStarted
from .answered import answered
from .diff import figures
from .report import Case, RerunReport, make_case

if TYPE_CHECKING:
    from ..store import LabelValue, RunStore

K = TypeVar("K")
V = TypeVar("V")

CASE_LABEL = "rerun.case"  # a candidate's case, ``2/4``: the second of four baselines
SAMPLE_LABEL = "rerun.sample"  # and its sample, ``1/3``
MAX_CANDIDATES = 10_000  # candidates a report read from the store covers at most
LISTED = 5  # reruns the runs page lists, newest first
LISTED_CANDIDATES = 200  # a rerun with more is listed without its verdicts (its page has them)


def position(index: int, count: int) -> str:
    """``2/4`` for the index 1 of 4: a candidate's case or sample as its label says it."""
    return f"{index + 1}/{count}"


class Position(NamedTuple):
    """A case's or a sample's place (``at``, from 0) among how many there were (``of``)."""

    at: int
    of: int


def read_position(text: str | None) -> Position | None:
    """The ``Position`` a label says (``2/4``); None for none, or a value of another shape."""
    index, _, count = (text or "").partition("/")
    if not (index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
        return None
    found = Position(int(index) - 1, int(count))
    return found if 0 <= found.at < found.of else None


class Candidate(NamedTuple):
    """A candidate as listed: its summary and start, its case and sample as its labels say (None: a rerun's of old)."""

    run: RunSummary
    started: RunStarted
    case: Position | None
    sample: Position | None

    @property
    def in_case(self) -> tuple[int, datetime, str]:
        """Where its case goes: as its label says; for a rerun that did not label it, by its start."""
        return (self.case.at if self.case else 0, self.run.started_at, self.run.run_id)

    @property
    def in_sample(self) -> tuple[int, datetime, str]:
        """Where it goes among its case's samples, likewise."""
        return (self.sample.at if self.sample else 0, self.run.started_at, self.run.run_id)


class Kept(Generic[K, V]):
    """The last ``kept`` values made, by key, the least recently used dropped first; thread-safe.

    The console keeps the reruns' cases and lines of its runs page so, each by what it was made of as it
    stood (a case by its candidates' status and last change): a resumed candidate makes it again. A change
    to a baseline alone goes unseen there until then; the report page always reads the store afresh.
    """

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.found: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self.lock:
            value = self.found.get(key)
            if value is not None:
                self.found.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        with self.lock:
            self.found[key] = value
            self.found.move_to_end(key)
            while len(self.found) > self.kept:
                self.found.popitem(last=False)
        return value


Cases = Kept[tuple[object, ...], Case]


class Listed(NamedTuple):
    """A rerun as the runs page lists it: its report, or None when it has more candidates than a list reads."""

    rerun_id: str
    started: str
    candidates: int
    report: RerunReport | None


def recent(store: RunStore, cases: Cases, lines: Kept[LabelValue, Listed], limit: int = LISTED) -> list[Listed]:
    """The newest reruns, with their reports: their ids sort by when they started, so the label index has them first.

    A line is made again once its runs change (a new candidate, one that moved on), from ``cases`` kept;
    a rerun still going (whose process may die, changing nothing) each time.
    """
    from ..store import label_values  # here: ``import runner`` loads no SQLAlchemy (docs/architecture.md)

    listed = []
    for value in label_values(store, RERUN, limit=limit, at_most=LISTED_CANDIDATES + 1):
        line = lines.get(value)
        if line is None:
            found = candidates_of(store, value.value, LISTED_CANDIDATES + 1)
            report = stored_report(store, value.value, cases, found) if len(found) <= LISTED_CANDIDATES else None
            line = Listed(value.value, when(value.first_started_at), len(found), report)
            if report is None or report.interrupted or not report.left:  # a rerun still going is read each time
                lines.put(value, line)
        if line.candidates:  # none: a ``rerun`` label on runs no rerun started
            listed.append(line)
    return listed


def candidates_of(store: RunStore, rerun_id: str, at_most: int = MAX_CANDIDATES) -> list[Candidate]:
    """The candidates of rerun ``rerun_id``, at most ``at_most``: runs labelled with it that a rerun started.

    A fork or a follow-up of a candidate has its labels too; its origin tells it apart.
    """
    found = store.list_runs(label={RERUN: rerun_id}, limit=at_most)
    starts = store.run_starts([run.run_id for run in found])
    return [Candidate(run, starts[run.run_id], read_position(run.labels.get(CASE_LABEL)),
                      read_position(run.labels.get(SAMPLE_LABEL)))
            for run in sorted(found, key=lambda run: (run.started_at, run.run_id))
            if run.parent_run_id is not None and run.run_id in starts and starts[run.run_id].origin == RERUN]


def stored_report(store: RunStore, rerun_id: str, cases: Cases | None = None,
                  found: Sequence[Candidate] | None = None) -> RerunReport | None:
    """The report of rerun ``rerun_id`` as the store holds it now; None when it holds no candidate of it.

    A case whose candidates have not all ended (or one was cancelled, or some never started) is in
    ``left``; ``interrupted`` says the rerun stopped so, unless a candidate of it still runs.
    ``cases``: reuse the cases rebuilt before (see ``Cases``). ``found``: its candidates, read already.
    """
    found = candidates_of(store, rerun_id) if found is None else found
    if not found:
        return None
    groups: dict[str, list[Candidate]] = {}
    for candidate in sorted(found, key=lambda c: c.in_case):
        assert candidate.run.parent_run_id is not None
        groups.setdefault(candidate.run.parent_run_id, []).append(candidate)
    samples = next((c.sample.of for c in found if c.sample), max(len(group) for group in groups.values()))
    total = next((c.case.of for c in found if c.case), len(groups))
    made: list[Case] = []
    left: list[str] = []
    for baseline_id, group in groups.items():
        group.sort(key=lambda c: c.in_sample)
        case = _case(store, baseline_id, [c.run for c in group], cases) if _ended(group, samples) else None
        if case is None:
            left.append(baseline_id)
        else:
            made.append(case)
    runs = [c.run for c in found]
    going = any(run.status in UNSETTLED and not run.gone for run in runs)
    elapsed = max(run.finished_at or run.updated_at for run in runs) - min(run.started_at for run in runs)
    return RerunReport(rerun_id, found[0].started.model, found[0].started.provider, samples, tuple(made), tuple(left),
                       not going and (bool(left) or len(groups) < total), elapsed.total_seconds())


def _ended(group: Sequence[Candidate], samples: int) -> bool:
    """Whether every sample of a case ran to its end: none missing, running, or cancelled by the rerun's stop."""
    return len(group) >= samples and not any(c.run.status in UNSETTLED or c.run.status == Status.CANCELLED
                                             for c in group)


def _case(store: RunStore, baseline_id: str, runs: Sequence[RunSummary], cases: Cases | None) -> Case | None:
    """The case of ``baseline_id`` and its candidates ``runs``; None when the store no longer holds one of them."""
    key = (baseline_id, *((run.run_id, run.status, run.updated_at) for run in runs))
    case = cases.get(key) if cases is not None else None
    if case is not None:
        return case
    try:
        baseline = store.get_run(baseline_id)
        candidates = [store.get_run(run.run_id) for run in runs]
    except RunNotFound:  # pruned since it was listed
        return None
    started = next((fact for fact in baseline.facts if isinstance(fact, RunStarted)), None)
    if started is None:
        return None
    case = make_case(started.task, figures(baseline), [figures(run) for run in candidates],
                     answered(store, baseline, candidates))
    if cases is not None:
        cases.put(key, case)
    return case
