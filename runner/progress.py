"""Print progress lines, one per model call and one per tool call, as they happen.

``ProgressRecorder`` is a plain recorder: ``run_agent(..., recorder=ProgressRecorder())`` prints to stderr.
Lines are styled on a terminal and plain when piped; the store and the tracer record as before.
``runner run`` and ``runner demo`` use it unless ``--quiet``.
Names and errors come from the model and the tools, so terminal control sequences are stripped first.
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.text import Text

from ._text import clean, one_line, shown_name
from .events import ApprovalRequested, CallTokens, Event, ModelCalled, ToolFinished

ESTIMATED = " (estimated)"  # after a count that is the loop's estimate: the provider reported no usage


def tokens_text(tokens: CallTokens) -> str:
    """Format a model call's tokens as ``progress_line`` and ``runner show`` print them.

    For example ``120 in + 30 out tokens``, with `` (estimated)`` when the provider reported no usage.
    """
    return f"{tokens.input} in + {tokens.output} out tokens" + (ESTIMATED if tokens.estimated else "")


def progress_line(event: Event) -> Text | None:
    """The line for ``event``, or None when it gets none (only model calls, tool calls and approvals do)."""
    if isinstance(event, ModelCalled):
        line = Text(f"step {event.step}  model  {event.latency_s:.2f}s  ")
        if event.error is not None:
            line.append(f"error: {one_line(clean(event.error))}", style="red")
        else:
            line.append("ok", style="green")
            line.append(f"  {tokens_text(event.tokens)}", style="dim")
        return line
    if isinstance(event, ToolFinished):
        line = Text(f"step {event.step}  tool {shown_name(event.name)}  ")
        if not event.ran:
            line.append(f"refused ({event.refused})", style="yellow")
            return line
        line.append(f"{event.duration_s:.2f}s  ")
        line.append("ok" if event.ok else "error", style="green" if event.ok else "red")
        return line
    if isinstance(event, ApprovalRequested):
        line = Text(f"step {event.step}  tool {shown_name(event.name)}  ")
        line.append("awaiting approval", style="bold yellow")
        return line
    return None


class ProgressRecorder:
    """Prints ``progress_line`` of each fact on ``console`` (default: stderr) as it is recorded."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console if console is not None else Console(
            stderr=True, highlight=False, soft_wrap=True, no_color="NO_COLOR" in os.environ)

    def record(self, event: Event) -> None:
        line = progress_line(event)
        if line is not None:
            self.console.print(line)

    def sync(self) -> None:
        pass
