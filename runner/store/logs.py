"""The logs of many runs at once, decoded: for a page that reads the facts of a page of runs (the inbox).

One statement per ``BATCH`` runs, where ``read_run`` takes three per run. Each log is read as
``read_run`` reads it (``logged_rows``, then the codec), so its facts are the same.
"""

from __future__ import annotations

from itertools import groupby

from sqlalchemy import Connection, select

from ..events import Event, decode_all
from .queries import BATCH, logged_rows
from .tables import events


def facts_of(conn: Connection, run_ids: list[str]) -> dict[str, tuple[Event, ...]]:
    """Each run's facts in log order, by run id; a run with none logged (or no such run) is left out."""
    found: dict[str, tuple[Event, ...]] = {}
    for start in range(0, len(run_ids), BATCH):
        query = (select(events.c.run_id, events.c.seq, events.c.at, events.c.step, events.c.kind, events.c.data,
                        events.c.span_id)
                 .where(events.c.run_id.in_(run_ids[start:start + BATCH])).order_by(events.c.run_id, events.c.seq))
        for run_id, rows in groupby(conn.execute(query), key=lambda row: str(row[0])):
            stored = logged_rows(run_id, (row[1:] for row in rows))
            found[run_id] = tuple(decode_all(stored, run_id))
    return found
