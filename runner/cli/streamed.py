"""A run's replies printed on stdout as the model writes them, for ``runner run``, ``demo``, ``resume`` and ``fork``.

The run is driven on this thread with a listener (``_run``'s cores take one): each piece of text
is printed as it comes, and the progress lines (stderr) are printed by the same thread, after
the text of the reply they follow, so the two never cut into each other. With ``--json`` the run
still streams (another process can ``runner watch`` it) but prints no text; ``--no-stream`` runs
as before streaming existed. A model without ``stream`` prints nothing until the run ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from .._log.statuses import Status
from .._loop.results import AgentResult
from .._run.build import ContinueOptions
from .._text import clean
from ..events import Event, ModelCalled, RunFinished, RunResumed, RunStarted
from ..recorder import Recorder

R = TypeVar("R")

NO_STREAM = click.option("--no-stream", "no_stream", is_flag=True,
                         help="Print the answer once the run ends, not as the model writes it (and do not ask a "
                              "model that can stream to).")


class Inline:
    """Text printed on stdout as it comes (terminal control sequences dropped), its line ended on demand."""

    def __init__(self) -> None:
        self.open = False  # text is printed and its line not ended

    def write(self, text: str) -> None:
        shown = clean(text)
        click.echo(shown, nl=False)
        if shown:
            self.open = not shown.endswith("\n")

    def end_line(self) -> None:
        """End the line the text left open, if it did."""
        if self.open:
            self.open = False
            click.echo("")


class Shown:
    """Prints each streamed reply's text on stdout, piece by piece, and hands every fact to ``progress``.

    A recorder and a listener at once: both are told on the run's thread (``drive``'s), in order. A
    sub-agent's child run has them too, driven inside its parent's call (its facts between its own
    start and end) or on a thread of its own: its text is left to its log (``runner watch CHILD``), its
    progress lines printed as ever. ``last``: the run's latest reply's text, for ``report``.
    """

    def __init__(self, progress: Recorder | None, *, stream: bool = True, as_json: bool = False) -> None:
        self.progress, self.stream = progress, stream
        self.prints = stream and not as_json
        self.inline = Inline()
        self.reply: list[str] = []  # the pieces of the reply under way
        self.last = ""
        self.thread = threading.get_ident()  # the run's own (drive's)
        self.depth = 0  # on that thread: 1 inside the run's own facts, more inside a child's

    @property
    def recorder(self) -> Recorder | None:
        """The recorder the run gets: this one when it prints text, else the progress printer as it was."""
        return self if self.prints else self.progress

    @property
    def listen(self) -> Callable[[int, str], None] | None:
        """The listener the run gets: ``piece`` when it prints text."""
        return self.piece if self.prints else None

    def options(self) -> dict[str, Any]:
        """The run options that go with it: its ``recorder``, and ``stream`` on unless ``--no-stream``."""
        return {"recorder": self.recorder, "stream": self.stream}

    def piece(self, step: int, text: str) -> None:
        """A piece of a reply's text, printed at once (terminal control sequences dropped)."""
        if threading.get_ident() != self.thread or self.depth != 1:  # a sub-agent's child run's
            return
        self.reply.append(text)
        if self.prints:
            try:
                self.inline.write(text)
            except BrokenPipeError:  # the reader has gone: the run goes on, and the report finds out
                self.prints = False

    def record(self, event: Event) -> None:
        if threading.get_ident() == self.thread:
            match event:
                case RunStarted() | RunResumed():
                    self.depth += 1
                case RunFinished():
                    self.depth -= 1
                case ModelCalled() if self.depth == 1:  # its reply is in: its line ends before the progress line
                    self.end_line()
                    self.last = "".join(self.reply)
                    self.reply.clear()
                case _:
                    pass
        if self.progress is not None:
            self.progress.record(event)

    def sync(self) -> None:
        if self.progress is not None:
            self.progress.sync()

    def end_line(self) -> None:
        """End the line streamed text left open."""
        try:
            self.inline.end_line()
        except BrokenPipeError:
            self.prints = False

    def showed(self, result: AgentResult) -> bool:
        """Whether the run's plain answer was streamed already: its last reply's text, printed."""
        answer = (result.answer or "").strip()
        plain = result.status == Status.DONE and result.output is None
        return self.prints and plain and bool(answer) and self.last.strip() == answer


def drive(shown: Shown, go: Callable[[], R]) -> R:
    """``go()`` (the run) on this thread, ending the line its streamed text left open however it ends (Ctrl-C too)."""
    shown.thread = threading.get_ident()
    try:
        return go()
    finally:
        shown.end_line()


def continue_options(options: dict[str, Any]) -> tuple[int | None, int | None, ContinueOptions]:
    """``max_steps`` and ``token_budget`` apart from the other options, as ``forked_core`` takes them."""
    rest = dict(options)
    return rest.pop("max_steps", None), rest.pop("token_budget", None), cast("ContinueOptions", rest)
