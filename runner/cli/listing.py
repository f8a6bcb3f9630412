"""The table ``runner runs`` prints, fitted to the terminal so the task never vanishes.

Rich would shrink a table that is too wide by cutting every column, the ids and the task included.
So the layout is chosen here: the wide one when the task still gets ``TASK_MIN`` characters,
else a narrow one (without the duration and the cost). The task takes what is left, cut with an ellipsis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich import box
from rich.table import Table
from rich.text import Text

from .._text import one_line
from .._view.summary import seconds, when
from .render import ellipsis

TASK_CHARS = 60     # the task is cut here even on a wide terminal
TASK_MIN = 20       # the task gets at least this many characters when the terminal allows it
TASK_FLOOR = 8      # and never fewer, even if the table then wraps
GAP = 2             # characters between columns
NARROW_STARTED = "%m-%d %H:%M"


@dataclass(frozen=True, slots=True)
class Row:
    """One run as the table shows it."""

    short_id: str
    started: datetime
    status: str
    style: str
    steps: int
    ran: int
    refused: int
    tokens: int
    cost: str  # as ``_view.summary.money`` says it
    duration: float | None
    task: str


@dataclass(frozen=True, slots=True)
class Layout:
    """Column headers, which are right-aligned, and each column's cell for a row (the task comes last)."""

    headers: tuple[str, ...]
    right: frozenset[str]
    cells: Callable[[Row], tuple[str, ...]]
    note: Callable[[Sequence[Row]], str | None]


def _wide(row: Row) -> tuple[str, ...]:
    calls = f"{row.ran} (+{row.refused} refused)" if row.refused else str(row.ran)
    return (row.short_id, when(row.started), row.status, str(row.steps), calls, str(row.tokens), row.cost,
            seconds(row.duration))


def _narrow(row: Row) -> tuple[str, ...]:
    calls = f"{row.ran}+{row.refused}" if row.refused else str(row.ran)
    return (row.short_id, row.started.astimezone(UTC).strftime(NARROW_STARTED), row.status, str(row.steps), calls,
            str(row.tokens))


def _narrow_note(rows: Sequence[Row]) -> str | None:
    return "tools: calls run+refused (refused calls never ran)" if any(r.refused for r in rows) else None


WIDE = Layout(("id", "started (UTC)", "status", "steps", "tool calls", "tokens", "cost", "duration", "task"),
              frozenset({"steps", "tool calls", "tokens", "cost", "duration"}), _wide, lambda rows: None)
NARROW = Layout(("id", "started", "status", "steps", "tools", "tokens", "task"),
                frozenset({"steps", "tools", "tokens"}), _narrow, _narrow_note)


def _fixed_width(layout: Layout, cells: list[tuple[str, ...]]) -> int:
    """The width of every column but the task, gaps included."""
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(layout.headers[:-1])]
    return sum(widths) + GAP * len(widths)


def runs_table(rows: Sequence[Row], width: int) -> tuple[Table, str | None]:
    """The table for ``rows`` in ``width`` columns, and a note to print under it (or None)."""
    tasks = [one_line(row.task) for row in rows]
    longest = min(TASK_CHARS, max([len("task"), *(len(task) for task in tasks)]))
    for layout in (WIDE, NARROW):
        cells = [layout.cells(row) for row in rows]
        room = width - _fixed_width(layout, cells)
        if room >= min(TASK_MIN, longest):
            break
    room = min(max(room, TASK_FLOOR), TASK_CHARS)
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold")
    for name in layout.headers:
        grid.add_column(name, justify="right" if name in layout.right else "left", no_wrap=True)
    for row, row_cells, task in zip(rows, cells, tasks, strict=True):
        status = Text(row_cells[2], style=row.style)
        grid.add_row(row_cells[0], row_cells[1], status, *row_cells[3:], Text(ellipsis(task, room)))
    return grid, layout.note(rows)
