"""Events cannot be replaced: refuse an insert over an existing (run_id, seq).

SQLite's ``INSERT OR REPLACE`` / ``REPLACE INTO`` deletes the conflicting row
without firing DELETE triggers, so 0001's triggers alone let an event be forged
over an existing key. A BEFORE INSERT trigger refuses any existing key, whatever
the conflict clause. PostgreSQL needs nothing: its only replace is
``INSERT ... ON CONFLICT DO UPDATE``, which fires 0001's BEFORE UPDATE trigger.

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_TRIGGER = """
CREATE TRIGGER events_no_replace BEFORE INSERT ON events
WHEN EXISTS (SELECT 1 FROM events WHERE run_id = NEW.run_id AND seq = NEW.seq)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: event (run_id, seq) already exists');
END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER events_no_replace")
