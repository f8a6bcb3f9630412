"""What a rerun takes from a baseline run: how it opened, its tools, its limits, and what each of its calls got.

Everything comes from the baseline's log alone, so a baseline recorded by an older process, another
machine or a worker pool is rerun the same way. The observations kept are those a call really got:
a result, an error the tool raised, or an approver's denial. A call refused before it ran (unknown tool,
bad arguments, a repeat, in doubt) or abandoned mid-run by a stop has none worth serving again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._log.limits import Limits
from .._log.records import StoredRun
from .._log.state import fold
from .._log.statuses import UNSETTLED, Status
from .._loop import observations
from ..events import Event, MessageAppended, RunResumed, RunStarted, StepStarted, ToolFinished
from ..messages import DEFAULT_TRAITS, Message, ToolCall, ToolSpec, ToolTraits

SERVED_REFUSALS = frozenset({None, "denied"})  # a denial is what the approver said of that very call


class RecordedCall(NamedTuple):
    """A call the baseline made and the observation it got, keyed by ``call_key``."""

    key: str
    name: str
    observation: str


@dataclass(frozen=True, slots=True)
class Baseline:
    """A finished run as a rerun starts it over: its first messages, tools and limits, and its calls' observations.

    ``task`` and ``system`` are as its log holds them. ``opening`` is what its log opens with before
    its first model call (the system prompt and the task, or a fork's or follow-up's history).
    ``traits`` are the most careful the log records for each tool: once logged with side effects, always.
    """

    run: StoredRun
    task: str
    system: str
    opening: list[Message]
    specs: list[ToolSpec]
    traits: dict[str, ToolTraits]
    limits: Limits
    calls: list[RecordedCall]

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def traits_of(self, name: str) -> ToolTraits:
        return self.traits.get(name, DEFAULT_TRAITS)


def read_baseline(run: StoredRun) -> Baseline:
    """The ``Baseline`` of ``run``; ``ValueError`` for a run not settled (``unsettled``), or one that never started."""
    if run.status in UNSETTLED:
        raise ValueError(unsettled(run.run_id, run.status))
    state = fold(run.facts, run.run_id)
    started = state.started
    if started is None:
        raise ValueError(f"run {run.run_id} never started ({run.status}): there is nothing to rerun")
    return Baseline(run, started.task, started.system, opening_messages(run.facts), list(started.tool_specs),
                    careful_traits(run.facts), Limits.from_dict(state.limits or run.limits), recorded_calls(run.facts))


def unsettled(run_id: str, status: str) -> str:
    """Why a run still going on (running, queued, awaiting approval) is no baseline."""
    return f"run {run_id} is {status}: a rerun compares with a run that has ended"


def opening_messages(facts: Sequence[Event]) -> list[Message]:
    """The messages the log holds before its first step (or its first stop)."""
    opening: list[Message] = []
    for fact in facts:
        if isinstance(fact, StepStarted):
            break
        if isinstance(fact, MessageAppended):
            opening.append(fact.message)
    return opening


def careful_traits(facts: Sequence[Event]) -> dict[str, ToolTraits]:
    """Each tool's traits as every ``run_started`` and ``run_resumed`` records them, the most careful winning."""
    merged: dict[str, ToolTraits] = {}
    for fact in facts:
        if not isinstance(fact, RunStarted | RunResumed) or not fact.tool_traits:
            continue
        for name, traits in fact.tool_traits.items():
            was = merged.get(name, DEFAULT_TRAITS)
            merged[name] = {"side_effects": was["side_effects"] or traits["side_effects"],
                            "needs_approval": was["needs_approval"] or traits["needs_approval"],
                            "idempotency_key": traits["idempotency_key"] or was["idempotency_key"]}
    return merged


def recorded_calls(facts: Sequence[Event]) -> list[RecordedCall]:
    """The baseline's calls that got an observation worth serving again, in the order they got it."""
    asked: dict[str, ToolCall] = {}
    found: list[RecordedCall] = []
    for fact in facts:
        if isinstance(fact, MessageAppended) and fact.message["role"] == "assistant":
            for wanted in fact.message["tool_calls"]:
                asked[wanted["id"]] = ToolCall(wanted["id"], wanted["name"], wanted["args"])
        elif isinstance(fact, ToolFinished) and fact.refused in SERVED_REFUSALS and not abandoned(fact):
            call = asked.get(fact.call_id)
            key = call_key(fact.name, call.args) if call is not None else None
            if key is not None:
                found.append(RecordedCall(key, fact.name, fact.observation))
    return found


def abandoned(fact: ToolFinished) -> bool:
    """Whether the run stopped (a deadline, a cancel) while this call ran: its outcome was never known."""
    return any(fact.observation == observations.abandoned(fact.name, status) for status in Status)


def call_key(name: str, args: Any) -> str | None:
    """One text for a tool name and arguments that are the same JSON values (``1`` and ``1.0`` are one number).

    None for arguments that are not JSON (a model's unparsable text stays a string, which is JSON).
    """
    try:
        return name + "\x00" + json.dumps(same_numbers(args), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def same_numbers(value: Any) -> Any:
    """``value`` with each whole float as an int, so equal JSON numbers encode alike."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: same_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [same_numbers(item) for item in value]
    return value
