"""Rollups for the stats (``runner stats``, the console's ``/stats``): ``rollups``, kept with the facts.

``runner stats`` read every event of the runs in its window: 111 s over a store of 1,000,000
runs. ``rollups`` holds what the runs started in each hour add up to, by kind, name and
latency bucket (``runner._log.tally``), ``rollup_minutes`` the same by minute (a window's ragged
ends). The recorder adds a run's rows in the transaction of
the facts they count, a second's worth at a time and at every change of status, and moves
``runs.rolled`` (the last event counted) with them; these triggers on ``runs`` keep the
``status`` rows (a run inserted, its status or start changed, its row deleted). On PostgreSQL the trigger's rows are written in
key order, as the recorder writes its own, so writers lock them in one order.

The migration fills the table from the runs already stored through ``runner.store.rollups.refill``
(the log's codec reads every older log; the tally is defined over facts). That takes about what
a ``runner stats`` over all time took before: minutes for a million runs. A later change to what
the rollups hold must refill them in its own migration.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = "start, kind, name, bucket, number, errors, tokens, cost_nusd, unknown, micros"
TABLES = (("rollups", "hour", "substr({}.started_at, 1, 13) || ':00:00.000000'"),
          ("rollup_minutes", "minute", "substr({}.started_at, 1, 16) || ':' || '00.000000'"))  # ':00' would bind


def _add(table: str) -> str:
    return f"ON CONFLICT (start, kind, name, bucket) DO UPDATE SET number = {table}.number + excluded.number"


def _sqlite_row(row: str, sign: int) -> str:
    return "\n    ".join(f"INSERT INTO {table} ({COLUMNS}) VALUES ({start.format(row)}, 'status', {row}.status, -1, "
                          f"{sign}, 0, 0, 0, 0, 0) {_add(table)};" for table, _, start in TABLES)


SQLITE_UP = [
    f"""CREATE TRIGGER runs_rollup_insert AFTER INSERT ON runs BEGIN
    {_sqlite_row("NEW", 1)}
END""",
    f"""CREATE TRIGGER runs_rollup_update AFTER UPDATE OF status, started_at ON runs
WHEN OLD.status IS NOT NEW.status OR OLD.started_at IS NOT NEW.started_at BEGIN
    {_sqlite_row("OLD", -1)}
    {_sqlite_row("NEW", 1)}
END""",
    f"""CREATE TRIGGER runs_rollup_delete AFTER DELETE ON runs BEGIN
    {_sqlite_row("OLD", -1)}
END""",
]
SQLITE_DOWN = ["DROP TRIGGER runs_rollup_delete", "DROP TRIGGER runs_rollup_update", "DROP TRIGGER runs_rollup_insert"]

PG_UP = [
    "CREATE FUNCTION runs_rollup_status() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n" + "".join(f"""
    INSERT INTO {table} ({COLUMNS})
    SELECT v.start, 'status', v.status, -1, sum(v.sign), 0, 0, 0, 0, 0 FROM (
        SELECT date_trunc('{unit}', OLD.started_at, 'UTC') AS start, OLD.status AS status, -1 AS sign
        WHERE TG_OP <> 'INSERT'
        UNION ALL
        SELECT date_trunc('{unit}', NEW.started_at, 'UTC'), NEW.status, 1 WHERE TG_OP <> 'DELETE') v
    GROUP BY v.start, v.status ORDER BY v.start, v.status
    {_add(table)};""" for table, unit, _ in TABLES) + "\n    RETURN NULL;\nEND $$",
    "CREATE TRIGGER runs_rollup_change AFTER INSERT OR DELETE ON runs FOR EACH ROW "
    "EXECUTE FUNCTION runs_rollup_status()",
    "CREATE TRIGGER runs_rollup_update AFTER UPDATE OF status, started_at ON runs FOR EACH ROW "
    "WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.started_at IS DISTINCT FROM NEW.started_at) "
    "EXECUTE FUNCTION runs_rollup_status()",
]
PG_DOWN = ["DROP TRIGGER runs_rollup_update ON runs", "DROP TRIGGER runs_rollup_change ON runs",
           "DROP FUNCTION runs_rollup_status()"]


def upgrade() -> None:
    counter = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    for table, _, _ in TABLES:
        op.create_table(
            table,
            sa.Column("start", sa.DateTime(timezone=True), nullable=False),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("name", sa.String(200), nullable=False),
            sa.Column("bucket", sa.Integer(), nullable=False),
            *(sa.Column(name, counter, server_default="0", nullable=False)
              for name in ("number", "errors", "tokens", "cost_nusd", "unknown", "micros")),
            sa.PrimaryKeyConstraint("start", "kind", "name", "bucket", name=f"pk_{table}"),
        )
    op.add_column("runs", sa.Column("rolled", sa.Integer(), server_default="0", nullable=False))
    bind = op.get_bind()
    for statement in PG_UP if bind.dialect.name == "postgresql" else SQLITE_UP:
        op.execute(statement)
    from runner.store import rollups  # the fill reads facts through the codec that reads every older log

    rollups.refill(bind)


def downgrade() -> None:
    for statement in PG_DOWN if op.get_bind().dialect.name == "postgresql" else SQLITE_DOWN:
        op.execute(statement)
    op.drop_table("rollup_minutes")
    op.drop_table("rollups")
    op.drop_column("runs", "rolled")
