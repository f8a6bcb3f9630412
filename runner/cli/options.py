"""What every command shares: ``--db`` and ``--json`` (one decorator), the store, one-line errors."""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import click

from .._text import one_line
from .._view.filters import parse_when
from ..store import NAME_WIDTH, NoStoreError, RunStore, open_store, shown_url

DEFAULT_DB = "sqlite:///runs.db"
NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
R = TypeVar("R")


# Exit statuses, documented in ``runner --help`` and the README.
EXIT_NO = 1           # the command worked and the answer is "no": a replay diverged, a run did not end done
EXIT_USAGE = 2        # a mistake in the command line (click's own status for usage errors)
EXIT_ERROR = 3        # the command could not do its job: no such run, an unreadable store or fixture
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


def reader_gone() -> NoReturn:
    """Exit 0 without a word when the reader of stdout has gone, as in ``runner show RUN --json | true``.

    Unix tools stop quietly there. stdout is pointed at the null device first, so the
    interpreter's last flush cannot fail again on the closed pipe.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(0)


class CliError(click.ClickException):
    """A failure the user can act on: one cleaned line on stderr, exit status 3."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class CliUsageError(CliError):
    """A mistake in the command line: one line, exit status 2."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True, slots=True)
class Env:
    """The shared options as a command sees them."""

    db: str
    as_json: bool
    from_env: bool = False  # ``db`` came from RUNNER_DB: a command pasted in the same shell finds it there

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
            if create:  # only a read-only open finds no store: a SQLite URL's mode=ro
                raise self._read_only() from None
            raise CliError(f"no store at {exc.location} (runner demo, runner run or runner db upgrade "
                           "creates one)") from None
        if create and store.read_only:
            store.close()
            raise self._read_only()
        try:
            yield store
        finally:
            store.close()

    def _read_only(self) -> CliError:
        command = click.get_current_context().command_path
        return CliError(f"{command} writes to its store, but {shown_url(self.db)} opens it read-only (mode=ro)")

    def hint(self) -> str:
        """``--db URL`` when it is not the default nor from RUNNER_DB, to paste after a suggested command.

        Its password is starred (``shown_url``): hints end in terminals, logs and shared pages.
        """
        return "" if self.db == DEFAULT_DB or self.from_env else f" --db {shlex.quote(shown_url(self.db))}"


def shown_if_not_text(value: str) -> str | None:
    """``value`` quoted with its bytes escaped when it is not text, else None.

    Not text: bytes that are not UTF-8 (Python decodes argv and the environment with
    ``surrogateescape``, so they arrive as lone surrogates that no store, terminal or
    JSON encoder takes), other lone surrogates, and NUL (which no real command line
    holds, and PostgreSQL refuses).
    """
    if not NOT_TEXT.search(value):
        return None
    try:
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no byte decodes to
        shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return "'" + shown.replace("\x00", "\\x00") + "'"


def common(fn: Callable[..., R]) -> Callable[..., R]:
    """Add ``--db URL`` and ``--json`` to a command; it receives them as ``env: Env``."""

    @click.option("--db", "db", default=DEFAULT_DB, envvar="RUNNER_DB", show_default=True, show_envvar=True,
                  metavar="URL", help="Event log: a SQLAlchemy URL (sqlite:///..., postgresql+psycopg://...).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
    @functools.wraps(fn)
    def wrapper(*args: Any, db: str, as_json: bool, **kwargs: Any) -> R:
        shown = shown_if_not_text(db)
        if shown is not None:  # from RUNNER_DB: the command line itself was checked before parsing
            raise CliUsageError(f"--db (or RUNNER_DB) {shown} is not valid UTF-8 text without NUL characters")
        from_env = click.get_current_context().get_parameter_source("db") == click.core.ParameterSource.ENVIRONMENT
        return fn(*args, env=Env(db, as_json, from_env), **kwargs)

    return wrapper


def parse_pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...], *, shape: str = "KEY=VALUE",
                once: str | None = None) -> dict[str, str]:
    """Parse repeatable ``KEY=VALUE`` options into a dict.

    The value may hold ``=`` and may be empty.
    A value without ``=`` is a usage error, and so is a repeated key when ``once`` names what a key is.
    """
    found: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected {shape}, got {value!r}", ctx, param)
        if once is not None and key in found:
            raise click.BadParameter(f"{once} {key!r} is given twice", ctx, param)
        found[key] = val
    return found


def parse_labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--label k=v`` (repeatable) as a dict; a later value for a key wins."""
    return parse_pairs(ctx, param, values)


def label_option(help_text: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    return click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", callback=parse_labels,
                        help=help_text)


def checked_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A name given on the command line (``--agent-name``): printable text of 1 to ``NAME_WIDTH`` characters.

    It names the run in its log, in the store's name column (that wide), on its spans and in
    terminals, so a blank name, a control or invisible format character, or one the column
    would cut is a usage error, before anything runs. None (not given) stays None.
    """
    if value is None:
        return None
    if not value.strip():
        problem = "the name is blank"
    elif len(value) > NAME_WIDTH:
        problem = f"the name is {len(value)} characters long"
    elif not value.isprintable():
        problem = f"{value!r} holds a control or invisible character"  # repr escapes each of them
    else:
        return value
    raise click.BadParameter(f"{problem}: a name is 1 to {NAME_WIDTH} printable characters", ctx, param)


MAX_LIMIT = 1_000_000_000  # any store's size; past it, a number is a typo (and 2**63 overflows the database)


def when_option(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """``--since``/``--until``/``--before WHEN`` (a date, a time or an age, as ``parse_when`` reads it)."""
    if value is None:
        return None
    try:
        return parse_when(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
