"""Stable trace and span ids for runs recorded without a live tracer.

Shared by the store (runs recorded with no span source) and tracing (a no-op
provider, and spans rebuilt from the log), so both always agree.

The log stores a span id on every event so a trace can be rebuilt from it. When
no tracer is attached the ids are derived from the run id and a span key, so
rebuilding the same run always gives the same trace. Span keys: ``run``,
``step:N``, ``chat:N`` (the model call of step N) and ``tool:CALL_ID``; a message
belongs to ``chat:N`` (assistant), ``tool:CALL_ID`` (tool) or ``run`` (system, user).
"""

from __future__ import annotations

import hashlib
import re

_HEX32 = re.compile(r"[0-9a-f]{32}")


def derived_trace_id(run_id: str) -> str:
    """The run id itself when it is 32 lowercase hex (a uuid4 hex), else a hash of it."""
    if _HEX32.fullmatch(run_id):
        return run_id
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def derived_span_id(run_id: str, key: str) -> str:
    """16 lowercase hex: the first 16 of sha256(``run_id:key``).

    ``key`` may carry a model's call id, lone surrogates included: they are hashed as
    their code points (``surrogatepass``), which leaves every valid string's id unchanged.
    """
    return hashlib.sha256(f"{run_id}:{key}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
