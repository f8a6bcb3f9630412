"""A run's active time: how long its log shows it working, leaving out the waits between its parts.

A run's duration (``finished_at - started_at``) includes the time it sat waiting for an
approval, or stopped until someone resumed it. Its active time sums each part: from a
``run_started`` or ``run_resumed`` to the ``run_finished`` that follows; a part that has
none (its process died, or it is still going) counts to its last event.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .._log.records import StoredEvent
from ..events import Event, RunFinished, RunResumed, RunStarted


def active_seconds(events: Sequence[StoredEvent], facts: Sequence[Event]) -> float:
    """The seconds ``events`` (decoded as ``facts``) show the run working."""
    total = timedelta()
    opened: datetime | None = None  # when the part under way began
    last: datetime | None = None  # the previous event's time
    for row, fact in zip(events, facts, strict=True):
        match fact:
            case RunStarted() | RunResumed():
                if opened is not None and last is not None:  # the part before ended without a stop
                    total += last - opened
                opened = row.at
            case RunFinished() if opened is not None:
                total += row.at - opened
                opened = None
            case _:
                pass
        last = row.at
    if opened is not None and last is not None:
        total += last - opened
    return total.total_seconds()
