"""A group's event rows into PostgreSQL by ``COPY``: one data stream, not a statement per row.

``executemany`` costs the writer Python work per row, on the GIL the runs need; ``COPY``
formats the rows in the driver's C code. Triggers fire for ``COPY`` as for ``INSERT``, so
the append-only guards hold. Numbers: docs/event-log.md, "Notes".
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
