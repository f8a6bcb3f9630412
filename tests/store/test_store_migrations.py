"""The schema through Alembic itself: one head, upgrade from empty, models match, round trip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from runner.store import open_store
from runner.store.engine import make_engine, parse_url
from runner.store.migrate import alembic_config, current_revision, head_revision, script_location
from runner.store.tables import TEXT_INDEX, Base, modelled

TABLES = ["alembic_version", "events", "rollup_minutes", "rollups", "run_cancels", "run_deletions", "run_labels",
          "run_tools", "runs"]
SEARCH_TABLES = sorted(name for name in TEXT_INDEX if not name.startswith("ix_"))  # SQLite's text index


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    """An engine on an empty database with the store's settings, not yet migrated."""
    made = make_engine(parse_url(store_url))
    yield made
    made.dispose()


def upgrade(engine: Engine, target: str = "head") -> None:
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), target)


def downgrade(engine: Engine, target: str) -> None:
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), target)


def tables(engine: Engine) -> list[str]:
    """The tables but the text index's own (SQLite's FTS5 table and its key table)."""
    with engine.connect() as conn:
        return sorted(name for name in inspect(conn).get_table_names() if name not in TEXT_INDEX)


def version(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


def test_history_is_linear_with_a_single_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [head_revision()] == ["0008"]
    revisions = list(script.walk_revisions())
    assert [rev.down_revision for rev in revisions][-1] is None
    assert all(not rev.is_branch_point and not rev.is_merge_point for rev in revisions)


def test_scripts_come_from_the_checkout_migrations_dir() -> None:
    assert script_location().name in ("migrations", "_migrations")
    assert (script_location() / "env.py").is_file()


def test_upgrade_from_empty_creates_the_tables_at_head(engine: Engine) -> None:
    assert tables(engine) == []
    upgrade(engine)
    assert tables(engine) == TABLES
    assert version(engine) == [head_revision()]


def test_models_match_the_migrated_schema(engine: Engine) -> None:
    upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": modelled})
        assert compare_metadata(context, Base.metadata) == []


def test_downgrade_to_base_and_upgrade_again_round_trips(engine: Engine) -> None:
    upgrade(engine)
    downgrade(engine, "base")
    assert tables(engine) == ["alembic_version"]
    assert version(engine) == []
    upgrade(engine)
    assert tables(engine) == TABLES
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": modelled})
        assert compare_metadata(context, Base.metadata) == []


def test_append_only_triggers_survive_a_round_trip(engine: Engine, store_url: str) -> None:
    upgrade(engine)
    downgrade(engine, "base")
    upgrade(engine)
    with open_store(store_url) as store, store.engine.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, task, system, model, status, steps, tokens, tool_calls, "
                          "limits, tool_specs, trace_id, started_at, updated_at) VALUES ('r', 't', 's', 'm', "
                          "'running', 0, 0, 0, '{}', '[]', 'x', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO events (run_id, seq, at, step, kind, data) "
                          "VALUES ('r', 1, CURRENT_TIMESTAMP, 0, 'message', '{}')"))
        with pytest.raises(DBAPIError, match="events are append-only: DELETE is not allowed"):
            conn.execute(text("DELETE FROM events"))
        if conn.dialect.name == "sqlite":
            with pytest.raises(DBAPIError, match=r"events are append-only: event \(run_id, seq\) already exists"):
                conn.execute(text("REPLACE INTO events (run_id, seq, at, step, kind, data) "
                                  "VALUES ('r', 1, CURRENT_TIMESTAMP, 0, 'forged', '{}')"))


def test_open_store_migrates_an_empty_database(store_url: str) -> None:
    with open_store(store_url) as store:
        assert tables(store.engine) == TABLES
        assert version(store.engine) == [head_revision()]


def test_current_revision_reads_without_migrating(store_url: str) -> None:
    url = parse_url(store_url)
    engine = make_engine(url)
    try:
        assert current_revision(engine, url) is None
        assert tables(engine) == []
        open_store(store_url).close()
        assert current_revision(engine, url) == "0008"
    finally:
        engine.dispose()
