"""How a run can end, and the status of one that has not.

``resume`` may continue a run from every end but ``done``, and a ``running`` run
once its process is gone (its lease expired).
"""

from __future__ import annotations

from typing import Final

DONE: Final = "done"
STEP_LIMIT: Final = "step_limit"
TOKEN_BUDGET: Final = "token_budget"
TOOL_BUDGET: Final = "tool_budget"
DEADLINE: Final = "deadline"
CONTEXT_BUDGET: Final = "context_budget"
OUTPUT_BUDGET: Final = "output_budget"
CANCELLED: Final = "cancelled"
INVALID_REPLY: Final = "invalid_reply"
MODEL_ERROR: Final = "model_error"
AWAITING_APPROVAL: Final = "awaiting_approval"
RUNNING: Final = "running"
QUEUED: Final = "queued"  # submitted to a worker pool, not started yet (``runner.pool``)

STATUSES: Final = (
    DONE, STEP_LIMIT, TOKEN_BUDGET, TOOL_BUDGET, DEADLINE, CONTEXT_BUDGET,
    OUTPUT_BUDGET, CANCELLED, INVALID_REPLY, MODEL_ERROR, AWAITING_APPROVAL,
)
