"""A stored run as a readable timeline of rich ``Text`` lines: ``_view.timeline``'s entries, rendered.

The entries are the console's run page's too (``ui/templates/_run_live.html``), so the two show
the same steps, calls, decisions, resumes, inheritance and calls in doubt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from rich.text import Text

from .._log.statuses import STATUSES, Status
from .._text import clean, plural, shown_name
from .._view.activity import active_seconds
from .._view.doubts import InDoubt, ends, in_doubt
from .._view.inherited import Inherited, inherited_shown
from .._view.kinds import CallOutcome
from .._view.lineage import Link, origin_text, parent_text
from .._view.summary import Totals, money, refused_in, seconds, when
from .._view.timeline import (
    AskedEntry,
    CancelEntry,
    ChildEntry,
    DecidedEntry,
    EndEntry,
    ModelEntry,
    PartialEntry,
    RejectedEntry,
    RequeuedEntry,
    ResumedEntry,
    StepEntry,
    Timeline,
    ToolEntry,
    args_text,
    entries,
)
from ..events import ApprovalDecided, Event, ModelCalled, RunFinished, RunStarted
from ..messages import ToolCall
from ..progress import ESTIMATED, tokens_text
from ..store import RunSummary, StoredRun
from .costs import run_cost
from .render import ERROR_STYLE, WAITING_STYLE, cut, status_style

SHOWN_CHARS = 300
# What ``show`` adds to "not run" for the refusals that durable execution brings.
REFUSAL_NOTE = {"denied": " (denied)", "in_doubt": " (in doubt)"}


def _block(value: str, indent: str, style: str = "") -> Iterator[Text]:
    """Cleaned multi-line text, each line indented."""
    for line in clean(value).splitlines() or [""]:
        yield Text(indent + line, style=style)


def status_label(run: RunSummary) -> str:
    """The status, saying so when an unfinished run's process is gone (``running (dead)``)."""
    return f"{run.status} ({run.liveness})" if run.gone else run.status


def header(run: StoredRun, facts: Sequence[Event], children: Sequence[Link] = (),
           tree: Totals | None = None) -> Iterator[Text]:
    """Its id and status, its figures (with its sub-agents' ``tree``, when it has any), model, lineage and task."""
    title = Text("run ", style="bold")
    title.append(shown_name(run.run_id), style="bold")
    title.append("  ")
    title.append(status_label(run), style=status_style(run.status, run.liveness))
    yield title
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    active = seconds(active_seconds(run.events, facts))
    refused = refused_in(run)
    calls = plural(run.tool_calls, "tool call") + (f" (+{refused} refused)" if refused else "")
    cost = run_cost(run)
    if cost is not None and run.costs_unknown:
        cost += f" (cost of {plural(run.costs_unknown, 'model call')} unknown)"
    yield Text(f"started {when(run.started_at)} UTC, took {seconds(duration)} (active {active}); "
               f"{plural(run.steps, 'step')}, {calls}, {plural(run.tokens, 'token')}" + (f", {cost}" if cost else ""),
               style="dim")
    if tree is not None:
        yield Text(f"with its sub-agents: {spent_text(tree)}", style="dim")
    model = shown_name(run.model) + (f" ({shown_name(run.provider)})" if run.provider else "")
    extra = f", agent {shown_name(run.agent_name)}" if run.agent_name else ""
    started_by = next((f.by for f in facts if isinstance(f, RunStarted)), None)
    extra += f", started by {shown_name(started_by)}" if started_by else ""
    yield Text(f"model {model}{extra}; trace {run.trace_id}", style="dim")
    if run.labels:
        # A value is free text: cleaned as such, then what is still invisible escaped, as in a name.
        labels = ", ".join(f"{shown_name(k)}={shown_name(clean(v))}" for k, v in run.labels.items())
        yield Text(f"labels {labels}", style="dim")
    if run.parent_run_id:
        started = next((f for f in facts if isinstance(f, RunStarted)), None)
        origin, at = (started.origin, started.forked_at_step) if started is not None else (None, None)
        yield Text(parent_text(run.parent_run_id, origin, at, run.parent_call_id), style="dim")
    for child in children:
        how = origin_text(child.origin, child.forked_at_step, child.call_id)
        yield Text(f"child run {shown_name(child.run_id)} ({how + ', ' if how else ''}{clean(child.status)})",
                   style="dim")
    yield Text("task", style="bold")
    yield from _block(run.task, "  ")


