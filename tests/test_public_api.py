"""The public surface is pinned: names leave or arrive only on purpose."""

from __future__ import annotations

import runner

EXPECTED = {
    "AgentResult", "AgentStopped", "DEFAULT_SYSTEM", "FanoutRecorder", "Limits", "Message", "Model",
    "ModelCallInfo", "ModelReply", "NullRecorder", "Recorder", "RunInfo", "RunnerError", "STATUSES",
    "ScriptError", "ScriptExhausted", "ScriptedModel", "StoreError", "Tool", "ToolCall", "ToolCallInfo",
    "ToolRegistry", "ToolSpec", "Usage", "run_agent", "run_plan", "validate_args",
}


def test_all_is_exactly_the_intended_names_sorted() -> None:
    assert set(runner.__all__) == EXPECTED
    assert runner.__all__ == sorted(runner.__all__)
    for name in runner.__all__:
        assert getattr(runner, name) is not None


def test_statuses_are_the_contract() -> None:
    assert runner.STATUSES == ("done", "step_limit", "token_budget", "tool_budget", "deadline", "context_budget",
                               "output_budget", "cancelled", "invalid_reply", "model_error", "awaiting_approval")
