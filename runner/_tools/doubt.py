"""Whether a call left in doubt (its process died while it ran) may run again, from its tool's traits.

The log records a tool's traits when a call starts; a resume may be given a registry that says otherwise.
The more careful of the two holds, so a forgotten ``side_effects=True`` never repeats a payment.
"""

from __future__ import annotations

from ..messages import ToolTraits
from .registry import Tool


def may_run_again(recorded: ToolTraits | None, tool: Tool) -> bool:
    """Say whether a call in doubt may run again.

    It may when its tool had no side effects when it started and has none now, or when it has an
    idempotency key then and now, or when it is idempotent then and now (the same arguments again).
    ``recorded`` is the log's record of the tool; when it is None, ``tool`` tells.
    """
    traits = recorded if recorded is not None else tool.traits()
    if not traits["side_effects"] and not tool.side_effects:
        return True
    if traits["idempotency_key"] is not None and tool.idempotency_key is not None:
        return True
    return traits.get("idempotent", False) and tool.idempotent