def timeline(run: StoredRun, *, full: bool = False, children: Sequence[Link] = (),
             carried: Inherited | None = None) -> Iterator[Text]:
    """List every step of ``run``: what it ``carried`` over, model text and calls, observations and errors.

    It also shows resumes, approval requests, calls left in doubt and the stop. Observations are cut unless ``full``.
    """
    yield from rendered(run, Timeline(entries(run), carried, in_doubt(run), ends(run)), full=full, children=children)


def rendered(run: StoredRun, shown: Timeline, *, full: bool = False, children: Sequence[Link] = (),
             tree: Totals | None = None) -> Iterator[Text]:
    """``run``'s header, then its timeline ``shown`` as lines; ``tree``: what it and its sub-agents spent."""
    limit = None if full else SHOWN_CHARS
    yield from header(run, run.facts, children, tree)
    yield from doubts(shown.doubts)
    if shown.inherited is not None:
        yield from inherited_part(shown.inherited, run.task, limit)
    for entry in shown.entries:
        match entry:
            case StepEntry():
                line = Text(f"\nstep {entry.step}" + (" (continued)" if entry.continued else ""), style="bold")
                tokens = plural(entry.tokens, "token") + (ESTIMATED if entry.estimated else "")
                line.append(f"  {seconds(entry.seconds)}, {tokens}", style="dim")
                yield line
            case ModelEntry():
                yield from model_call(entry.call, limit)
            case PartialEntry():
                yield from partial_reply(entry)
            case ToolEntry():
                yield from tool_call(entry, limit)
            case AskedEntry():
                line = Text(f"  approval needed: {shown_name(entry.fact.name)}", style=WAITING_STYLE)
                line.append(f" [{shown_name(entry.fact.call_id)}]", style="dim")
                yield line
            case DecidedEntry():
                yield decided(entry.fact)
            case ResumedEntry():
                yield from resumed(entry)
            case CancelEntry():
                yield Text(f"\ncancel requested by {shown_name(entry.fact.requested_by)}",
                           style=status_style(Status.CANCELLED))
            case RequeuedEntry():
                limits = ", ".join(f"{shown_name(name)} {value}" for name, value in entry.limits)
                who = shown_name(clean(entry.fact.requeued_by))
                yield Text(f"\nsent back to its queue by {who}", style=WAITING_STYLE)
                yield Text(f"  limits: {limits or 'as they were'}", style="dim")
            case RejectedEntry():
                yield Text("  output rejected" + (" (plain text)" if entry.fact.call_id is None else ""),
                           style=ERROR_STYLE)
                yield from _block(cut(entry.fact.error, limit), "    ", "red")
            case EndEntry():
                yield from stop(entry.fact)
            case ChildEntry():
                yield from child_lines(entry, "    ")
    if not shown.finished:
        yield Text(f"\nno run_finished event: the run is {run.liveness} "
                   f"(last event {when(run.events[-1].at) if run.events else '-'} UTC)", style="yellow")


def child_lines(entry: ChildEntry, indent: str) -> Iterator[Text]:
    """A sub-agent's child run under its call: its id, status and figures, the calls it waits on, its own children."""
    run = entry.run
    line = Text(f"{indent}↳ sub-agent {shown_name(run.agent_name or '?')}: run {shown_name(entry.short)} ", style="dim")
    line.append(status_label(run), style=status_style(run.status, run.liveness))
    own = Totals.of(run)
    line.append(f"  {spent_text(own)}" + (f" (with its sub-agents: {spent_text(entry.tree)})"
                                          if entry.tree != own else ""), style="dim")
    yield line
    for call in entry.pending:
        asked = Text(f"{indent}  approval needed: {shown_name(call.name)}", style=WAITING_STYLE)
        asked.append(f" [{shown_name(call.call_id)}] of run {shown_name(entry.short)}", style="dim")
        yield asked
    for below in entry.timeline.entries:
        if isinstance(below, ChildEntry):
            yield from child_lines(below, indent + "  ")


