"""The distinct values one label key has, highest first, read from the label index a few rows at a time.

The console lists the newest reruns this way: a rerun's id (the value of its candidates' ``rerun``
label) begins with the time it started, so the highest values are the newest. Each value costs one
seek in ``ix_run_labels_key_value_started_at`` (a skip scan) and a read of a bounded number of its
runs there, so a store of a million runs answers as fast as an empty one.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Select, func, select

from .rows import NAME_WIDTH, column
from .tables import run_labels, runs

if TYPE_CHECKING:
    from .runstore import RunStore

MAX_VALUES = 1000  # values one call reads: a page of a list, not a scan
COUNTED = 1000  # runs of one value counted at most


class LabelValue(NamedTuple):
    """One value of a label key, and its runs: when the first started, how many (up to a bound), the last change.

    ``runs`` and ``last_updated_at`` count the first runs only, ``at_most`` of them: enough to tell that
    something changed since a value was last read, for a value with fewer runs than that.
    """

    value: str
    first_started_at: datetime
    runs: int
    last_updated_at: datetime


def label_values(store: RunStore, key: str, *, limit: int, below: str | None = None,
                 at_most: int = COUNTED) -> list[LabelValue]:
    """The distinct values of label ``key``, highest first, at most ``limit`` (and ``MAX_VALUES``) of them.

    ``below``: only the values below this one (the next page of a list). Each value is one seek in the
    label index, then a read of its first ``at_most`` runs there (and of their ``runs`` rows).
    """
    for name, number, low, high in (("limit", limit, 0, MAX_VALUES), ("at_most", at_most, 1, COUNTED)):
        if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
            raise ValueError(f"{name} must be a whole number from {low} to {high}, got {number!r}")
    stored_key = column(key, NAME_WIDTH)
    found: list[LabelValue] = []
    with store.reading() as conn:
        while len(found) < limit:
            value = conn.execute(highest(stored_key, below)).scalar()
            if value is None:
                break
            first, counted, last = conn.execute(labelled_runs(stored_key, value, at_most)).one()
            found.append(LabelValue(value, first, counted, last))
            below = value
    return found


def highest(key: str, below: str | None) -> Select[str]:
    """The highest value of label ``key`` (below ``below``): the last entry of the index's range for the key."""
    query = select(run_labels.c.value).where(run_labels.c.key == key)
    if below is not None:
        query = query.where(run_labels.c.value < below)
    return query.order_by(run_labels.c.value.desc()).limit(1)


def labelled_runs(key: str, value: str, at_most: int) -> Select[datetime, int, datetime]:
    """Of the first ``at_most`` runs labelled ``key=value``: when the first started, how many, their last change.

    They are the first entries of the index's range for the pair; each then one ``runs`` row by its key.
    """
    first = (select(run_labels.c.run_id, run_labels.c.started_at)
             .where(run_labels.c.key == key, run_labels.c.value == value)
             .order_by(run_labels.c.started_at).limit(at_most).subquery())
    return (select(func.min(first.c.started_at), func.count(), func.max(runs.c.updated_at))
            .select_from(first.join(runs, runs.c.run_id == first.c.run_id)))
