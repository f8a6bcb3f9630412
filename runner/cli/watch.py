"""``runner watch RUN``: follow a run from any process sharing its store, event by event, until it stops.

The store is polled for the events committed after the last one seen (``RunStore.events_past``)
and for how the run stands (``run_summary``); nothing is written. A streamed reply's ``model_delta``
facts print as one growing line of text; tool calls as they start and finish; the end with its
status. ``--json`` prints each event as ``runner show --json`` lists them, one per line.
"""

from __future__ import annotations

import json
import time
from typing import Final

import click
from rich.console import Console
from rich.text import Text

from .._log.statuses import Status
from .._text import clean, one_line, shown_name
from .._view.summary import event_json
from .._view.timeline import args_text
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Event,
    ModelCalled,
    ModelDelta,
    RunFinished,
    RunResumed,
    RunStarted,
    StepStarted,
    ToolFinished,
    ToolStarted,
    decode,
)
from ..progress import progress_line
from ..store import RunSummary, StoredEvent
from .options import EXIT_INTERRUPTED, EXIT_NO, Env, common
from .render import console, cut, status_style
from .streamed import Inline

POLL_S: Final = 0.1  # between two reads of the store while nothing new is logged
SHOWN_CHARS: Final = 200  # of a call's arguments and observation


class Follower:
    """Prints a run's facts as they come: a reply's text inline, one line for each call and each step."""

    def __init__(self, out: Console, run_id: str, short: str) -> None:
        self.out, self.run_id, self.short = out, run_id, short
        self.inline = Inline()
        self.ends_at: int | None = None  # where the text printed of the reply under way ends; None: no reply is
        self.last = ""  # the text of the latest reply

    def line(self, text: Text) -> None:
        self.inline.end_line()
        self.out.print(text)

    def event(self, stored: StoredEvent) -> None:
        self.fact(decode(stored.kind, stored.data, stored.step, self.run_id))

    def fact(self, fact: Event) -> None:
        match fact:
            case RunStarted(task=task, model=model):
                self.line(Text(f"run {shown_name(self.short)}: {one_line(task)}", style="bold"))
                self.line(Text(f"model {shown_name(model)}", style="dim"))
            case RunResumed(reason=reason):
                self.cut_off()
                self.line(Text(f"\nresumed ({clean(reason)})", style="bold yellow"))
            case StepStarted(step=step):
                self.line(Text(f"\nstep {step}", style="bold"))
            case ModelDelta(text=text, offset=offset):
                if self.ends_at is not None and offset < self.ends_at:  # the same reply again, from its start
                    self.cut_off()
                self.inline.write(text)
                self.ends_at = offset + len(text)
            case ModelCalled(reply=reply):
                content = reply.content if reply is not None else ""
                if self.ends_at is None and content:  # not streamed: the whole reply, now
                    self.inline.write(content)
                self.last = content
                self.ends_at = None
                self.progress(fact)
            case ToolStarted(step=step, name=name, args=args):
                self.line(Text(f"step {step}  tool {shown_name(name)}  started  "
                               f"{one_line(cut(args_text(args), SHOWN_CHARS))}"))
            case ToolFinished(observation=observation):
                self.progress(fact)
                self.out.print(Text(f"  {one_line(cut(str(observation), SHOWN_CHARS))}", style="dim"))
            case ApprovalRequested():
                self.progress(fact)
            case ApprovalDecided(call_id=call_id, approved=approved, decided_by=by):
                self.line(Text(f"decision: {shown_name(call_id)} {'approved' if approved else 'denied'} by "
                               f"{shown_name(by)}", style="dim"))
            case CancelRequested(requested_by=by):
                self.line(Text(f"cancel requested by {shown_name(by)}", style="yellow"))
            case RunFinished(status=status, answer=answer, error=error):
                self.finished(status, answer, error)
            case _:
                pass

    def cut_off(self) -> None:
        """The reply under way never came (its process died, or it is asked again): say so after its text."""
        if self.ends_at is not None:
            self.line(Text("(the reply was cut off here)", style="dim"))
        self.ends_at = None

    def progress(self, fact: Event) -> None:
        shown = progress_line(fact)
        if shown is not None:
            self.line(shown)

    def finished(self, status: Status, answer: str | None, error: str | None) -> None:
        self.line(Text(f"\n{status}", style=status_style(status)))
        if status == Status.DONE and answer and answer.strip() != self.last.strip():  # not its last reply's text
            self.out.print(Text(clean(answer)))
        elif error:
            self.out.print(Text(clean(error), style="red"))


def stopped(summary: RunSummary) -> bool:
    """Whether the run no longer goes: it ended (done, awaiting approval, a limit, an error), or its process is gone."""
    return summary.finished or summary.gone


@click.command()
@click.argument("run_ref", metavar="RUN")
@common
def watch(env: Env, run_ref: str) -> None:
    """Follow RUN as it goes, from any process sharing its store, until it stops.

    Prints its events so far, then each one as it is committed: the model's text as it is written
    (a model that streams), tool calls as they start and finish, decisions, and the end. Exits 0 when
    it ends done, 1 when it stops otherwise (awaiting approval, a limit, an error, cancelled, its
    process gone). Ctrl-C stops watching, not the run. --json: each event as `runner show --json` lists
    them, one per line. RUN is a run id or any unique prefix of one, as `runner runs` prints.
    """
    with env.store() as store:
        run_id = store.resolve_run_id(run_ref)
        short = store.short_ids([run_id])[run_id]
        follower = None if env.as_json else Follower(console(), run_id, short)
        seq = 0
        try:
            while True:
                summary = store.run_summary(run_id)  # first: the events read after it hold its end, if it ended
                for stored in store.events_past(run_id, seq):
                    seq = stored.seq
                    if follower is None:
                        click.echo(json.dumps(event_json(stored), ensure_ascii=True, default=str))
                    else:
                        follower.event(stored)
                if stopped(summary):
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            if follower is not None:
                follower.inline.end_line()
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    if follower is not None:
        follower.inline.end_line()
        if not summary.finished:
            follower.out.print(Text(f"\nthe run's process is gone ({summary.liveness}): runner show {short}"
                                    f"{env.hint()} says how to resume it", style="bold red"))
    if summary.status != Status.DONE:
        raise click.exceptions.Exit(EXIT_NO)
