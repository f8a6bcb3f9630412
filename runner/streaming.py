"""The events ``stream_agent`` and its kin yield while a run runs (docs/streaming.md).

``TextDelta`` (a piece of a reply's text), ``ToolStarted``, ``ToolFinished``, ``StepFinished``, and
last ``RunEnded`` with the result. Their names echo the log's facts (``runner.events``) but they are
the caller's view: a tool call as the model asked for it, its observation as the model reads it.
"""

from __future__ import annotations

from ._run.streaming import (
    RunEnded,
    StepFinished,
    StreamEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    astream_agent,
    astream_follow_up,
    astream_fork,
    astream_resume,
    stream_agent,
    stream_follow_up,
    stream_fork,
    stream_resume,
)

__all__ = [
    "RunEnded",
    "StepFinished",
    "StreamEvent",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "astream_agent",
    "astream_follow_up",
    "astream_fork",
    "astream_resume",
    "stream_agent",
    "stream_follow_up",
    "stream_fork",
    "stream_resume",
]
