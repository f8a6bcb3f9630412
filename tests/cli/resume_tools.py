"""Tools for the CLI's resume, fork and follow-up tests, loaded with ``--tools tests.cli.resume_tools:tools``.

``transfer`` moves money: it has side effects and needs approval, so a run without
an approver stops ``awaiting_approval`` on it. ``pay`` has side effects but needs no
approval; ``lookup`` only reads. Every call that really runs is appended to ``RAN``,
so a test can assert which functions ran (the CLI runs in the test's process).
"""

from __future__ import annotations

from typing import Any

from runner import ToolRegistry

RAN: list[str] = []
PARAMS = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


def transfer(ref: str) -> str:
    RAN.append(f"transfer {ref}")
    return f"transferred {ref}"


def pay(ref: str) -> str:
    RAN.append(f"pay {ref}")
    return f"paid {ref}"


def lookup(ref: str) -> dict[str, Any]:
    RAN.append(f"lookup {ref}")
    return {"ref": ref, "value": 42}


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("transfer", "Transfer money (needs approval).", PARAMS, transfer, side_effects=True,
                      needs_approval=True)
    registry.register("pay", "Pay (writes; no approval asked).", PARAMS, pay, side_effects=True)
    registry.register("lookup", "Look a reference up (reads only).", PARAMS, lookup)
    return registry


def forgetful() -> ToolRegistry:
    """``tools()`` with ``pay`` registered as if it had no side effects (a registry that disagrees with a log)."""
    registry = ToolRegistry()
    registry.register("transfer", "Transfer money (needs approval).", PARAMS, transfer, side_effects=True,
                      needs_approval=True)
    registry.register("pay", "Pay (writes; no approval asked).", PARAMS, pay)
    registry.register("lookup", "Look a reference up (reads only).", PARAMS, lookup)
    return registry
