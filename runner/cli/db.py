"""``runner db upgrade|current|check``: the schema version, through our Alembic configuration."""

from __future__ import annotations

import click
from rich.text import Text

from ..store import SchemaState, open_store, schema_state
from .options import Env, common
from .render import console, print_json


def state(found: SchemaState) -> dict[str, object]:
    return {"db": found.db, "revision": found.revision, "head": found.head, "at_head": found.at_head}


def describe(found: dict[str, object]) -> str:
    revision = found["revision"] or "none (empty store)"
    return f"{found['db']}: revision {revision}" + (" (head)" if found["at_head"] else f", head is {found['head']}")


@click.group()
def db() -> None:
    """The store's schema: upgrade it, show its revision, check it is current."""


@db.command()
@common
def upgrade(env: Env) -> None:
    """Migrate the store to the latest schema (opening a store does this too)."""
    before = schema_state(env.db).revision
    open_store(env.db).close()
    found = state(schema_state(env.db))
    if env.as_json:
        print_json({**found, "from": before})
        return
    verb = "already at" if before == found["revision"] else f"upgraded from {before or 'empty'} to"
    console().print(Text(f"{found['db']}: {verb} revision {found['revision']} (head)"))


@db.command()
@common
def current(env: Env) -> None:
    """Print the store's schema revision."""
    found = state(schema_state(env.db))
    if env.as_json:
        print_json(found)
    else:
        console().print(Text(describe(found)))


@db.command()
@common
def check(env: Env) -> None:
    """Exit 0 when the store is at the latest schema, 1 (with what to run) when it is behind."""
    found = state(schema_state(env.db))
    if env.as_json:
        print_json(found)
    elif found["at_head"]:
        console().print(Text(describe(found)))
    else:
        click.echo(f"{describe(found)}: run `runner db upgrade`", err=True)
    if not found["at_head"]:
        raise click.exceptions.Exit(1)
