"""Shared by the store tests: the event kinds a run of two tool steps and an answer leaves in the log."""

from __future__ import annotations

OPENING = ["run_started", "message", "message"]
"""The run, its system prompt and its task."""
TOOL_STEP = ["step_started", "message", "model_call", "tool_started", "tool_finished", "message", "step_finished"]
"""A step whose reply calls one tool."""
ANSWER_STEP = ["step_started", "message", "model_call", "step_finished"]
"""A step whose reply is the answer."""

KINDS_PER_RUN = [*OPENING, *TOOL_STEP, *TOOL_STEP, *ANSWER_STEP, "run_finished"]
"""The whole log of a run that calls a tool in each of two steps, then answers."""
KINDS_BEFORE_KILL = [*OPENING, *TOOL_STEP, *TOOL_STEP[:4]]
"""The same run's log when it is killed while its second tool runs."""
