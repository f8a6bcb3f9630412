"""Retention: delete whole finished runs, one transaction per batch (``RunStore.prune``).

A run goes with every row keyed by it, and only with all its children (``parent_run_id``
is a foreign key). The append-only guard lets an event go only while its run is marked in
``run_deletions``, inside the batch's transaction. Each batch re-reads its runs under the
write lock, so a run resumed or forked since the plan is skipped, not half-deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import Connection, Engine, delete, func, insert, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .._log.statuses import STATUSES, Status
from ..errors import StoreError
from . import rollups
from .engine import one_line, shown
from .tables import events, run_cancels, run_deletions, run_labels, run_tools, runs

PRUNABLE: Final = tuple(status for status in STATUSES if status != Status.AWAITING_APPROVAL)
DEFAULT_BATCH: Final = 500


@dataclass(frozen=True, slots=True)
class PrunedRun:
    """A run that ``prune`` deleted (or, in a dry run, would delete)."""

    run_id: str
    status: Status
    started_at: datetime
    parent_run_id: str | None


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune deleted, or with ``dry_run`` would delete.

    ``kept_parents`` are the matching runs kept because a kept run descends from them.
    """

    runs: tuple[PrunedRun, ...]
    events: int
    kept_parents: tuple[str, ...]
    dry_run: bool


def prunable_statuses(status: str | Sequence[str] | None) -> tuple[str, ...]:
    """The statuses to prune: ``status`` (one or several) checked, else every finished one."""
    if status is None:
        return PRUNABLE
    chosen = (status,) if isinstance(status, str) else tuple(status)
    for one in chosen:
        if one not in PRUNABLE:
            raise ValueError(f"cannot prune {one!r} runs: only finished runs can be pruned "
                             f"({', '.join(PRUNABLE)})")
    return chosen


def plan(conn: Connection, before: datetime, statuses: tuple[str, ...]) -> tuple[list[PrunedRun], list[str]]:
    """The runs to delete, children before parents, and the matching parents kept."""
    matching = select(runs.c.run_id, runs.c.status, runs.c.started_at, runs.c.parent_run_id).where(
        runs.c.started_at < before, runs.c.status.in_(statuses))
    found = {row.run_id: PrunedRun(row.run_id, Status(row.status), row.started_at, row.parent_run_id)
             for row in conn.execute(matching.order_by(runs.c.started_at, runs.c.run_id))}
    ids = select(runs.c.run_id).where(runs.c.started_at < before, runs.c.status.in_(statuses))
    children = conn.execute(select(runs.c.run_id, runs.c.parent_run_id)
                            .where(runs.c.parent_run_id.in_(ids.scalar_subquery()))).all()
    deletable = _without_kept_parents(set(found), [(child, parent) for child, parent in children])
    kept = [run_id for run_id in found if run_id not in deletable]
    return _children_first([found[run_id] for run_id in found if run_id in deletable]), kept


def _without_kept_parents(ids: set[str], children: Iterable[tuple[str, str]]) -> set[str]:
    """``ids`` less every run with a child outside the set, until no such run is left."""
    pairs = list(children)
    left = set(ids)
    while True:
        blocked = {parent for child, parent in pairs if parent in left and child not in left}
        if not blocked:
            return left
        left -= blocked


def _children_first(found: list[PrunedRun]) -> list[PrunedRun]:
    """``found`` (oldest first) reordered so a run comes after all its pruned descendants."""
    by_id = {run.run_id: run for run in found}
    depth: dict[str, int] = {}

    def depth_of(run_id: str) -> int:
        if run_id not in depth:
            parent = by_id[run_id].parent_run_id
            depth[run_id] = 0 if parent not in by_id else depth_of(parent) + 1
        return depth[run_id]

    return sorted(found, key=lambda run: -depth_of(run.run_id))  # stable: oldest first within a depth


def delete_batch(engine: Engine, batch: list[PrunedRun], statuses: tuple[str, ...]) -> tuple[list[PrunedRun], int]:
    """Delete ``batch``'s runs that are still prunable, in one transaction; those deleted and their events."""
    wanted = {run.run_id: run for run in batch}
    with engine.begin() as conn:
        still = select(runs.c.run_id).where(runs.c.run_id.in_(wanted), runs.c.status.in_(statuses))
        if engine.dialect.name == "postgresql":
            still = still.with_for_update()
        ids = set(conn.execute(still).scalars())
        children = conn.execute(select(runs.c.run_id, runs.c.parent_run_id)
                                .where(runs.c.parent_run_id.in_(ids))).all() if ids else []
        ids = _without_kept_parents(ids, [(child, parent) for child, parent in children])
        if not ids:
            return [], 0
        # The runs' share of the stats' rollups goes with them (their ``status`` rows go with their rows).
        rollups.add(conn, rollups.scan(conn, select(runs.c.run_id).where(runs.c.run_id.in_(ids)), statuses=False),
                    sign=-1)
        conn.execute(insert(run_deletions), [{"run_id": run_id} for run_id in ids])
        removed = conn.execute(delete(events).where(events.c.run_id.in_(ids))).rowcount
        for table in (run_labels, run_tools, run_cancels):
            conn.execute(delete(table).where(table.c.run_id.in_(ids)))
        conn.execute(delete(runs).where(runs.c.run_id.in_(ids)))
        conn.execute(delete(run_deletions).where(run_deletions.c.run_id.in_(ids)))
    return [run for run in batch if run.run_id in ids], removed


def count_events(conn: Connection, run_ids: list[str], chunk: int = DEFAULT_BATCH) -> int:
    """How many events the runs have (for a dry run's report)."""
    total = 0
    for start in range(0, len(run_ids), chunk):
        part = run_ids[start:start + chunk]
        total += int(conn.execute(select(func.count()).select_from(events)
                                  .where(events.c.run_id.in_(part))).scalar_one())
    return total


def prune_runs(engine: Engine, url: URL, reading: Callable[[], AbstractContextManager[Connection]], before: datetime,
               statuses: tuple[str, ...], dry_run: bool, batch_size: int, *, read_only: bool) -> PruneResult:
    """``RunStore.prune``: plan, then delete ``batch_size`` runs per transaction (or only count, ``dry_run``)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if read_only and not dry_run:
        raise StoreError(f"store {shown(url)} is open read-only: it cannot prune runs")
    with reading() as conn:
        planned, kept = plan(conn, before, statuses)
        if dry_run:
            total = count_events(conn, [run.run_id for run in planned])
            return PruneResult(tuple(planned), total, tuple(kept), dry_run=True)
    deleted: list[PrunedRun] = []
    total = 0
    try:
        for start in range(0, len(planned), batch_size):
            gone, removed = delete_batch(engine, planned[start:start + batch_size], statuses)
            deleted += gone
            total += removed
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot prune runs in {shown(url)} (deleted {len(deleted)} before the "
                         f"failure): {one_line(exc)}") from None
    return PruneResult(tuple(deleted), total, tuple(kept), dry_run=False)
