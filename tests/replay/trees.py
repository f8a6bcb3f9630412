"""Trees of agents for the replay and rerun tests: a planner whose ``research`` sub-agent may have ``deep`` below it.

Each agent has ``lookup`` (reads, returns ``{"ref": ..., "value": VALUE}``) and ``pay`` (side effects);
``Counts`` says how many times each tool function really ran, by agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runner import ModelReply, ScriptedModel, ToolRegistry
from runner.messages import AnyModel

REF = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


@dataclass
class Counts:
    """How many times each tool function really ran, keyed ``agent.tool``."""

    ran: dict[str, int] = field(default_factory=dict)

    def note(self, key: str) -> int:
        self.ran[key] = self.ran.get(key, 0) + 1
        return self.ran[key]


def tools(agent: str, counts: Counts, value: int = 1, *, approvals: bool = False) -> ToolRegistry:
    """``lookup`` and ``pay`` for ``agent``; with ``approvals``, ``transfer`` (side effects, needs approval)."""
    registry = ToolRegistry()

    def lookup(ref: str) -> dict[str, Any]:
        counts.note(f"{agent}.lookup")
        return {"ref": ref, "value": value}

    def pay(ref: str) -> str:
        return f"payment {counts.note(f'{agent}.pay')} for {ref}"

    def transfer(ref: str) -> str:
        return f"transfer {counts.note(f'{agent}.transfer')} of {ref}"

    registry.register("lookup", "Look up (reads).", REF, lookup)
    registry.register("pay", "Pay (writes).", REF, pay, side_effects=True)
    if approvals:
        registry.register("transfer", "Transfer (writes).", REF, transfer, side_effects=True, needs_approval=True)
    return registry


def unused() -> ScriptedModel:
    """A sub-agent's model that replay must never call: it has no replies."""
    return ScriptedModel([])


def planner(counts: Counts, research: AnyModel, *, value: int = 1, deep: AnyModel | None = None,
            deep_value: int = 1, approvals: bool = False, output_type: Any = None,
            system: str = "You research.") -> ToolRegistry:
    """The planner's tools: ``lookup``, ``pay`` and the ``research`` sub-agent (with ``deep`` below it when given)."""
    below = tools("research", counts, value, approvals=approvals)
    if deep is not None:
        below.add_agent("deep", model=deep, registry=tools("deep", counts, deep_value), description="Checks deeper.")
    top = tools("planner", counts)
    top.add_agent("research", model=research, registry=below, description="Researches a question.", system=system,
                  output_type=output_type)
    return top


def scripted(replies: Sequence[ModelReply | str]) -> ScriptedModel:
    return ScriptedModel(list(replies))
