"""A run's id in the console's URLs: one percent-encoded path segment, routed on the raw path.

uvicorn decodes ``%2F`` before routing, so an id holding ``/`` (which older stores may hold) would
split into segments: the middleware here takes the id from the raw path instead. A browser resolves
``.`` and ``..`` as dot segments however encoded, so those two ids go in a query (``/runs/?id=..``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from starlette.requests import Request

from .guard import App, Receive, Scope, Send

PREFIXES = ("/runs/", "/api/runs/")
DOTS = frozenset({".", ".."})


def segment(value: str) -> str:
    """``value`` as one percent-encoded URL path segment: a run id may hold ``?``, ``#``, ``/`` or ``..``."""
    return quote(value, safe="")


def run_path(run_id: str, action: str = "", prefix: str = "/runs/") -> str:
    """The path of ``run_id``'s page, or of ``action`` on it (``decide``, ``fixture.json``)."""
    tail = f"/{action}" if action else ""
    if run_id in DOTS:
        return f"{prefix}{tail}?id={segment(run_id)}"
    return f"{prefix}{segment(run_id)}{tail}"


def ref_of(request: Request) -> str:
    """The run id (or prefix) a request names, decoded once."""
    return unquote(request.path_params["ref"])


class RawRunRef:
    """The middleware: routes ``/runs/REF/...`` on the raw path, so the route's ``{ref}`` is one segment."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = routed(scope)
        await self.app(scope, receive, send)


def routed(scope: Scope) -> Scope:
    """``scope`` with a run's id kept percent-encoded in ``path`` (it is decoded by ``ref_of``)."""
    raw: bytes = scope.get("raw_path") or quote(scope.get("path", "")).encode("ascii")
    text = raw.decode("latin-1").partition("?")[0]
    prefix = next((p for p in PREFIXES if text.startswith(p)), None)
    if prefix is None:
        return scope
    ref_raw, slash, rest = text[len(prefix):].partition("/")
    ref = unquote(ref_raw)
    if not ref:  # the query form, for the ids a path cannot carry
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        ref = next((value for key, value in pairs if key == "id"), "")
        if not ref:
            return scope
    changed: dict[str, Any] = {"path": prefix + quote(segment(ref), safe="%") + slash + unquote(rest)}
    return {**scope, **changed}
