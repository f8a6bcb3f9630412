"""The facts a run is made of, as types, and the one codec between them and ``events.data``.

The public path of the log's vocabulary: the facts are defined in ``runner._log.facts`` and the
codec in ``runner._log.codec``, so the kernel has no import cycle; this module only names them.
"""

from __future__ import annotations

from ._log.codec import EventDecodeError, decode, decode_all, encode, span_key
from ._log.facts import (
    KIND_OF,
    KINDS,
    ApprovalDecided,
    ApprovalRequested,
    CallTokens,
    CancelRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    ModelDelta,
    OutputRejected,
    OutputSchema,
    RunFinished,
    RunQueued,
    RunRequeued,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolReturnedLate,
    ToolStarted,
    kind_of,
)

__all__ = [
    "KINDS",
    "KIND_OF",
    "ApprovalDecided",
    "ApprovalRequested",
    "CallTokens",
    "CancelRequested",
    "Event",
    "EventDecodeError",
    "MessageAppended",
    "ModelCallStarted",
    "ModelCalled",
    "ModelDelta",
    "OutputRejected",
    "OutputSchema",
    "RunFinished",
    "RunQueued",
    "RunRequeued",
    "RunResumed",
    "RunStarted",
    "StepFinished",
    "StepStarted",
    "ToolFinished",
    "ToolReturnedLate",
    "ToolStarted",
    "decode",
    "decode_all",
    "encode",
    "kind_of",
    "span_key",
]
