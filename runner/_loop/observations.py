"""What the model reads when a call did not run, or ran with no usable result.

Each is an ``ERROR:`` observation that tells the model what happened and what to
do, in one place, so the loop's module holds decisions only.
"""

from __future__ import annotations

from typing import Final

from .._log.limits import Limits
from .._log.statuses import Status

IN_DOUBT: Final = ("ERROR: the outcome of this call is unknown: the process running it stopped before it "
                   "finished, so it may or may not have taken effect. Do not assume either way; check "
                   "before you call it again.")


def repeated(name: str, allowed: int) -> str:
    return (f"ERROR: {name} was already called {allowed} times in a row with these same arguments and was "
            "not run again. Change course: use different arguments or another tool, or give your final answer.")


DENIED_TAIL: Final = "; do not retry it"


def denied(name: str, verdict: object) -> str:
    reason = f": {verdict}" if isinstance(verdict, str) and verdict else ""
    return f"{_denied_head(name)}{reason}{DENIED_TAIL}"


def denial_verdict(name: str, observation: str) -> bool | str | None:
    """The verdict ``denied`` wrote ``observation`` from (False, or the reason), or None for no denial.

    Replay reads a recorded approver's answers back this way. A denial cut short by
    ``max_result_chars`` is still a denial (False: its reason is lost with its end).
    """
    head = _denied_head(name)
    if not observation.startswith(head):
        return None
    rest = observation[len(head):]
    if rest.startswith(": ") and rest.endswith(DENIED_TAIL) and len(rest) > len(DENIED_TAIL) + 2:
        return rest[2:-len(DENIED_TAIL)]
    return False


def _denied_head(name: str) -> str:
    return f"ERROR: the call to {name} was denied by the approver"


def abandoned(name: str, status: str) -> str:
    return f"ERROR: {name} was abandoned while it ran ({status}); its outcome is unknown"


def not_run(reason: str | None) -> str:
    return f"ERROR: not run: {reason}"


CANCELLED_BY_CALLER: Final = "cancelled by the caller"


def stop_reason(status: str, limits: Limits, waiting_on: str | None = None) -> str:
    """Why a deadline or a cancel stopped the run (and what it was waiting on then)."""
    suffix = f" while waiting on {waiting_on}" if waiting_on else ""
    if status == Status.DEADLINE:
        return f"run deadline of {limits.timeout_s:g} s passed{suffix}"
    return f"{CANCELLED_BY_CALLER}{suffix}"
