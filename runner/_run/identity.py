"""What names a run and its model: a new run id, a caller-given one checked, a model's name and provider."""

from __future__ import annotations

import re
import uuid

# Caller-given run ids land in URLs, terminals, file names and trace ids: letters, digits, ``.``, ``_`` and
# ``-``, not starting with ``.`` (no ``/``, no ``..`` segment a browser or a path would resolve).
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def new_run_id() -> str:
    return uuid.uuid4().hex


def checked_run_id(run_id: str | None) -> str:
    """``run_id`` if it is a valid caller-given id, a new one if None; else ``ValueError``."""
    if run_id is None:
        return new_run_id()
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError("run_id must be 1 to 128 of the characters A-Z a-z 0-9 . _ - and not start with '.', "
                         f"got {run_id!r}")
    return run_id


def model_identity(model: object) -> tuple[str, str | None]:
    name = getattr(model, "model_name", None) or getattr(model, "__name__", None) or type(model).__name__
    provider = getattr(model, "provider_name", None)
    return str(name), (str(provider) if provider else None)
