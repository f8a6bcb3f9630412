"""What a run returns: ``AgentResult``.

The driver protocol (the actions the loop yields and the outcomes sent back) is in ``actions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._log.statuses import Status
from ..errors import AgentStopped
from ..messages import Message


@dataclass(frozen=True, slots=True)
class AgentResult:
    """Say how a run ended.

    ``answer`` is the final text for ``done`` (the typed ``output``'s JSON, for ``output_type=``), else None.
    ``tool_calls`` counts the calls that ran; a call run again after a crash counts once.
    ``exception`` keeps what a model raised (``model_error``), or the divergence a replay ended the run with.
    ``cost_usd`` is what the run's model calls cost, None while any call's cost is unknown;
    ``cost_known_usd`` adds up the calls whose cost is known (then a floor).
    """

    status: Status
    answer: str | None
    steps: int
    tokens: int
    messages: list[Message]
    run_id: str
    error: str | None = None
    tool_calls: int = 0
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    cost_usd: float | None = 0.0
    cost_known_usd: float = 0.0
    output: Any = None  # a done run's typed result (output_type=): an instance of T, or JSON for a schema dict

    @property
    def ok(self) -> bool:
        return self.status == Status.DONE

    def raise_for_status(self) -> AgentResult:
        """Return self for a finished run, else raise ``AgentStopped``."""
        if self.status != Status.DONE:
            raise AgentStopped(self.status, self.error or self.status, self.run_id)
        return self
