"""A run's status (how it ended, or that it has not ended yet) and its liveness (whether its process runs).

``Status`` and ``Liveness`` members are strings (``Status.DONE == "done"``), so the log, the ``runs``
table and ``--json`` output hold the same text as before. ``resume`` may continue a
run from every end but ``done``, and a ``running`` run once its process is gone.
"""

from __future__ import annotations

from enum import StrEnum, unique
from typing import Final


@unique
class Status(StrEnum):
    """Every status a run can have; ``STATUSES`` are the ones that end it."""

    DONE = "done"
    STEP_LIMIT = "step_limit"
    TOKEN_BUDGET = "token_budget"
    COST_LIMIT = "cost_limit"  # the run's cost reached max_cost_usd (runner.prices)
    TOOL_BUDGET = "tool_budget"
    DEADLINE = "deadline"
    CONTEXT_BUDGET = "context_budget"
    OUTPUT_BUDGET = "output_budget"
    CANCELLED = "cancelled"
    INVALID_REPLY = "invalid_reply"
    MODEL_ERROR = "model_error"
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    QUEUED = "queued"  # submitted to a worker pool, not started yet (``runner.pool``)


UNFINISHED: Final = (Status.RUNNING, Status.QUEUED)
STATUSES: Final[tuple[Status, ...]] = tuple(status for status in Status if status not in UNFINISHED)


@unique
class Liveness(StrEnum):
    """How a run stands with its process; ``RunSummary.liveness`` (the store judges it when it reads the run)."""

    FINISHED = "finished"  # the run ended (any status but running or queued)
    WAITING = "waiting"  # queued for a worker pool
    LIVE = "live"  # its process runs, or its heartbeat is fresh
    DEAD = "dead"  # its process, one this process can see, is gone
    STALE = "stale"  # its process cannot be seen and its heartbeat is old, or it let the run go

    @property
    def gone(self) -> bool:
        """Whether the run has not ended and no process drives it any more (dead or stale): it may be resumed."""
        return self in (Liveness.DEAD, Liveness.STALE)
