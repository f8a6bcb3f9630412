"""Short run ids: each run's shortest id prefix that names no other run, from its neighbours in id order."""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection, bindparam, func, select

from .queries import BATCH
from .tables import runs

SHORT_ID: Final = 8  # the fewest characters of a short run id
NEIGHBOURS_AT_ONCE = 100  # ids absent from the store whose neighbours one statement reads (two subqueries each)
_MINE = runs.alias("mine")
NEIGHBOURS: Final = select(  # each run's id and its neighbours' in sorted order: two index seeks a run
    _MINE.c.run_id,
    select(func.max(runs.c.run_id)).where(runs.c.run_id < _MINE.c.run_id).scalar_subquery(),
    select(func.min(runs.c.run_id)).where(runs.c.run_id > _MINE.c.run_id).scalar_subquery(),
).where(_MINE.c.run_id.in_(bindparam("ids", expanding=True)))


def short_ids(conn: Connection, run_ids: list[str]) -> dict[str, str]:
    """For each id, its shortest prefix (``SHORT_ID`` characters at least) that names no other run.

    Its neighbours in sorted order, read for up to ``BATCH`` runs in one statement that is built
    once (building one with two subqueries per id cost more than running it): a prefix no
    neighbour shares is unique in the store. An id no run has is looked up on its own.
    """
    out: dict[str, str] = {}
    unique = list(dict.fromkeys(run_ids))
    for start in range(0, len(unique), BATCH):
        for run_id, before, after in conn.execute(NEIGHBOURS, {"ids": unique[start:start + BATCH]}):
            out[run_id] = _shortest(run_id, before, after)
    absent = [run_id for run_id in unique if run_id not in out]
    for start in range(0, len(absent), NEIGHBOURS_AT_ONCE):
        chunk = absent[start:start + NEIGHBOURS_AT_ONCE]
        columns = []
        for run_id in chunk:
            columns.append(select(func.max(runs.c.run_id)).where(runs.c.run_id < run_id).scalar_subquery())
            columns.append(select(func.min(runs.c.run_id)).where(runs.c.run_id > run_id).scalar_subquery())
        row = conn.execute(select(*columns)).one()
        for k, run_id in enumerate(chunk):
            out[run_id] = _shortest(run_id, row[2 * k], row[2 * k + 1])
    return out


def _shortest(run_id: str, before: str | None, after: str | None) -> str:
    """The shortest prefix of ``run_id`` (``SHORT_ID`` characters at least) neither neighbour shares."""
    shared = max(_common_prefix(run_id, before or ""), _common_prefix(run_id, after or ""))
    return run_id[:max(SHORT_ID, shared + 1)]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
