"""Shared by the tests of several areas: sub-agent trees, a parent whose model calls a sub-agent's tool.

The models answer from the conversation they are sent, not from a script's position, so a
process that resumes a tree (``runner resume --tools tests.trees:tools``, the console) gets the
same answers as the one that started it. ``SENT`` holds every ``send`` that really ran in this process
(and ``console_tools.ran`` writes it down for a console's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from runner import ModelReply, RunStore, ToolCall, ToolRegistry, run_agent
from runner.messages import Message, ToolSpec
from tests.ui import console_tools

SENT: list[str] = []
AGENT = "research"
CHILD_TASK = "find X"


class Asks:
    """A model that calls ``tool`` with ``args`` (call ``call_id``) first, then answers with what it returned."""

    def __init__(self, tool: str, args: dict[str, str], call_id: str, answer: str) -> None:
        self.tool, self.args, self.call_id, self.answer = tool, args, call_id, answer
        self.model_name = f"asks-{tool}"

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec], /) -> ModelReply:
        last = messages[-1]
        if last["role"] == "tool":
            return ModelReply(content=f"{self.answer}: {last['content']}")
        return ModelReply(content="", tool_calls=[ToolCall(id=self.call_id, name=self.tool, args=self.args)])


def send(to: str) -> str:
    SENT.append(to)
    console_tools.ran(f"send {to}")  # in a console's process: to the file a browser test reads
    return f"sent to {to}"


def child_registry(approval: bool) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("send", "Send the findings.", {"type": "object", "properties": {"to": {"type": "string"}},
                                                     "required": ["to"]}, send, side_effects=True,
                      needs_approval=approval)
    return registry


def tree_registry(*, approval: bool = False, name: str = AGENT, deeper: bool = False) -> ToolRegistry:
    """The parent's tools: the sub-agent ``name``, whose child calls ``send`` (which ``approval`` makes wait).

    ``deeper``: the sub-agent has a sub-agent of its own (``deep``), which is the one that calls ``send``.
    """
    below = child_registry(approval)
    model = Asks("send", {"to": "bob"}, "c1", "child done")
    if deeper:
        inner, below = below, ToolRegistry()
        below.add_agent("deep", model=model, registry=inner, description="Digs deeper.")
        model = Asks("deep", {"task": "dig"}, "d1", "middle done")
    registry = ToolRegistry()
    registry.add_agent(name, model=model, registry=below, description="Researches a question.")
    return registry


def tools() -> ToolRegistry:
    """``--tools tests.trees:tools``: a sub-agent whose ``send`` needs approval."""
    return tree_registry(approval=True)


def deep_tools() -> ToolRegistry:
    """``--tools tests.trees:deep_tools``: ``tools`` with the sub-agent's ``send`` one sub-agent further down."""
    return tree_registry(approval=True, deeper=True)


class Tree(NamedTuple):
    """A tree's parent run and its child run's ids, and how the parent ended."""

    parent: str
    child: str
    status: str


def run_tree(store: RunStore, *, approval: bool = False, name: str = AGENT, task: str = "top task",
             child_task: str = CHILD_TASK, deeper: bool = False) -> Tree:
    """A parent that calls the sub-agent ``name`` once (call ``p1``), in ``store``."""
    parent = Asks(name, {"task": child_task}, "p1", "final")
    result = run_agent(task, parent, tree_registry(approval=approval, name=name, deeper=deeper), store=store)
    child = next(run.run_id for run in store.children(result.run_id) if run.parent_call_id == "p1")
    return Tree(result.run_id, child, result.status)
