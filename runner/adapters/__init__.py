"""Model adapters for the official provider SDKs.

Importing this package imports no SDK: each name is loaded from its module on
first use, and the helpers that build a client (``openai_model``,
``anthropic_model``...) raise ``MissingDependency`` with the ``pip install``
hint when the SDK is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._common import NON_FINAL_STOP_REASONS, MissingDependency, UnusableResponse
    from .anthropic import AnthropicModel, AsyncAnthropicModel, anthropic_model, async_anthropic_model
    from .openai import AsyncOpenAIModel, OpenAIModel, async_openai_model, openai_model

_WHERE = {
    "AnthropicModel": "anthropic",
    "AsyncAnthropicModel": "anthropic",
    "AsyncOpenAIModel": "openai",
    "MissingDependency": "_common",
    "NON_FINAL_STOP_REASONS": "_common",
    "OpenAIModel": "openai",
    "UnusableResponse": "_common",
    "anthropic_model": "anthropic",
    "async_anthropic_model": "anthropic",
    "async_openai_model": "openai",
    "openai_model": "openai",
}

__all__ = [
    "AnthropicModel",
    "AsyncAnthropicModel",
    "AsyncOpenAIModel",
    "MissingDependency",
    "NON_FINAL_STOP_REASONS",
    "OpenAIModel",
    "UnusableResponse",
    "anthropic_model",
    "async_anthropic_model",
    "async_openai_model",
    "openai_model",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
