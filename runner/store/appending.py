"""Facts appended to a run that no process drives (a decision on a run awaiting approval).

Only a run's owner appends to its log while it runs. A stopped run has no owner to do it,
so the writer fences itself: one transaction moves the run's ``updated_at`` on if the row
is still as the writer read it (status, owner, ``updated_at``), and appends the facts right
after the last event it read. Of two writers, or a writer and a resume, that read the same
row, one goes ahead; the other matches nothing (or meets the taken ``seq``) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .._log.records import StoredRun
from ..errors import StoreError
from ..events import Event, encode
from .engine import one_line
from .rows import dumps
from .tables import events, runs


def append_to_stopped(engine: Engine, seen: StoredRun, facts: Sequence[Event]) -> bool:
    """Append ``facts`` to run ``seen`` if nothing changed it since it was read; whether they were."""
    now = datetime.now(UTC)
    fence = (update(runs)
             .where(runs.c.run_id == seen.run_id, runs.c.status == seen.status,
                    runs.c.owner.is_not_distinct_from(seen.owner), runs.c.updated_at == seen.updated_at)
             .values(updated_at=now))
    last = seen.events[-1].seq if seen.events else 0
    rows = []
    for seq, fact in enumerate(facts, last + 1):
        kind, data = encode(fact)
        rows.append({"run_id": seen.run_id, "seq": seq, "at": now, "step": fact.step, "kind": kind,
                     "data": dumps(data), "span_id": None})
    try:
        with engine.begin() as conn:
            if conn.execute(fence).rowcount != 1:
                return False
            conn.execute(insert(events), rows)
    except IntegrityError:  # another writer appended after the read without moving the row: those seqs are taken
        return False
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot append to run {seen.run_id}: {one_line(exc)}") from None
    return True
