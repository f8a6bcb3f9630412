"""The tools the in-process console tests record runs with: a ``transfer`` that waits for approval, a ``lookup``."""

from __future__ import annotations

from runner import ToolRegistry

PARAMS = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


def money(ran: list[str]) -> ToolRegistry:
    """``transfer`` needs approval and has side effects (it appends its ``ref`` to ``ran``); ``lookup`` reads."""
    def transfer(ref: str) -> str:
        ran.append(ref)
        return f"sent {ref}"

    tools = ToolRegistry()
    tools.register("transfer", "Move money.", PARAMS, transfer, side_effects=True, needs_approval=True)
    tools.register("lookup", "Read.", PARAMS, lambda ref: f"found {ref}")
    return tools
