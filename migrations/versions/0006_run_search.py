"""A text index for the runs' search (``RunFilter.text``): trigrams of the task and the answer.

A search matches a case-insensitive substring of a run's task or answer (``lower(x) LIKE
'%needle%'``); without an index, one that matches nothing reads every run. The index only
narrows: the same ``LIKE`` still decides, so what a search finds does not change.

- SQLite: ``run_search``, an FTS5 table (``trigram`` tokenizer, case-sensitive, detail=none)
  of ``lower(task)`` and ``lower(answer)``, keyed by ``run_search_keys.doc``: a stable integer
  per run (``runs`` has no INTEGER PRIMARY KEY, and VACUUM may renumber its rowids). Triggers on
  ``runs`` keep both in step in the writer's own transaction (a run's insert, a change of its
  task or answer, its delete by ``prune``). The FTS table keeps its text, so a delete never
  has to give back what was indexed (a contentless table would be corrupted by a mismatch).
- PostgreSQL: GIN indexes of ``pg_trgm`` on ``lower(task)`` and ``lower(answer)``. The
  extension is created once, in ``public`` (one schema, not the store's: dropping a store's
  schema must not drop it for the others), and its operator class named with that schema.
  Where ``pg_trgm`` cannot be created the indexes are left out: searches then read every run,
  as before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DOC = "(SELECT doc FROM run_search_keys WHERE run_id = {}.run_id)"
SQLITE_UP = [
    "CREATE TABLE run_search_keys (doc INTEGER NOT NULL, run_id VARCHAR(64) NOT NULL, "
    "CONSTRAINT pk_run_search_keys PRIMARY KEY (doc), CONSTRAINT uq_run_search_keys_run_id UNIQUE (run_id))",
    "CREATE VIRTUAL TABLE run_search USING fts5(task, answer, tokenize='trigram case_sensitive 1', "
    "detail=none, columnsize=0)",
    "INSERT INTO run_search_keys (run_id) SELECT run_id FROM runs ORDER BY run_id",
    "INSERT INTO run_search (rowid, task, answer) SELECT k.doc, lower(r.task), lower(r.answer) "
    "FROM run_search_keys k JOIN runs r ON r.run_id = k.run_id ORDER BY k.doc",
    f"""CREATE TRIGGER runs_search_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_search_keys (run_id) VALUES (NEW.run_id);
    INSERT INTO run_search (rowid, task, answer) VALUES ({DOC.format("NEW")}, lower(NEW.task), lower(NEW.answer));
END""",
    f"""CREATE TRIGGER runs_search_update AFTER UPDATE OF task, answer ON runs
WHEN OLD.task IS NOT NEW.task OR OLD.answer IS NOT NEW.answer BEGIN
    UPDATE run_search SET task = lower(NEW.task), answer = lower(NEW.answer) WHERE rowid = {DOC.format("NEW")};
END""",
    f"""CREATE TRIGGER runs_search_delete AFTER DELETE ON runs BEGIN
    DELETE FROM run_search WHERE rowid = {DOC.format("OLD")};
    DELETE FROM run_search_keys WHERE run_id = OLD.run_id;
END""",
]
SQLITE_DOWN = ["DROP TRIGGER runs_search_delete", "DROP TRIGGER runs_search_update",
               "DROP TRIGGER runs_search_insert", "DROP TABLE run_search", "DROP TABLE run_search_keys"]
PG_INDEXES = {"ix_runs_task_trgm": "task", "ix_runs_answer_trgm": "answer"}
EXTENSION_SCHEMA = "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace " \
                   "WHERE e.extname = 'pg_trgm'"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_UP:
            op.execute(statement)
    elif bind.dialect.name == "postgresql":
        schema = _trigram_schema(bind)
        if schema is None:
            return
        ops = f"{bind.dialect.identifier_preparer.quote_identifier(schema)}.gin_trgm_ops"
        for name, column in PG_INDEXES.items():
            op.execute(f"CREATE INDEX {name} ON runs USING gin (lower({column}) {ops})")
        # The planner weighs the indexes by the statistics of lower(task) and lower(answer): gather them
        # now (a sample of the rows), rather than at autovacuum's next analyze.
        op.execute("ANALYZE runs")


def _trigram_schema(bind: sa.Connection) -> str | None:
    """The schema ``pg_trgm`` is in, creating it in ``public`` if need be; None when it cannot be had."""
    # Stores migrating at once in other schemas of the database would race to create it.
    bind.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('runner: CREATE EXTENSION pg_trgm'))"))
    found = bind.execute(sa.text(EXTENSION_SCHEMA)).scalar()
    if found is not None:
        return str(found)
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
    except sa.exc.DBAPIError as exc:
        logging.getLogger("alembic").warning(
            "no text index: cannot create the extension pg_trgm (%s); searches read every run",
            str(exc.orig).splitlines()[0])
        return None
    return str(bind.execute(sa.text(EXTENSION_SCHEMA)).scalar_one())


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_DOWN:
            op.execute(statement)
    elif bind.dialect.name == "postgresql":  # the extension stays: other stores of the database may use it
        for name in PG_INDEXES:
            op.execute(f"DROP INDEX IF EXISTS {name}")
