"""Core statements compiled once per dialect and run on the DBAPI cursor.

Sending a step's few rows through the full Core pipeline costs more than SQLite's commit.
A ``Prepared`` statement keeps Core's SQL for the dialect and the columns' bind processors,
and hands plain rows to the cursor (one ``executemany`` per batch) inside the caller's
transaction, which the caller begins and commits.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Dialect
from sqlalchemy.sql.dml import UpdateBase


class Prepared:
    """``statement`` compiled for ``dialect``; ``run`` executes it for rows given as dicts.

    ``rendered`` names the parameters whose values come as the driver takes them already
    (their type's bind processor is skipped)."""

    def __init__(self, statement: UpdateBase, dialect: Dialect, rendered: Sequence[str] = ()) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self.positional = bool(compiled.positional)
        names = list(compiled.positiontup or []) if self.positional else list(compiled.binds)
        self.names = names
        self.processors: list[tuple[str, Callable[[Any], Any] | None]] = [
            (name, None if name in rendered else compiled.binds[name].type.bind_processor(dialect))
            for name in names]
        # Most columns have no processor: take the row's values in one C call, then process the few.
        self._values = operator.itemgetter(*names) if len(names) > 1 else (lambda row: (row[names[0]],))
        self._processed = [(i, proc) for i, (_, proc) in enumerate(self.processors) if proc is not None]

    def params(self, row: Mapping[str, Any]) -> Any:
        """The driver's parameters for one row: a tuple (positional) or a dict (named)."""
        return self.values_params(self._values(row))

    def values_params(self, values: Sequence[Any]) -> Any:
        """``params`` for a row given as its values in ``names`` order."""
        if self._processed:
            values = list(values)
            for i, proc in self._processed:
                values[i] = proc(values[i])
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))

    def run_values(self, cursor: Any, rows: Sequence[Sequence[Any]]) -> None:
        """``run`` for rows given as value tuples in ``names`` order (no dict per row)."""
        if not rows:
            return
        if not self._processed and self.positional:  # the rows are the driver's parameters as they are
            cursor.executemany(self.sql, rows)
        elif len(rows) == 1:
            cursor.execute(self.sql, self.values_params(rows[0]))
        else:
            cursor.executemany(self.sql, [self.values_params(row) for row in rows])

    def run(self, cursor: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        """Execute for ``rows`` on a DBAPI cursor; how many rows it changed.

        Driver errors come out raw: the caller wraps them.
        """
        if not rows:
            return 0
        if len(rows) == 1:
            cursor.execute(self.sql, self.params(rows[0]))
        else:
            cursor.executemany(self.sql, [self.params(row) for row in rows])
        return int(cursor.rowcount)
