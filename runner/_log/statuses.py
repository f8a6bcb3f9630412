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
    INVALID_OUTPUT = "invalid_output"  # the typed result (output_type=) failed past max_output_retries
    MODEL_ERROR = "model_error"
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    QUEUED = "queued"  # submitted to a worker pool, not started yet (``runner.pool``)


UNFINISHED: Final = (Status.RUNNING, Status.QUEUED)
STATUSES: Final[tuple[Status, ...]] = tuple(status for status in Status if status not in UNFINISHED)
# Not settled: under way, queued, or waiting for the decision that lets it go on. A rerun takes none as a baseline.
UNSETTLED: Final = (*UNFINISHED, Status.AWAITING_APPROVAL)
# The ends after which a pool run may be sent back to its queue (``run_requeued``): a limit or an error.
# Not done; not awaiting approval (its decisions send it back); not cancelled (its cancel request stands).
REQUEUABLE: Final = frozenset(STATUSES) - {Status.DONE, Status.AWAITING_APPROVAL, Status.CANCELLED}

# Each status in a line: docs/loop.md's list of statuses (docs/reference.py writes it).
MEANINGS: Final[dict[Status, str]] = {
    Status.DONE: "the model answered: a reply with no tool call",
    Status.STEP_LIMIT: "the run made max_steps model calls",
    Status.TOKEN_BUDGET: "the next prompt would have taken the run past token_budget",
    Status.COST_LIMIT: ("the run's known cost reached max_cost_usd, or a reply had no known cost under it; "
                        "that reply was not taken (its calls did not run)"),
    Status.TOOL_BUDGET: "the next tool call would have been one past max_tool_calls; it did not run",
    Status.DEADLINE: "timeout_s passed, the model call or tool calls under way abandoned",
    Status.CONTEXT_BUDGET: "the messages held more than max_context_chars characters",
    Status.OUTPUT_BUDGET: "a reply was longer than max_output_chars; its calls did not run",
    Status.CANCELLED: "cancel was set, or an exception left the loop (Ctrl-C, a raising approve callback)",
    Status.INVALID_REPLY: ("a duplicate call id, usage that is not token counts, a reply cut off at the output "
                           "token limit, or a refusal"),
    Status.INVALID_OUTPUT: "the typed result (output_type) was invalid, or plain text, once more than "
                           "max_output_retries allows",
    Status.MODEL_ERROR: "the model callable raised",
    Status.AWAITING_APPROVAL: "a call of a needs_approval tool waits for a decision, which resume takes",
    Status.RUNNING: "not ended: the run is under way, or its process died and resume may continue it",
    Status.QUEUED: "not ended: submitted to a worker pool (runner.pool), not started yet",
}

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
