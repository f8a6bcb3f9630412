"""Derive stable trace and span ids for runs recorded without a live tracer.

The store and tracing both use them, so they always agree, and rebuilding a run gives the same trace.
The ids come from the run id and a span key: ``run``, ``step:N``, ``chat:N`` or ``tool:CALL_ID``.
An assistant message belongs to ``chat:N``, a tool message to ``tool:CALL_ID``,
and a system or user message to ``run``. A sub-agent's child run has its id from its parent's and the call's.
"""

from __future__ import annotations

import hashlib
import re
from typing import TypeGuard

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_ZEROS = frozenset({"0" * 16, "0" * 32})


def is_span_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a valid span id as the log holds it: 16 lowercase hex digits, not all zero.

    The log's columns are text anyone may write: an id that is not one is treated as absent (derived instead).
    """
    return isinstance(value, str) and _HEX16.fullmatch(value) is not None and value not in _ZEROS


def is_trace_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a valid trace id as the log holds it: 32 lowercase hex digits, not all zero."""
    return isinstance(value, str) and _HEX32.fullmatch(value) is not None and value not in _ZEROS


def is_link(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a valid ``TRACE_ID:SPAN_ID`` (a logged ``linked_span``)."""
    if not isinstance(value, str):
        return False
    trace_id, _, span_id = value.partition(":")
    return is_trace_id(trace_id) and is_span_id(span_id)


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


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The id of the child run that serves call ``call_id`` of run ``parent_run_id``: the same on every resume.

    32 hex digits (a valid run id and its own trace id's form), from both ids hashed.
    """
    digest = hashlib.sha256(f"{parent_run_id}\x00{call_id}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]
