"""Terminal output: durations, rich tables and JSON.

Everything a model, a tool or a user typed into a task is untrusted: it reaches the
terminal through ``runner._text.clean``. ``--json`` output is never cleaned: JSON
escapes every control character itself, so scripts see the exact text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._log.records import LIVE
from .._log.statuses import STATUSES, Status
from .._text import clean, plural
from .options import reader_gone

PIPE_WIDTH = 160
ERROR_STYLE = "bold red"
WAITING_STYLE = "bold yellow"
# The colour of each status, wherever the CLI prints one (runs, show, stats, prune, run): a stop is an error.
STATUS_STYLES: Final[Mapping[str, str]] = {
    **dict.fromkeys(STATUSES, ERROR_STYLE),
    Status.DONE: "green", Status.AWAITING_APPROVAL: WAITING_STYLE, Status.RUNNING: "yellow", Status.QUEUED: "cyan",
}


def status_style(status: str, liveness: str = LIVE) -> str:
    """The colour of ``status``; a running run whose process is gone shows as an error."""
    if status == Status.RUNNING and liveness != LIVE:
        return ERROR_STYLE
    return STATUS_STYLES.get(status, ERROR_STYLE)  # a status a newer runner wrote: shown as a stop


def cut(text: str, limit: int | None) -> str:
    """``text`` up to ``limit`` characters, with a note of how much was left out."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({plural(len(text) - limit, 'more char')})"


def ellipsis(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, the last one ``…`` when it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _PipedConsole(Console):
    """A console for which a reader that stops early, as in ``runner runs | head``, is no failure.

    It exits 0 as the ``--json`` output does. Rich's own console exits 1, which means "no" here.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        reader_gone()


def console() -> Console:
    """A console on the current stdout: colour only on a terminal, and never with NO_COLOR.

    Text is soft-wrapped (long lines left to the terminal); tables get the terminal's
    width, or ``COLUMNS``, or ``PIPE_WIDTH`` when the output is not a terminal.
    """
    out = _PipedConsole(highlight=False, no_color="NO_COLOR" in os.environ, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out.width = PIPE_WIDTH
    return out


def error_console() -> Console:
    return Console(stderr=True, highlight=False, no_color="NO_COLOR" in os.environ)


def text(value: object, style: str = "") -> Text:
    """Untrusted text as a rich ``Text``: cleaned, and never parsed as markup."""
    return Text(clean(value), style=style)


def table(*columns: str, right: Iterable[str] = (), no_wrap: Iterable[str] = ()) -> Table:
    """A plain table: a header rule, no borders, the given columns right-aligned or unwrapped."""
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    right, no_wrap = set(right), set(no_wrap)
    for name in columns:
        out.add_column(name, justify="right" if name in right else "left", no_wrap=name in no_wrap,
                       overflow="ellipsis" if name not in no_wrap else "fold")
    return out


def print_json(value: Any) -> None:
    """Exact JSON on stdout: every control and non-ASCII character escaped by JSON itself."""
    import click

    click.echo(json.dumps(value, indent=2, ensure_ascii=True, default=str))


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least 1
    return ordered[int(rank) - 1]


def median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
