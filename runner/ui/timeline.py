"""A run's log as the run page shows it: one entry per model call, tool call, approval, resume and end.

The entries are plain values; the template escapes every text in them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._log.records import LIVE, StoredRun
from .._log.state import RunState, fold
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    ModelCalled,
    RunFinished,
    RunResumed,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
)
from ..messages import ToolTraits


@dataclass(slots=True)
class Entry:
    """One line of the timeline: its ``kind`` picks how the template draws it, the rest are its values."""

    kind: str
    step: int
    at: datetime
    title: str = ""
    text: str = ""
    detail: str = ""
    outcome: str = ""
    seconds: float | None = None
    tokens: str = ""
    call_id: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (call id, tool, arguments as JSON)


@dataclass(frozen=True, slots=True)
class InDoubt:
    """A call a crash left in doubt, and what a resume will do with it."""

    call_id: str
    name: str
    rule: str


def args_text(args: Any) -> str:
    """A call's arguments as JSON (text arguments as they are)."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)


def entries(run: StoredRun) -> list[Entry]:
    """The run's timeline, in log order."""
    found: list[Entry] = []
    tools: dict[str, Entry] = {}
    for event, fact in zip(run.events, run.facts, strict=True):
        at = event.at
        match fact:
            case StepStarted(step=step):
                found.append(Entry("step", step, at, title=f"step {step}"))
            case ModelCalled():
                tokens = fact.tokens
                reply = fact.reply
                found.append(Entry(
                    "model", fact.step, at, title="model call", text=reply.content if reply else "",
                    detail=fact.error or "", outcome="error" if fact.error else "ok", seconds=fact.latency_s,
                    tokens=f"{tokens.input} in, {tokens.output} out" + (" (estimated)" if tokens.estimated else "")
                    + (f" · ${fact.cost_usd:.4f}" if fact.cost_usd is not None else ""),
                    calls=[(c.id, c.name, args_text(c.args)) for c in (reply.tool_calls if reply else [])]))
            case ToolStarted(call_id=call_id):
                opened = Entry("tool", fact.step, at, title=fact.name, detail=args_text(fact.args), call_id=call_id,
                               outcome="running" if run.liveness == LIVE else "in doubt")
                if fact.attempt > 1:
                    opened.text = f"attempt {fact.attempt}"
                tools[call_id] = opened
                found.append(opened)
            case ToolFinished(call_id=call_id):
                outcome = ("ok" if fact.ok else "error") if fact.ran else \
                    ("in doubt" if fact.refused == "in_doubt" else "refused")
                entry = tools.pop(call_id) if call_id in tools else None
                if entry is None:  # refused before running: no start
                    entry = Entry("tool", fact.step, at, title=fact.name, call_id=call_id)
                    found.append(entry)
                entry.text, entry.outcome, entry.seconds = fact.observation, outcome, fact.duration_s
                if fact.refused:
                    entry.tokens = fact.refused.replace("_", " ")
            case ApprovalRequested(call_id=call_id):
                found.append(Entry("asked", fact.step, at, title=fact.name, detail=args_text(fact.args),
                                   call_id=call_id))
            case ApprovalDecided(call_id=call_id):
                verdict = "approved" if fact.approved else "denied"
                found.append(Entry("decided", fact.step, at, title=verdict, text=fact.reason or "",
                                   detail=fact.decided_by, call_id=call_id, outcome=verdict))
            case RunResumed():
                found.append(Entry("resumed", fact.step, at, title="resumed", text=fact.reason, detail=fact.owner))
            case RunFinished():
                found.append(Entry("end", fact.step, at, title=fact.status, text=fact.answer or "",
                                   detail=fact.error or "", outcome=fact.status))
            case StepFinished(step=step):
                begun = next((e for e in reversed(found) if e.kind == "step" and e.step == step), None)
                if begun is not None:
                    begun.seconds = (at - begun.at).total_seconds()
            case _:
                pass
    return found


def doubt_rule(traits: ToolTraits | None) -> str:
    """What a resume does with a call in doubt whose tool had ``traits`` when it started."""
    if traits is None or not traits["side_effects"]:
        return "runs again on resume: its tool has no side effects"
    if traits["idempotency_key"] is not None:
        return "runs again on resume with its idempotency key, so the side effect happens once"
    if traits.get("idempotent", False):
        return "runs again on resume with the same arguments: its tool is idempotent, so the side effect happens once"
    return "not run again: the model is told it may have run (the tool has side effects)"


def in_doubt(run: StoredRun, state: RunState | None = None) -> list[InDoubt]:
    """The calls a crash left in doubt (started, never finished, the process gone), with their rule."""
    if run.liveness == LIVE:
        return []
    state = state if state is not None else fold(run.facts, run.run_id)
    return [InDoubt(call.id, call.name, doubt_rule(state.started_traits.get(call.id)))
            for call in state.remaining_calls if state.in_doubt(call.id)]
