"""Whole finished runs can be pruned; single events still cannot be deleted.

``run_deletions`` holds the ids of the runs being pruned, only inside the pruning
transaction (``RunStore.prune`` inserts them, deletes the runs' rows from every
table, then deletes the markers before committing), so the table is empty outside
that transaction. The events' DELETE guard now lets a row go only when its run is
marked: on SQLite a ``WHEN NOT EXISTS`` condition on the trigger, on PostgreSQL the
trigger function checks the marker. UPDATE, TRUNCATE and replacing an event
(0002) stay refused, marker or not. One mechanism on both backends: a session
setting would work on PostgreSQL only, and a marker is scoped to named runs.

No foreign key to ``runs``: the run row goes before its marker does.

Revision ID: 0004
Revises: 0003
Create Date: 2025-04-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_GUARDED = """
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM run_deletions WHERE run_id = OLD.run_id)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END
"""
SQLITE_PLAIN = ("CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN "
                "SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed'); END")

PG_GUARDED = """
CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM run_deletions WHERE run_id = OLD.run_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP;
END;
$body$
"""
PG_PLAIN = """
CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP;
END;
$body$
"""


def upgrade() -> None:
    op.create_table(
        "run_deletions",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_deletions")),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER events_no_delete")
        op.execute(SQLITE_GUARDED)
    elif dialect == "postgresql":
        op.execute(PG_GUARDED)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER events_no_delete")
        op.execute(SQLITE_PLAIN)
    elif dialect == "postgresql":
        op.execute(PG_PLAIN)
    op.drop_table("run_deletions")
