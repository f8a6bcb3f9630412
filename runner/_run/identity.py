"""What names a run and its model: a new run id, a caller-given one checked, a model's name and provider."""

from __future__ import annotations

import re
import uuid

# Caller-given run ids land in terminals, file names and trace ids: no spaces, no control characters.
_RUN_ID = re.compile(r"[\x21-\x7e]{1,64}")


def new_run_id() -> str:
    return uuid.uuid4().hex


def checked_run_id(run_id: str | None) -> str:
    """``run_id`` if it is a valid caller-given id, a new one if None; else ``ValueError``."""
    if run_id is None:
        return new_run_id()
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be 1-64 printable ASCII characters without spaces, got {run_id!r}")
    return run_id


def model_identity(model: object) -> tuple[str, str | None]:
    name = getattr(model, "model_name", None) or getattr(model, "__name__", None) or type(model).__name__
    provider = getattr(model, "provider_name", None)
    return str(name), (str(provider) if provider else None)
