"""Cancellation requests: ``run_cancels`` holds one row per run someone asked to stop.

A separate table, not a ``runs`` column: only the driving worker appends to a run's
log, so ``runner cancel`` (any process) leaves its request here and the worker polls
it; and reading ``runs`` from a store at an older revision keeps working unchanged.

Revision ID: 0003
Revises: 0002
Create Date: 2025-03-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_cancels",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_by", sa.String(300), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_cancels")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_run_cancels_run_id_runs")),
    )


def downgrade() -> None:
    op.drop_table("run_cancels")
