"""Following a run from another process: its events logged after the last one seen, and how it stands now.

``RunStore`` has these methods from ``Following``: ``runner watch`` polls them, a cheap read each
(the events past a ``seq``, through the primary key; one ``runs`` row), rather than reading the
whole run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.engine import URL

from .._log.records import RunSummary, StoredEvent
from ..errors import RunNotFound
from ..events import KIND_OF, EventDecodeError, ToolFinished
from . import queries
from .engine import shown
from .tables import events, runs

COLUMNS = (events.c.seq, events.c.at, events.c.step, events.c.kind, events.c.data, events.c.span_id)


class Following:
    """The reads of a follower: ``events_past`` and ``run_summary`` (``RunStore`` has them)."""

    url: URL
    _runs: tuple[Any, ...]
    _clock: tuple[Any, ...]

    def reading(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError  # RunStore's

    def events_past(self, run_id: str, after_seq: int) -> list[StoredEvent]:
        """The events of run ``run_id`` logged after its event ``after_seq`` (0: all of them), in order.

        As ``get_run`` reads them: a tool message stored as a reference to its call's observation gets its
        content back, from a ``tool_finished`` logged before ``after_seq`` too. [] for no such run.
        """
        with self.reading() as conn:
            rows = conn.execute(select(*COLUMNS).where(events.c.run_id == run_id, events.c.seq > after_seq)
                                .order_by(events.c.seq)).all()
            try:
                return queries.logged_rows(run_id, rows)
            except EventDecodeError:  # it refers to an observation logged before after_seq: learn those first
                return queries.logged_rows(run_id, rows, _observations(conn, run_id, after_seq))

    def run_summary(self, run_id: str) -> RunSummary:
        """How run ``run_id`` stands now (its ``runs`` row, its liveness judged); ``RunNotFound`` if none."""
        with self.reading() as conn:
            found = queries.summaries(conn, select(*self._runs, *self._clock).where(runs.c.run_id == run_id))
        if not found:
            raise RunNotFound(f"no run {run_id!r} in {shown(self.url)}")
        return found[0]


def _observations(conn: Connection, run_id: str, up_to: int) -> dict[str, str]:
    """The observation of each call of the run whose ``tool_finished`` is logged at or before ``up_to``."""
    rows: Sequence[Any] = conn.execute(select(*COLUMNS).where(
        events.c.run_id == run_id, events.c.seq <= up_to, events.c.kind == KIND_OF[ToolFinished])
        .order_by(events.c.seq)).all()
    observations: dict[str, str] = {}
    queries.logged_rows(run_id, rows, observations)
    return observations
