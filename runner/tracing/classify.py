"""Low-cardinality names a span gives what it reports: a failed tool call's error type, a provider's name.

A span's ``error.type`` and ``llm.provider`` are grouped on by trace readers, so they must come
from a short list, never from free text (the text itself goes in the status description).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from .._log.statuses import Status

# OpenInference's llm.provider values (OpenInferenceLLMProviderValues), by the names a run's provider may
# go by: the GenAI conventions' gen_ai.provider.name values, genai-prices' provider ids, and plain spellings.
# A provider not listed goes out as it was named.
_OI_PROVIDERS: Final[Mapping[str, str]] = {
    "openai": "openai", "anthropic": "anthropic", "cohere": "cohere",
    "mistral": "mistralai", "mistralai": "mistralai", "mistral_ai": "mistralai",
    "google": "google", "gemini": "google", "vertexai": "google", "vertex_ai": "google",
    "gcp.gemini": "google", "gcp.vertex_ai": "google", "gcp.gen_ai": "google",
    "azure": "azure", "azure.ai.openai": "azure", "azure.ai.inference": "azure",
    "aws": "aws", "bedrock": "aws", "aws.bedrock": "aws",
    "xai": "xai", "x-ai": "xai", "x_ai": "xai", "deepseek": "deepseek", "groq": "groq",
    "fireworks": "fireworks", "fireworks-ai": "fireworks", "moonshot": "moonshot", "moonshotai": "moonshot",
    "cerebras": "cerebras", "perplexity": "perplexity", "together": "together", "ollama": "ollama",
}


def oi_provider(provider: str) -> str:
    """OpenInference's ``llm.provider`` value for a run's provider (one not listed goes out as named)."""
    return _OI_PROVIDERS.get(provider.lower(), provider)


_FAILED = re.compile(r"failed: ([A-Za-z_][\w.]*): ")


def tool_error_type(name: str, observation: str, ran: bool) -> str:
    """A low-cardinality class for an ``ERROR:`` observation (the text itself is the description)."""
    if not ran:
        if observation.startswith("ERROR: unknown tool "):
            return "unknown_tool"
        if " was already called " in observation and " in a row " in observation:
            return "repeated_call"
        if " was denied by the approver" in observation:
            return "denied"
        return "invalid_arguments"
    # logged before abandoned calls said why
    if observation in (f"ERROR: {Status.DEADLINE}", f"ERROR: {Status.CANCELLED}"):
        return observation[len("ERROR: "):]
    for stop in (Status.DEADLINE, Status.CANCELLED):
        if observation.startswith(f"ERROR: {name} was abandoned while it ran ({stop})"):
            return stop
    if observation.startswith(f"ERROR: {name} timed out after "):
        return "timeout"
    if observation.startswith(f"ERROR: {name} returned a value that is not JSON-serialisable"):
        return "invalid_result"
    found = _FAILED.match(observation, len(f"ERROR: {name} "))
    return found.group(1) if found else "tool_error"
