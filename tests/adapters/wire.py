"""Response bodies in the providers' documented shapes, shared by the adapters' tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-5"  # a deprecated name would make the SDK warn


def completion(content: str | None = None, calls: Sequence[tuple[str, str, str]] = (),
               finish_reason: str = "stop", refusal: str | None = None,
               usage: tuple[int, int] | None = (20, 5)) -> dict[str, Any]:
    """A Chat Completions response body in the documented shape."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal, "annotations": []}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in calls]
    body: dict[str, Any] = {
        "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1_700_000_000, "model": OPENAI_MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "system_fingerprint": "fp_test", "service_tier": "default",
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body



def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str, input_: Any, name: str = "get_weather") -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": input_}


def message(*blocks: dict[str, Any], stop_reason: str | None = "end_turn", usage: tuple[int, int] = (30, 7),
            **usage_extra: int) -> dict[str, Any]:
    """A Messages API response body in the documented shape."""
    return {"id": "msg_01ABC", "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL,
            "content": list(blocks), "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], **usage_extra}}

