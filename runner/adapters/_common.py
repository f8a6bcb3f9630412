"""What every adapter shares: the install hint, argument parsing, stop reasons.

Stop reasons use one small vocabulary so the loop can judge any provider's
reply the same way: a reply cut off by the token limit says ``"length"``
(OpenAI's ``finish_reason``; Anthropic's ``max_tokens`` is translated), a
refused one says ``"refusal"``; every other value is the provider's own.
"""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType
from typing import Any

from ..errors import RunnerError
from ..messages import CUT_OFF_STOP_REASONS, REFUSAL_STOP_REASONS, Usage

STOP_LENGTH = "length"
STOP_REFUSAL = "refusal"
STOP_CONTENT_FILTER = "content_filter"
# Replies that ended for one of these reasons are not answers (the loop's own rule).
NON_FINAL_STOP_REASONS = CUT_OFF_STOP_REASONS | REFUSAL_STOP_REASONS


class MissingDependency(RunnerError):
    """An optional SDK is not installed; the message says which extra brings it."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        self.hint = f"pip install 'durable-agent-runner[{extra}]'"
        super().__init__(f"the {extra} adapter needs the {package!r} package: {self.hint}")


class UnusableResponse(RunnerError):
    """The provider answered successfully but with nothing a reply can be made of."""

    def __init__(self, provider: str, reason: str) -> None:
        self.provider = provider
        self.reason = reason
        super().__init__(f"{provider} response cannot be used: {reason}")


def require(package: str, extra: str) -> ModuleType:
    """Import an optional SDK, or raise ``MissingDependency`` with the install hint."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependency(package, extra) from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_arguments(raw: object) -> Any:
    """The call's arguments as the model sent them, parsed when they are JSON.

    Whitespace or nothing means no arguments (``{}``). Text that is not strict
    JSON (``NaN`` included) comes back as the raw string, and JSON that is not
    an object comes back parsed: either way the registry's check turns it into
    an ``ERROR:`` observation the model can act on, instead of a crash here.
    """
    if raw is None:
        return {}
    if not isinstance(raw, str):  # a server that sends an object, not the documented JSON string
        return raw
    if not raw.strip():
        return {}
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return raw


def client_options(base_url: str | None, api_key: str | None, timeout: float | None, max_retries: int | None,
                   *, key_env: str, base_env: str) -> dict[str, Any]:
    """Keyword arguments for an SDK client; a local server (a base URL, no key) gets a placeholder key.

    The SDKs refuse to build a client without a key even for servers that ignore it.
    """
    if api_key is None and not os.environ.get(key_env) and (base_url or os.environ.get(base_env)):
        api_key = "unused"
    options: dict[str, Any] = {"base_url": base_url, "api_key": api_key}
    if timeout is not None:
        options["timeout"] = timeout
    if max_retries is not None:
        options["max_retries"] = max_retries
    return options


def usage_of(input_tokens: object, output_tokens: object, cache_read: object = 0, cache_write: object = 0,
             *, cached_in_input: bool = False) -> Usage | None:
    """The reply's usage when the server gave both counts as non-negative ints, else None.

    Some OpenAI-compatible servers send nulls; the loop then falls back to its estimate.
    ``cached_in_input``: the server's input count already holds the cached tokens (OpenAI's does,
    Anthropic's does not). A cache count that is not a non-negative int counts as 0.
    """
    if isinstance(input_tokens, bool) or isinstance(output_tokens, bool):
        return None
    if isinstance(input_tokens, int) and isinstance(output_tokens, int) and min(input_tokens, output_tokens) >= 0:
        read, write = _count(cache_read), _count(cache_write)
        if cached_in_input:
            read, write = min(read, input_tokens), min(write, max(input_tokens - read, 0))
            return Usage(input_tokens, output_tokens, read, write)
        return Usage(input_tokens + read + write, output_tokens, read, write)
    return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