def spent_text(spent: Totals) -> str:
    """``1,234 tokens, $0.0120``: the cost left out when none of it is known."""
    return plural(spent.tokens, "token") + (f", {spent.cost}" if spent.cost_known_usd or not spent.costs_unknown
                                            else "")


def doubts(found: Sequence[InDoubt]) -> Iterator[Text]:
    """The calls a crash left in doubt, each with what a resume does with it."""
    if found:
        yield Text("calls left in doubt by a crash", style=ERROR_STYLE)
    for doubt in found:
        line = Text(f"  {shown_name(doubt.name)}", style="bold")
        line.append(f" [{shown_name(doubt.call_id)}]", style="dim")
        line.append(f": {doubt.rule}")
        yield line


def model_call(call: ModelCalled, limit: int | None) -> Iterator[Text]:
    line = Text("  model", style="bold cyan")
    cost = f", {money(call.cost_usd)}" if call.cost_usd is not None else ""
    line.append(f"  {seconds(call.latency_s)}, {tokens_text(call.tokens)}{cost}", style="dim")
    yield line
    if call.error:
        yield from _block(f"model error ({call.error_type or 'error'}): {call.error}", "    ", ERROR_STYLE)
    reply = call.reply
    if reply is None:
        return
    yield from reply_lines(reply.content, reply.tool_calls, limit)
    if reply.stop_reason:
        yield Text(f"    stop reason: {clean(reply.stop_reason)}", style="dim")


def partial_reply(entry: PartialEntry) -> Iterator[Text]:
    """The text of a reply still being written, or cut off before it came: what was logged of it."""
    line = Text("  model", style="bold cyan")
    line.append("  streaming: the reply so far" if entry.live else
                "  interrupted: the reply so far (it never came; a resume asks the model again)", style=WAITING_STYLE)
    yield line
    yield from _block(entry.text, "    ")


def reply_lines(content: str, calls: Sequence[ToolCall], limit: int | None) -> Iterator[Text]:
    """A reply's text and its tool calls, under its ``model`` line."""
    if content:
        yield from _block(content, "    ")
    for tool_call in calls:
        line = Text(f"    → {shown_name(tool_call.name)}", style="bold")
        line.append(f"({clean(cut(args_text(tool_call.args), limit))})")
        line.append(f"  [{shown_name(tool_call.id)}]", style="dim")
        yield line


def inherited_part(carried: Inherited, task: str, limit: int | None) -> Iterator[Text]:
    """The conversation a fork or follow-up carried over, under the parent's steps, swapped observations marked.

    The system message and the run's own task (a fork's is its parent's) are left out: the header has the task.
    """
    parent = shown_name(carried.parent_run_id)
    before = f"before its step {carried.forked_at_step}" if carried.forked_at_step else "its whole conversation"
    yield Text(f"\ninherited from run {parent}, {before}", style=WAITING_STYLE)
    if not carried.parent_in_store:
        yield Text("  (that run is not in the store: which step each message came from, and which observation "
                   "a fork swapped, cannot be told)", style="dim")
    step: int | None = 0
    for item in inherited_shown(carried, task):
        message = item.message
        if item.parent_step != step and item.parent_step:
            yield Text(f"\nstep {item.parent_step} of run {parent} (inherited)", style="bold")
        step = item.parent_step
        match message["role"]:
            case "user":
                yield Text("  user", style="bold")
                yield from _block(cut(message["content"], limit), "    ")
            case "assistant":
                yield Text("  model", style="bold cyan")
                calls = [ToolCall(c["id"], c["name"], c["args"]) for c in message["tool_calls"]]
                yield from reply_lines(message["content"], calls, limit)
            case "tool":
                line = Text(f"  tool {shown_name(message['name'])}", style="bold magenta")
                line.append(f" [{shown_name(message['tool_call_id'])}]", style="dim")
                if item.swapped:
                    line.append("  swapped", style=WAITING_STYLE)
                yield line
                yield from _block(cut(message["content"], limit), "    ")
                if item.original is not None:
                    yield from _block(cut(f"original: {item.original}", limit), "    ", "dim")
            case _:
                pass


