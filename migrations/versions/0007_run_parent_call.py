"""Which call of its parent a sub-agent's child run serves: ``runs.parent_call_id``.

A sub-agent's call runs as a child run (``origin`` ``subagent`` in its ``run_started``); the
column names the parent's call, so a list of runs tells a child from a fork or a follow-up
(whose ``parent_run_id`` is set too) without reading their logs, and ``RunFilter.top`` keeps
to the runs that serve no call (``parent_call_id IS NULL``). Children logged before this
revision get theirs from their ``run_started``; every other run keeps NULL. A store at an
older revision, opened read-only, is read without it: none of its runs is known as a child.
Plain ALTER TABLE on both backends, as 0005 (a batch copy of ``runs`` would drop the table the
events' foreign key points at); no index: a list walks the runs newest first and skips children.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("parent_call_id", sa.String(200), nullable=True))
    # Read in Python, not with the backend's JSON functions: PostgreSQL's refuse a log holding \u0000.
    # Only a run with a parent can be a child: the index on parent_run_id finds them.
    bind = op.get_bind()
    starts = bind.execute(sa.text(
        "SELECT e.run_id, e.data FROM events e JOIN runs r ON r.run_id = e.run_id "
        "WHERE r.parent_run_id IS NOT NULL AND e.kind = 'run_started'"))  # the kind as the log stores it now
    found = []
    for run_id, data in starts.all():
        call = _column(_logged(data))
        if call is not None:
            found.append({"run_id": run_id, "call": call})
    for start in range(0, len(found), 500):
        bind.execute(sa.text("UPDATE runs SET parent_call_id = :call WHERE run_id = :run_id"), found[start:start + 500])


def _logged(data: str) -> object:
    """The ``parent_call_id`` a ``run_started``'s data names (None: none, or data that is not JSON)."""
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return found.get("parent_call_id") if isinstance(found, dict) else None


def _column(value: object) -> str | None:
    """A logged call id as the column holds it (``runner.store.rows.column``): no NUL, no lone surrogate, 200 wide."""
    if not isinstance(value, str):
        return None
    return re.sub("[\ud800-\udfff]", "\ufffd", value.replace("\x00", ""))[:200]


def downgrade() -> None:
    op.drop_column("runs", "parent_call_id")
