"""A group's event rows into PostgreSQL by ``COPY``: one data stream, not a statement per row.

psycopg's ``executemany`` binds and runs every row on its own (pipelined, but each row
is Python work in the store's writer, on the GIL the runs themselves need): measured on
the concurrency benchmark at about 20 us of the writer's CPU per event row. ``COPY``
formats the rows in the driver's C code. (The runs' summary updates stay an
``executemany``: as one ``UPDATE ... FROM unnest(...)`` the planner joins the whole
``runs`` table, which costs more than it saves.)

Triggers fire for ``COPY`` as for ``INSERT``, so the log's append-only guards hold, and
a row that breaks a constraint fails the transaction just the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Dialect, Table

from .prepared import Prepared


class CopyInsert(Prepared):
    """``table``'s insert, run as ``COPY ... FROM STDIN`` for two rows or more (psycopg 3)."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        super().__init__(table.insert(), dialect)
        quote = dialect.identifier_preparer.quote
        self.copy_sql = f"COPY {quote(table.name)} ({', '.join(quote(name) for name in self.names)}) FROM STDIN"

    def run_values(self, cursor: Any, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) < 2:
            super().run_values(cursor, rows)
            return
        processed = self._processed
        with cursor.copy(self.copy_sql) as copy:
            for row in rows:
                if processed:
                    values = list(row)
                    for i, proc in processed:
                        values[i] = proc(values[i])
                    row = values
                copy.write_row(row)
