"""The runs' text search: a case-insensitive substring of the task or the answer, narrowed by a trigram index.

``like`` alone decides what matches, on every backend; the index (migration 0006) only narrows which
runs it reads. PostgreSQL's planner weighs ``pg_trgm``'s GIN indexes against the newest-first walk.
On SQLite ``candidates`` asks the FTS5 table for the runs holding every trigram of the text; fewer
than ``CANDIDATES`` of them drive the query. A text under three characters, or a common one, is
walked newest first as before (docs/event-log.md, "The text index").
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from sqlalchemy import ColumnElement, Connection, FromClause, Join, func, literal, or_, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from .tables import runs

CANDIDATES: Final = 2000  # SQLite: past this many runs holding the needle's trigrams, walk newest first
TRIGRAMS: Final = 24  # at most this many of the needle's trigrams are looked up (each narrows; a few suffice)
ESCAPED = re.compile(r"/(.)", re.DOTALL)  # an escaped character of a LIKE pattern (escape ``/``)
LOOKUP = text("SELECT k.run_id FROM run_search s JOIN run_search_keys k ON k.doc = s.rowid "
              "WHERE run_search MATCH :query LIMIT :limit")


def pattern(needle: str) -> str:
    """The ``LIKE`` pattern of ``needle`` (escaped with ``/``): any text around it."""
    return "%" + needle.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


def like(needle: str, dialect: str) -> ColumnElement[bool]:
    """Runs whose task or answer holds ``needle``, in any case: the check that decides what a search finds.

    Both sides are lowered by the database, so the needle folds as the column does: Python's
    'İ'.lower() is two code points where PostgreSQL's lower() gives one (SQLite's ``lower`` is
    Python's, see ``engine``). On PostgreSQL the pattern is written into the SQL, so the planner
    can weigh the trigram indexes against the walk.
    """
    lowered = func.lower(literal(pattern(needle), literal_execute=dialect == "postgresql"))
    return or_(func.lower(runs.c.task).like(lowered, escape="/"), func.lower(runs.c.answer).like(lowered, escape="/"))


def sought(needle: str) -> str:
    """The text ``like`` looks for in a lowered column: the pattern lowered as SQLite lowers it, unescaped.

    Lowered whole, as the database lowers the pattern (Python's ``lower`` reads a letter's
    neighbours for a final sigma), then taken apart again.
    """
    lowered = pattern(needle).lower()[1:-1]
    return ESCAPED.sub(r"\1", lowered)


def trigram_query(needle: str) -> str | None:
    """The FTS5 query for runs holding every trigram of what ``like`` looks for in SQLite (``sought``).

    None when it has none: shorter than three characters once lowered. Each trigram is an
    FTS5 string (``"`` doubled inside), ANDed: the index keeps no positions (detail=none).
    """
    folded = sought(needle)
    grams = list(dict.fromkeys(folded[i:i + 3] for i in range(len(folded) - 2)))
    if not grams:
        return None
    if len(grams) > TRIGRAMS:  # spread over the needle: its start, its end and between
        grams = [grams[round(k * (len(grams) - 1) / (TRIGRAMS - 1))] for k in range(TRIGRAMS)]
    return " AND ".join('"' + gram.replace('"', '""') + '"' for gram in grams)


def driving(among: list[str], run_id: ColumnElement[str]) -> FromClause:
    """SQLite: the run ids ``among`` (one JSON text, ``json_each``) joined to ``runs`` by ``run_id``, which they drive.

    ``CROSS JOIN`` fixes the order: each candidate read by the primary key, never a walk of an
    index that sorts by ``started_at`` (the page's order) checking each run against the list.
    """
    ids = func.json_each(literal(json.dumps(among))).table_valued("value").alias("among")
    return Leading(ids, runs, run_id == ids.c.value)


class Leading(Join):
    """A join whose left side SQLite reads first: ``CROSS JOIN``, which its planner never reorders."""

    inherit_cache = True


@compiles(Leading, "sqlite")
def _cross_join(join: Leading, compiler: SQLCompiler, **kw: Any) -> str:
    """The join as SQLAlchemy writes it, with ``CROSS`` before its ``JOIN`` (the left side holds none)."""
    return str(compiler.visit_join(join, **kw)).replace(" JOIN ", " CROSS JOIN ", 1)  # type: ignore[no-untyped-call]


def candidates(conn: Connection, needle: str) -> list[str] | None:
    """On SQLite, the runs that may hold ``needle`` when there are fewer than ``CANDIDATES``; else None.

    None too on another backend, and for a needle with no trigram: the search then walks newest first.
    """
    if conn.dialect.name != "sqlite":
        return None
    query = trigram_query(needle)
    if query is None:
        return None
    found = list(conn.execute(LOOKUP, {"query": query, "limit": CANDIDATES}).scalars())
    return found if len(found) < CANDIDATES else None
