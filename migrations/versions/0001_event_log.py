"""The event log: runs, events (append-only), run_labels, run_tools.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_TRIGGERS = {
    "events_no_update": "UPDATE",
    "events_no_delete": "DELETE",
}

PG_FUNCTION = """
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP;
END;
$body$
"""


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("parent_run_id", sa.String(64), nullable=True),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("system", sa.Text(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("provider", sa.String(200), nullable=True),
        sa.Column("agent_name", sa.String(200), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("limits", sa.Text(), nullable=False),
        sa.Column("tool_specs", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(300), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
        sa.ForeignKeyConstraint(["parent_run_id"], ["runs.run_id"], name=op.f("fk_runs_parent_run_id_runs")),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at", "run_id"])
    op.create_index("ix_runs_status_started_at", "runs", ["status", "started_at", "run_id"])
    op.create_index(op.f("ix_runs_parent_run_id"), "runs", ["parent_run_id"])

    op.create_table(
        "events",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_events")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_events_run_id_runs")),
    )

    op.create_table(
        "run_labels",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "key", name=op.f("pk_run_labels")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_run_labels_run_id_runs")),
    )
    op.create_index("ix_run_labels_key_value_started_at", "run_labels", ["key", "value", "started_at", "run_id"])

    op.create_table(
        "run_tools",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "name", name=op.f("pk_run_tools")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_run_tools_run_id_runs")),
    )
    op.create_index("ix_run_tools_name_started_at", "run_tools", ["name", "started_at", "run_id"])

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name, operation in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} BEFORE {operation} ON events BEGIN "
                       f"SELECT RAISE(ABORT, 'events are append-only: {operation} is not allowed'); END")
    elif dialect == "postgresql":
        op.execute(PG_FUNCTION)
        op.execute("CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events "
                   "FOR EACH ROW EXECUTE FUNCTION events_append_only()")
        op.execute("CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
                   "FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER events_no_truncate ON events")
        op.execute("DROP TRIGGER events_no_update_delete ON events")
        op.execute("DROP FUNCTION events_append_only()")
    op.drop_index("ix_run_tools_name_started_at", table_name="run_tools")
    op.drop_table("run_tools")
    op.drop_index("ix_run_labels_key_value_started_at", table_name="run_labels")
    op.drop_table("run_labels")
    op.drop_table("events")
    op.drop_index(op.f("ix_runs_parent_run_id"), table_name="runs")
    op.drop_index("ix_runs_status_started_at", table_name="runs")
    op.drop_index("ix_runs_started_at", table_name="runs")
    op.drop_table("runs")
