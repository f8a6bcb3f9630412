"""Build the opt-in content of a chat span: its messages and the tools offered.

The content is written twice, once per reader: the GenAI convention's JSON messages,
and OpenInference's flattened attributes with the JSON as ``input.value`` and ``output.value``.
An SDK span keeps 128 attributes and then drops its oldest ones.
So the flattened input messages take only the room left (``ROOM``): the latest ones that fit.
``runner.input_messages.omitted`` counts the rest; ``input.value`` always holds them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from .attrs import (
    INPUT_MESSAGES,
    INPUT_MIME,
    INPUT_VALUE,
    JSON,
    OUTPUT_MESSAGES,
    OUTPUT_MIME,
    OUTPUT_VALUE,
    Attrs,
    finish_reason,
    json_text,
    tool_schema,
)

OMITTED: Final = "runner.input_messages.omitted"

# The SDK's default attribute count limit less what a chat span carries besides its
# flattened messages and tools (about 30 today: ids, labels, model, usage, cost, the JSON texts).
ROOM: Final = 128 - 36

Flat = list[tuple[str, AttributeValue]]


def offered(tool_specs: Sequence[Mapping[str, Any]]) -> Attrs:
    """Build what every chat span of a run repeats, once per run: the tools offered (``llm.tools.N.tool.json_schema``).

    The call's parameters (``llm.invocation_parameters``) are no content: ``attrs.chat_start`` sets them.
    """
    return {f"llm.tools.{i}.tool.json_schema": tool_schema(spec) for i, spec in enumerate(tool_specs)}


def chat_content(shown: Sequence[Mapping[str, Any]], reply: Mapping[str, Any] | None, run_offered: Attrs) -> Attrs:
    """Build a chat span's content from the messages sent and the reply.

    ``reply`` is the reply as ``messages.reply_data`` data, or None when there was none.
    ``run_offered`` comes from ``offered``.
    """
    sent = json_text([convention_message(m) for m in shown])
    attrs: Attrs = {INPUT_MESSAGES: sent, INPUT_VALUE: sent, INPUT_MIME: JSON, **run_offered}
    room = ROOM - len(run_offered)
    if reply is not None:
        answer = {"role": "assistant", **reply}
        out = convention_message(answer)
        out["finish_reason"] = finish_reason(reply)
        attrs[OUTPUT_MESSAGES] = attrs[OUTPUT_VALUE] = json_text([out])
        attrs[OUTPUT_MIME] = JSON
        flat = message_flat(answer)
        room -= len(flat)
        attrs.update((f"llm.output_messages.0.{key}", value) for key, value in flat)
    kept: list[Flat] = []
    for message in reversed(shown):
        flat = message_flat(message)
        if len(flat) > room:
            break
        room -= len(flat)
        kept.append(flat)
    if len(kept) < len(shown):
        attrs[OMITTED] = len(shown) - len(kept)
    for i, flat in enumerate(reversed(kept)):
        attrs.update((f"llm.input_messages.{i}.{key}", value) for key, value in flat)
    return attrs


def message_flat(message: Mapping[str, Any]) -> Flat:
    """One message as OpenInference ``message.*`` keys and values (no prefix, no index)."""
    flat: Flat = [("message.role", str(message.get("role")))]
    content = message.get("content")
    if content:
        flat.append(("message.content", str(content)))
    if message.get("role") == "tool":
        flat.append(("message.tool_call_id", str(message.get("tool_call_id"))))
        if message.get("name"):
            flat.append(("message.name", str(message["name"])))
    for j, call in enumerate(message.get("tool_calls") or ()):
        args = call.get("args")
        flat += [(f"message.tool_calls.{j}.tool_call.id", str(call.get("id"))),
                 (f"message.tool_calls.{j}.tool_call.function.name", str(call.get("name"))),
                 (f"message.tool_calls.{j}.tool_call.function.arguments",
                  args if isinstance(args, str) else json_text(args))]
    return flat


def convention_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One of our messages as a GenAI convention ``ChatMessage`` (role and parts)."""
    role = message.get("role")
    if role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                                           "response": message.get("content")}]}
    parts: list[dict[str, Any]] = []
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or ():
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("args")})
    return {"role": role, "parts": parts}
