"""The ``runner`` command: run, watch, show, resume, fork, replay, export, and the rest ``runner --help`` lists.

Every command is a thin layer over the Python API. Failures are one line on
stderr, never a traceback; set ``RUNNER_DEBUG=1`` to see the traceback of an
unexpected one. Exit statuses: 0 success; 1 a "no" answer (a replay diverged, a
run did not end ``done``, ``db check`` found the schema behind); 2 a usage mistake;
3 an error (no such run, an unreadable store or fixture); 130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from ..errors import PriceUnknown, RunnerError
from .options import CliError, CliUsageError, reader_gone, shown_if_not_text


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn usage mistakes, library errors and surprises into a one-line ``CliError``."""
    try:
        yield
    except (click.exceptions.Exit, click.Abort, CliError):
        raise
    except BrokenPipeError:  # the reader of stdout has gone: no failure, and nothing more to say
        reader_gone()
    except click.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        raise CliUsageError(exc.format_message() + where) from None
    except click.ClickException:
        raise
    except PriceUnknown as exc:  # a budget given for a model with no price: the command line must change
        raise CliUsageError(str(exc)) from None
    except RunnerError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:
        if os.environ.get("RUNNER_DEBUG"):
            raise
        raise CliError(f"unexpected {type(exc).__name__}: {exc} (RUNNER_DEBUG=1 shows the traceback)") from None


def check_text(args: Sequence[str]) -> None:
    """Refuse arguments that are not text (see ``options.shown_if_not_text``) as a usage error."""
    for arg in args:
        shown = shown_if_not_text(arg)
        if shown is not None:
            raise CliUsageError(f"argument {shown} is not valid UTF-8 text without NUL characters")


class RunnerGroup(click.Group):
    """A group whose parsing and commands fail in one line, and whose commands load on first use.

    ``lazy`` maps a command name to ``module:attr`` under ``runner.cli``: a command
    imports only what it needs, so ``runner runs`` starts fast.
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attr = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
            assert isinstance(command, click.Command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        with one_line_errors():
            if parent is None:
                check_text(args)
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


COMMANDS = {
    "cancel": "pool:cancel",
    "db": "db:db",
    "demo": "run:demo",
    "export": "replay:export",
    "fork": "resume:fork",
    "prune": "prune:prune",
    "replay": "replay:replay",
    "rerun": "rerun:rerun_command",
    "resume": "resume:resume",
    "run": "run:run",
    "runs": "show:runs",
    "show": "show:show",
    "spans": "spans:spans",
    "stats": "stats:stats",
    "submit": "pool:submit",
    "ui": "console:ui",
    "watch": "watch:watch",
    "worker": "pool:worker",
}


@click.group("runner", cls=RunnerGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="durable-agent-runner", prog_name="runner")
def cli() -> None:
    """A durable, traced agent runner: run, inspect, resume, fork, replay and export recorded runs.

    Every command takes --db URL (default: RUNNER_DB, else sqlite:///runs.db) and --json.
    Start with `runner demo`, then `runner runs` and `runner show ID`.

    \b
    Exit status:
      0    success
      1    "no": a replay diverged, a run did not end done, a rerun regressed, the schema is behind
      2    a usage mistake
      3    an error: no such run, an unreadable store or fixture
      130  interrupted (Ctrl-C)
    """


def main(args: Sequence[str] | None = None) -> None:
    """The console script's entry point."""
    try:
        cli.main(args=list(args) if args is not None else None, prog_name="runner")
    except BrokenPipeError:  # met outside a command (a help text, the version)
        reader_gone()


__all__ = ["cli", "main"]
