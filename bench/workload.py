"""The workload every benchmark runs: a scripted model calling one cheap tool each step."""

from __future__ import annotations

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("echo", "Echo a number.", {"type": "object", "properties": {"n": {"type": "integer"}},
                                            "required": ["n"]}, lambda n: {"n": n})
    return reg


def script(steps: int) -> ScriptedModel:
    """``steps - 1`` replies that call ``echo`` with fresh arguments, then a final answer."""
    replies: list[ModelReply | str] = [
        ModelReply(f"step {i}", [ToolCall(f"c{i}", "echo", {"n": i})]) for i in range(steps - 1)]
    return ScriptedModel([*replies, "finished"])
