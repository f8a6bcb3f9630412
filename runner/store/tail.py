"""A run's log read on from an event, a page at a time, with its status: what a follower of a live run polls.

One read reads the run's status first, then its events past ``after`` (a range of the events' primary key),
so a status read as stopped means its ``run_finished`` is among the events read or before them. A tool
message stored as a reference to its call's observation comes back whole, as ``read_run`` gives it, even
when that observation was logged before the page: it is looked up, newest first, among the run's results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, select

from .._log.codec import CONTENT_FROM, EventDecodeError, decode, fold_in
from .._log.records import StoredEvent
from .._log.statuses import Status
from ..errors import RunNotFound
from ..events import KIND_OF, ToolFinished
from .rows import event_data
from .tables import events, runs

PAGE: Final = 200  # events per read: a follower's memory is bounded by a page, not by the run's log
LOOK_BACK: Final = 10  # results read at a time when a message refers to an observation before the page
TOOL_FINISHED: Final = KIND_OF[ToolFinished]


class Tail(NamedTuple):
    """A run's status as read, then (at most a page of) its events after the one a follower saw last."""

    status: Status
    events: list[StoredEvent]


def events_after(conn: Connection, run_id: str, after: int, limit: int = PAGE, store: str = "the store") -> Tail:
    """Run ``run_id``'s status, then its first ``limit`` events with ``seq`` past ``after``.

    ``RunNotFound`` (naming ``store``) when there is no such run.
    """
    status = conn.execute(select(runs.c.status).where(runs.c.run_id == run_id)).scalar()
    if status is None:
        raise RunNotFound(f"no run {run_id!r} in {store}")
    rows = conn.execute(select(events.c.seq, events.c.at, events.c.step, events.c.kind, events.c.data,
                               events.c.span_id).where(events.c.run_id == run_id, events.c.seq > after)
                        .order_by(events.c.seq).limit(limit)).all()
    return Tail(Status(status), folded(conn, run_id, rows))


def folded(conn: Connection, run_id: str, rows: Sequence[Sequence[Any]]) -> list[StoredEvent]:
    """The rows as ``read_run`` gives them (a shared observation folded back), each checked to be a fact."""
    observations: dict[str, str] = {}
    found = []
    for seq, at, step, kind, data, span_id in rows:
        value = event_data(run_id, seq, data)
        wanted = _referred(value)
        if wanted is not None and wanted not in observations:
            earlier = observation_before(conn, run_id, wanted, seq)
            if earlier is not None:
                observations[wanted] = earlier
        try:
            value = fold_in(kind, value, observations)
            decode(kind, value, step, run_id)  # a row that is no fact of this runner fails here, as read_run does
        except EventDecodeError as exc:
            raise EventDecodeError(f"run {run_id} event {seq}: {exc}") from None
        found.append(StoredEvent(seq, at, step, kind, value, span_id))
    return found


def _referred(data: Any) -> str | None:
    """The call whose observation a tool message stored as a reference needs, or None for any other row."""
    if not isinstance(data, dict) or CONTENT_FROM not in data:
        return None
    message = data.get("message")
    call_id = message.get("tool_call_id") if isinstance(message, dict) else None
    return call_id if isinstance(call_id, str) else None


def observation_before(conn: Connection, run_id: str, call_id: str, seq: int) -> str | None:
    """The observation of ``call_id``'s last ``tool_finished`` before event ``seq``; None when it has none."""
    before = seq
    while True:
        rows = conn.execute(select(events.c.seq, events.c.data)
                            .where(events.c.run_id == run_id, events.c.seq < before, events.c.kind == TOOL_FINISHED)
                            .order_by(events.c.seq.desc()).limit(LOOK_BACK)).all()
        for found_seq, data in rows:
            value = event_data(run_id, found_seq, data)
            observation = value.get("observation") if isinstance(value, dict) else None
            if isinstance(value, dict) and value.get("call_id") == call_id and isinstance(observation, str):
                return observation
        if len(rows) < LOOK_BACK:
            return None
        before = rows[-1][0]