def tool_call(entry: ToolEntry, limit: int | None) -> Iterator[Text]:
    """A tool call with its result; one without a result in the log says so."""
    finished = entry.finished
    if finished is None and entry.outcome == CallOutcome.WAITING:
        yield Text(f"  tool {shown_name(entry.name)} [{shown_name(entry.call_id)}] waits on its sub-agent's run",
                   style=WAITING_STYLE)
        return
    if finished is None:
        yield Text(f"  ! {shown_name(entry.name)} [{shown_name(entry.call_id)}] started but has no result in the log",
                   style=ERROR_STYLE)
        return
    line = Text(f"  tool {shown_name(finished.name)}", style="bold magenta")
    line.append(f" [{shown_name(finished.call_id)}]", style="dim")
    ran = "" if finished.ran else ", not run" + REFUSAL_NOTE.get(finished.refused or "", "")
    again = f", attempt {entry.attempt}" if entry.attempt > 1 else ""
    line.append(f"  {seconds(finished.duration_s)}{ran}{again}", style="dim")
    if entry.failed:
        line.append("  error", style=ERROR_STYLE)
    yield line
    yield from _block(cut(str(finished.observation), limit), "    ", ERROR_STYLE if entry.failed else "")
    late = entry.late
    if late is not None:
        yield Text(f"    returned late, after {seconds(late.duration_s)}" + ("" if late.ok else ": error"),
                   style="bold yellow" if late.ok else ERROR_STYLE)
        yield from _block(cut(late.observation, limit), "      ", "" if late.ok else ERROR_STYLE)


def resumed(entry: ResumedEntry) -> Iterator[Text]:
    """A resume boundary: after what, by whom, with which model, limits and decisions."""
    fact = entry.fact
    why = f" after {fact.reason}" if fact.reason in STATUSES else f": {clean(fact.reason)}"
    yield Text(f"\nresumed{why}", style=WAITING_STYLE)
    model = f" with model {shown_name(fact.model)}" + (f" ({shown_name(fact.provider)})" if fact.provider else "") \
        if fact.model else ""
    yield Text(f"  by {shown_name(clean(entry.who))}{model}", style="dim")
    limits = ", ".join(f"{shown_name(name)} {value}" for name, value in entry.limits)
    yield Text(f"  limits: {limits or 'none'}", style="dim")
    if fact.decisions:
        yield Text("  decisions: " + ", ".join(f"{shown_name(call_id)} {decision_text(verdict)}"
                                              for call_id, verdict in fact.decisions.items()), style="dim")


def decided(fact: ApprovalDecided) -> Text:
    """A logged decision: on which call, which way (and why), by whom."""
    why = f" ({clean(fact.reason)})" if fact.reason else ""
    return Text(f"  decision: {shown_name(fact.call_id)} {'approved' if fact.approved else 'denied'}{why} by "
                f"{shown_name(fact.decided_by)}", style="dim")


def decision_text(verdict: bool | str) -> str:
    if verdict is True:
        return "approved"
    return f"denied ({clean(verdict)})" if isinstance(verdict, str) and verdict else "denied"


def stop(fact: RunFinished) -> Iterator[Text]:
    if fact.status == Status.DONE and fact.output is not None:  # a typed result: its JSON, indented
        yield Text("\ndone, output:", style="bold green")
        yield from _block(json.dumps(fact.output, indent=2, ensure_ascii=False), "  ")
        return
    if fact.status == Status.DONE:
        yield Text("\ndone", style="bold green")
        yield from _block(fact.answer or "", "  ")
        return
    yield Text(f"\nstopped: {clean(fact.status)}", style=status_style(fact.status))
    yield from _block(fact.error or "", "  ", "red")
