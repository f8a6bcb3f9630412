"""What every command shares: ``--db`` and ``--json`` (one decorator), the store, one-line errors."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ..store import RunStore, open_store
from ..store.migrate import NoStoreError
from .render import one_line

DEFAULT_DB = "sqlite:///runs.db"
R = TypeVar("R")


class CliError(click.ClickException):
    """A failure the user can act on: one cleaned line on stderr, exit status 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class CliUsageError(CliError):
    """A mistake in the command line: one line, exit status 2."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class Env:
    """The shared options as a command sees them."""

    db: str
    as_json: bool

    @contextmanager
    def store(self, *, create: bool = False) -> Iterator[RunStore]:
        """The store at ``--db``, opened for the command and closed after it.

        Only commands that record runs (``create``) may create or migrate a store; the
        others open it read-only, so a mistyped ``--db`` or an empty file is an error,
        never a new store, and a store in a read-only directory can be inspected.
        """
        try:
            store = open_store(self.db, read_only=not create)
        except NoStoreError as exc:
            raise CliError(f"no store at {exc.location} (runner demo, runner run or runner db upgrade "
                           "creates one)") from None
        try:
            yield store
        finally:
            store.close()

    def hint(self) -> str:
        """``--db URL`` when it is not the default, to paste after a suggested command."""
        return "" if self.db == DEFAULT_DB else f" --db {shlex.quote(self.db)}"


def common(fn: Callable[..., R]) -> Callable[..., R]:
    """Add ``--db URL`` and ``--json`` to a command; it receives them as ``env: Env``."""

    @click.option("--db", "db", default=DEFAULT_DB, envvar="RUNNER_DB", show_default=True, show_envvar=True,
                  metavar="URL", help="Event log: a SQLAlchemy URL (sqlite:///..., postgresql+psycopg://...).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
    @functools.wraps(fn)
    def wrapper(*args: Any, db: str, as_json: bool, **kwargs: Any) -> R:
        return fn(*args, env=Env(db, as_json), **kwargs)

    return wrapper


def parse_labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--label k=v`` (repeatable) as a dict; a value without ``=`` is a usage error."""
    labels: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", ctx, param)
        labels[key] = val
    return labels


def label_option(help_text: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    return click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", callback=parse_labels,
                        help=help_text)
