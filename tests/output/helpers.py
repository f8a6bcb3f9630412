"""Types for the typed-result tests, and a model that notes the tool specs it was shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # Pydantic needs it on Python < 3.12

from runner import ModelReply, ScriptedModel, ToolCall
from runner.messages import Message, ToolSpec


class Invoice(BaseModel):
    """An invoice as a Pydantic model."""

    total: float = Field(ge=0)
    currency: str


@dataclass
class InvoiceData:
    total: float
    currency: str


class InvoiceDict(TypedDict):
    total: float
    currency: str


INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"total": {"type": "number", "minimum": 0}, "currency": {"type": "string", "minLength": 3}},
    "required": ["total", "currency"],
}


def final(call_id: str, **args: Any) -> ModelReply:
    """A reply that calls ``final_result`` with ``args``."""
    return ModelReply("", [ToolCall(call_id, "final_result", args)])


class SpecModel(ScriptedModel):
    """A scripted model that also keeps the tool specs shown at each call."""

    def __init__(self, replies: Sequence[ModelReply | str]) -> None:
        super().__init__(replies)
        self.specs: list[list[ToolSpec]] = []

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        self.specs.append(list(tool_specs))
        return super().__call__(messages, tool_specs)
