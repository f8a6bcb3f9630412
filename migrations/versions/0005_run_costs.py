"""What each run's model calls cost: ``runs.cost_known_usd`` and ``runs.costs_unknown``; 64-bit ``runs.tokens``.

Each ``model_called`` fact carries its cost (or none, when the price or the usage was
unknown); these two columns add them up as the run goes, as ``tokens`` does, so the runs
list shows a run's cost without reading its log. Runs recorded before costs were logged
read as a run whose prices are unknown does today: ``cost_known_usd`` 0 and ``costs_unknown``
the number of its model calls that returned a reply (never a known cost of $0). A store at an older revision, opened
read-only, is read without these columns (their defaults stand). On PostgreSQL ``tokens``
becomes a BIGINT: a run's usage can pass 2**31 tokens (SQLite's INTEGER is 64 bits already).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE on both backends (SQLite 3.35+ drops columns): a batch copy of ``runs``
# would drop the table the events' foreign key points at.
def upgrade() -> None:
    op.add_column("runs", sa.Column("cost_known_usd", sa.Float(), server_default="0", nullable=False))
    op.add_column("runs", sa.Column("costs_unknown", sa.Integer(), server_default="0", nullable=False))
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "tokens", type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)
        replied = "json_typeof(CAST(e.data AS json) -> 'reply') = 'object'"
    else:
        replied = "json_type(e.data, '$.reply') = 'object'"
    # The kind is frozen here as the log stored it then ('model_call'): a migration never follows renames.
    op.execute(f"UPDATE runs SET costs_unknown = (SELECT count(*) FROM events e WHERE e.run_id = runs.run_id "
               f"AND e.kind = 'model_call' AND {replied})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "tokens", type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
    op.drop_column("runs", "costs_unknown")
    op.drop_column("runs", "cost_known_usd")
