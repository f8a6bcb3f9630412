"""A page of the runs list: the runs a ``RunFilter`` matches, and how many more match past the page.

``runner runs``, the console's runs page and ``GET /api/runs`` read the same filter the same way.
``RunFilter`` lives in the store (which may not import ``_view``) and is re-exported here.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .._log.statuses import Status
from ..store import RunFilter, RunStore, RunSummary

__all__ = ["RunFilter", "RunsPage", "Waiting", "origins", "runs_page", "waiting"]


class RunsPage(NamedTuple):
    """The runs of one page, newest first, with their refused calls by id, and how many more match (counted so far)."""

    runs: list[RunSummary]
    refused: dict[str, int]
    more: int


def runs_page(store: RunStore, where: RunFilter, *, limit: int, offset: int = 0, count_more: int = 0) -> RunsPage:
    """The runs ``where`` matches from ``offset``, at most ``limit``; and, past a full page, up to ``count_more``.

    The count past the page is bounded: a text search would otherwise read every run.
    """
    found = store.list_runs(where, limit=limit, offset=offset)
    shown = offset + limit
    more = 0
    if count_more and len(found) == limit:
        more = max(0, store.count_runs(where, at_most=shown + count_more) - shown)
    return RunsPage(found, store.refused_calls([run.run_id for run in found]), more)


def origins(store: RunStore, runs: list[RunSummary]) -> dict[str, str | None]:
    """How each of ``runs`` came about (``run_started``'s ``origin``), read for the linked runs only."""
    starts = store.run_starts([run.run_id for run in runs if run.parent_run_id is not None])
    return {run.run_id: started.origin if (started := starts.get(run.run_id)) is not None else None for run in runs}


class Waiting(NamedTuple):
    """How many runs a filter matches that await approval (counted up to a bound), and the newest one's id."""

    runs: int
    newest: str | None


def waiting(store: RunStore, where: RunFilter, *, at_most: int) -> Waiting:
    """The runs awaiting approval that ``where`` matches, in the whole store (not one page), up to ``at_most``."""
    if where.status is not None and Status.AWAITING_APPROVAL not in where.status:
        return Waiting(0, None)
    only = dataclasses.replace(where, status=(Status.AWAITING_APPROVAL,))
    count = store.count_runs(only, at_most=at_most)
    newest = store.list_runs(only, limit=1) if count else []
    return Waiting(count, newest[0].run_id if newest else None)
