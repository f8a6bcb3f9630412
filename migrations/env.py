"""Alembic environment for the runner's event log.

``open_store`` runs this with an open connection in ``config.attributes["connection"]``
(inside its own transaction). Run from the command line it builds an engine from
``sqlalchemy.url``. Batch mode is on for SQLite, whose ALTER TABLE is limited.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from runner.store.tables import Base

config = context.config
target_metadata = Base.metadata


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url, or use runner.open_store(url) which migrates on open")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            run_with(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; the triggers differ per dialect")
run_migrations_online()
