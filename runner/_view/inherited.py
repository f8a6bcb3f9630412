"""What a fork or a follow-up carried over from its parent run, for ``runner show``.

A linked run's log opens with its parent's conversation as plain ``message`` facts
before its first step: it says neither which step of the parent each one came from,
nor which observations a fork swapped. Both come from the parent's log, whose
messages the opening ones repeat in order (a fork's: those before its fork step,
with the swapped observations; a follow-up's: all of them, then its own message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._log.records import StoredRun
from .._tools.agents import SUBAGENT
from ..events import Event, MessageAppended, RunQueued, RunStarted
from ..messages import Message
from .lineage import RERUN


class InheritedMessage(NamedTuple):
    """One message a run inherited.

    ``parent_step`` is the parent's step that logged it (0: the parent's own opening);
    ``swapped`` says a fork replaced this tool observation, ``original`` is the parent's.
    Both are None when the parent's log is not in the store.
    """

    message: Message
    parent_step: int | None
    swapped: bool | None
    original: str | None


class Inherited(NamedTuple):
    """The part of a linked run's conversation that is its parent's."""

    parent_run_id: str
    origin: str | None
    forked_at_step: int | None
    parent_in_store: bool
    messages: list[InheritedMessage]


def inherited(facts: Sequence[Event], parent: StoredRun | None) -> Inherited | None:
    """What the run of ``facts`` inherited from ``parent`` (None: not in the store).

    None for a run with no parent, for a rerun's candidate (it starts its baseline's work over) and for a
    sub-agent's child run (it starts from its own task): they inherit nothing.
    """
    started = next((fact for fact in facts if isinstance(fact, RunStarted)), None)
    if started is None or started.parent_run_id is None or started.origin in (RERUN, SUBAGENT):
        return None
    opening = _opening_messages(facts)
    if started.forked_at_step is None and opening:  # a follow-up: its last opening message is its own
        opening = opening[:-1]
    steps: list[int] = []
    theirs: list[Message] = []
    if parent is not None:
        for fact in parent.facts:
            if isinstance(fact, MessageAppended):
                steps.append(fact.step)
                theirs.append(fact.message)
    messages = [_compared(message, index, steps, theirs, parent is not None) for index, message in enumerate(opening)]
    return Inherited(started.parent_run_id, started.origin, started.forked_at_step, parent is not None, messages)


def _opening_messages(facts: Sequence[Event]) -> list[Message]:
    """The messages a run's log opens with, before its first step (or its first stop)."""
    opening: list[Message] = []
    for fact in facts:
        match fact:
            case MessageAppended():
                opening.append(fact.message)
            case RunStarted() | RunQueued():
                pass
            case _:
                break
    return opening


def _compared(message: Message, index: int, steps: list[int], theirs: list[Message],
              known: bool) -> InheritedMessage:
    """``message``, the ``index``-th the run inherited, against the parent's ``index``-th."""
    if not known:
        return InheritedMessage(message, None, None, None)
    if index >= len(theirs):  # the parent's log holds fewer messages: not one of its messages
        return InheritedMessage(message, None, False, None)
    original = theirs[index]
    swapped = (message["role"] == "tool" and original["role"] == "tool"
               and message["tool_call_id"] == original["tool_call_id"] and message["content"] != original["content"])
    return InheritedMessage(message, steps[index], swapped, original["content"] if swapped else None)


def inherited_json(found: Inherited | None) -> dict[str, Any] | None:
    """``found`` for ``show --json`` (None for a run with no parent)."""
    if found is None:
        return None
    return {"parent_run_id": found.parent_run_id, "origin": found.origin, "forked_at_step": found.forked_at_step,
            "parent_in_store": found.parent_in_store,
            "messages": [{"parent_step": m.parent_step, "message": m.message, "swapped": m.swapped,
                          "original": m.original} for m in found.messages]}


def inherited_shown(carried: Inherited, task: str) -> list[InheritedMessage]:
    """The inherited messages both faces show: the model's, the tools', and the user's but the run's own task.

    The system message and the task (a fork's is its parent's) are left out: the header has the task.
    """
    return [item for item in carried.messages
            if item.message["role"] in ("assistant", "tool")
            or (item.message["role"] == "user" and item.message["content"] != task)]
