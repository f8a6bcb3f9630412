"""Whether a call left in doubt (its process died while it ran) may run again, from its tool's traits.

The log records a tool's traits when a call starts; a resume may be given a registry that says otherwise.
The more careful of the two holds, so a forgotten ``side_effects=True`` never repeats a payment.
The rule returns its reason (``DoubtRule``), so the text a page shows and what a resume does cannot part.
"""

from __future__ import annotations

from enum import StrEnum

from ..messages import ToolTraits
from .registry import Tool


class DoubtRule(StrEnum):
    """What a resume does with a call in doubt, and why, in the words ``runner show`` and the console print."""

    NO_SIDE_EFFECTS = "runs again on resume: its tool has no side effects"
    IDEMPOTENCY_KEY = "runs again on resume with its idempotency key, so the side effect happens once"
    IDEMPOTENT = ("runs again on resume with the same arguments: its tool is idempotent, "
                  "so the side effect happens once")
    SUBAGENT = ("goes on in its sub-agent's child run on resume: the child's own log decides what runs again, "
                "and a finished child's answer is served")
    NOT_AGAIN = "not run again: the model is told it may have run (the tool has side effects)"

    @property
    def runs_again(self) -> bool:
        """Whether the call runs again on resume."""
        return self is not DoubtRule.NOT_AGAIN


def doubt_rule(recorded: ToolTraits | None, tool: Tool | None = None) -> DoubtRule:
    """The rule a resume applies to a call in doubt: its tool's ``recorded`` traits against ``tool``'s now.

    It runs again when its tool had no side effects when it started and has none now, or an
    idempotency key then and now, or is idempotent then and now (the same arguments again).
    A sub-agent's call goes on in its child run.
    ``recorded`` None: ``tool`` tells; ``tool`` None (no registry at hand): the record tells alone.
    """
    traits = recorded if recorded is not None else tool.traits() if tool is not None else None
    if traits is None:  # a log from before traits were recorded, read without a registry
        return DoubtRule.NO_SIDE_EFFECTS
    now = tool.traits() if tool is not None else traits
    if traits.get("subagent", False) and now.get("subagent", False):
        return DoubtRule.SUBAGENT
    if not traits["side_effects"] and not now["side_effects"]:
        return DoubtRule.NO_SIDE_EFFECTS
    if traits["idempotency_key"] is not None and now["idempotency_key"] is not None:
        return DoubtRule.IDEMPOTENCY_KEY
    if traits.get("idempotent", False) and now.get("idempotent", False):
        return DoubtRule.IDEMPOTENT
    return DoubtRule.NOT_AGAIN


def may_run_again(recorded: ToolTraits | None, tool: Tool) -> bool:
    """Say whether a call in doubt may run again (``doubt_rule`` says why)."""
    return doubt_rule(recorded, tool).runs_again
