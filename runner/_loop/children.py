"""A sub-agent's call as the loop sees it: the child to run, what it ended with, and who runs it.

A sub-agent's call (``add_agent``) is handed over as any call is (``CallTool``), carrying a ``ChildCall``
with the parent's budget left. The driver runs it with the run's ``Children`` (the assembly's) instead of
the tool's function, on the same threads and tasks as any call. The child's end (``ChildEnded``) answers
the call, or halts the parent with the call left open (an approval the child waits for, the tree's
budget, the parent's cancel); a resume then goes on in the same child.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..messages import ToolCall

if TYPE_CHECKING:
    from .._tools.agents import SubAgent
    from .actions import CallTool, Stop
    from .waits import Waits


@dataclass(frozen=True, slots=True)
class ChildCall:
    """Run ``agent`` on ``task`` for ``call`` of run ``parent_run_id``, within what the parent has left.

    ``tokens_left``: the parent's token budget less what its tree spent; ``cost_left``: the same of
    ``max_cost_usd`` (None: no cost limit). ``step`` and ``segment`` place the call in the parent's log.
    """

    agent: SubAgent
    call: ToolCall
    task: str
    parent_run_id: str
    step: int
    segment: int
    tokens_left: int
    cost_left: float | None


class ChildEnded(NamedTuple):
    """What a child run ended with, as its parent takes it.

    ``observation``: what the parent's model reads (its answer, or an ``ERROR:``); ``halt``: the stop the
    parent takes instead, with the call left open (None: the call is answered). ``tokens`` and
    ``cost_usd`` are the child's tree's, whole (its earlier parts too).
    """

    run_id: str
    status: str
    observation: str
    tokens: int
    cost_usd: float
    halt: Stop | None = None


class Children(Protocol):
    """Who runs a run's sub-agent calls: the assembly's, over the run's store and wiring.

    ``run`` drives the child on the calling thread; ``arun`` on the event loop. ``waits`` are the
    parent's: its deadline and its cancel bound the child's.
    """

    def run(self, child: ChildCall, waits: Waits) -> ChildEnded: ...

    async def arun(self, child: ChildCall, waits: Waits) -> ChildEnded: ...


def tool_fn(action: CallTool, waits: Waits, children: Children | None) -> Callable[..., Any]:
    """The function a sync driver calls for ``action``: its tool's, or its child run's."""
    child = action.child
    if child is None or children is None:
        return action.tool.fn
    return functools.partial(_run_child, children, child, waits)


def atool_fn(action: CallTool, waits: Waits, children: Children | None) -> Callable[..., Any]:
    """``tool_fn`` for the async driver: a sub-agent's child is a coroutine on the event loop."""
    child = action.child
    if child is None or children is None:
        return action.tool.fn
    return functools.partial(_arun_child, children, child, waits)


def _run_child(children: Children, child: ChildCall, waits: Waits, **args: Any) -> ChildEnded:
    return children.run(child, waits)


async def _arun_child(children: Children, child: ChildCall, waits: Waits, **args: Any) -> ChildEnded:
    return await children.arun(child, waits)


def halt_of(value: object) -> Stop | None:
    """The stop a child's end imposes on its parent, if ``value`` is a child's end that halts it."""
    return value.halt if isinstance(value, ChildEnded) else None
