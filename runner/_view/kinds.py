"""What a timeline entry is, and how a tool call came out: the names both faces (CLI and console) draw by."""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """What an entry is: the template picks how to draw it by this."""

    STEP = "step"
    MODEL = "model"
    PARTIAL = "partial"
    TOOL = "tool"
    ASKED = "asked"
    DECIDED = "decided"
    RESUMED = "resumed"
    CANCEL = "cancel"
    REQUEUED = "requeued"
    REJECTED = "rejected"
    END = "end"
    CHILD = "child"


class CallOutcome(StrEnum):
    """How a tool call came out, as both faces label it."""

    OK = "ok"
    ERROR = "error"
    REFUSED = "refused"
    IN_DOUBT = "in doubt"
    RUNNING = "running"
    RETURNED_LATE = "returned late"
    WAITING = "waiting on its sub-agent"
