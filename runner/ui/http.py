"""The console's HTTP plumbing: rendering, JSON answers, reading bodies and forms, redirects, refusals.

The handlers (``pages``, ``api``) use these; none of them reads a store. Every refusal is one line:
JSON under ``/api/``, else a small page; anything unexpected a fixed 500 with the safety headers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .._text import storable
from ..errors import AmbiguousRunId, RunnerError, RunNotFound, StoreError
from .guard import HEADERS, MAX_FORM_BYTES
from .query import BadQuery
from .refs import run_path, segment  # noqa: F401 (segment: kept where it was)
from .state import Console

MAX_BY_CHARS = 100  # a decider's name from the --by-header header


def render(request: Request, name: str, status: int = 200, headers: Mapping[str, str] | None = None,
           **values: Any) -> HTMLResponse:
    """A template rendered with the console's common values (read-only, the path).

    The log keeps a lone surrogate from a model's JSON exactly; UTF-8 cannot, so the page shows U+FFFD there.
    """
    console: Console = request.state.console
    html = console.templates.get_template(name).render(read_only=console.read_only, path=request.url.path,
                                                       **values)
    return HTMLResponse(storable(html), status_code=status, headers=headers)


def json_response(value: Any, status: int = 200) -> Response:
    """JSON as the CLI prints it: every non-ASCII and control character escaped by JSON itself."""
    return Response(json.dumps(value, ensure_ascii=True, default=str), status_code=status,
                    media_type="application/json")


def attachment(name: str) -> dict[str, str]:
    """The header that downloads as ``name``, its characters past letters, digits, ``.``, ``_`` and ``-`` as ``_``."""
    return {"content-disposition": f'attachment; filename="{re.sub(r"[^A-Za-z0-9._-]", "_", name)}"'}


def media_type(request: Request) -> str:
    """The request's ``Content-Type`` without its parameters, lower case ("" when it has none)."""
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


async def form(request: Request) -> dict[str, str]:
    """The urlencoded fields of a POST (the first value of each), refusing a body past ``MAX_FORM_BYTES``.

    Only what an HTML form sends: a ``text/plain`` body is what a page on another site can post without asking.
    """
    body = await bounded_body(request)
    if body and media_type(request) != "application/x-www-form-urlencoded":
        raise HTTPException(415, "a form is sent as application/x-www-form-urlencoded")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise HTTPException(400, f"unreadable form: {exc}") from None
    return {key: values[0] for key, values in fields.items()}


async def bounded_body(request: Request) -> bytes:
    """The request's body, refused (413) past ``MAX_FORM_BYTES``."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise HTTPException(413, f"request body over {MAX_FORM_BYTES // 1024} KiB")
        chunks.append(chunk)
    return b"".join(chunks)


def decider_of(request: Request) -> str:
    """Who acts with this request: the name in the console's ``by_header`` when it has one, else its ``--by``.

    A proxy in front sets the header; the name is checked (UTF-8, printable, at most ``MAX_BY_CHARS``) and a
    bad one refused (400) before anything is logged. Without such a proxy anyone with the token can forge it.
    """
    console: Console = request.state.console
    raw = request.headers.get(console.by_header) if console.by_header is not None else None
    if raw is None:
        return console.actions.decider
    try:
        name = raw.encode("latin-1").decode("utf-8").strip()  # HTTP carries bytes; Starlette reads them as latin-1
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise HTTPException(400, f"header {console.by_header} is not UTF-8 text") from None
    if not name or len(name) > MAX_BY_CHARS or not name.isprintable():
        raise HTTPException(400, f"header {console.by_header} must be a printable name of 1 to {MAX_BY_CHARS} "
                                 "characters")
    return name


def redirect(url: str) -> RedirectResponse:
    """A 303 to ``url``: a form's answer, so reloading the page posts nothing again."""
    return RedirectResponse(url, status_code=303)


def run_url(run_id: str, note: str | None = None) -> str:
    """The run page's URL (the id one path segment), with the key of a note to show there."""
    path = run_path(run_id)
    return path + (("&" if "?" in path else "?") + f"note={note}" if note else "")


async def failed(request: Request, exc: Exception) -> Response:
    """Every refusal as one line: JSON ``{"error": ...}`` under ``/api/``, else a small page."""
    if isinstance(exc, HTTPException):
        status, text = exc.status_code, str(exc.detail)
    elif isinstance(exc, RunNotFound):
        status, text = 404, str(exc)
    elif isinstance(exc, (BadQuery, AmbiguousRunId)):
        status, text = 400, str(exc)
    elif isinstance(exc, StoreError):  # the store could not answer
        status, text = 503, str(exc)
    elif isinstance(exc, RunnerError):  # an action refused, a run that cannot be resumed
        status, text = 409, str(exc)
    else:
        raise exc
    if request.url.path.startswith("/api/"):
        return json_response({"error": text}, status)
    return render(request, "error.html", status=status, message=text, code=status)


async def crashed(request: Request, exc: Exception) -> Response:
    """An unexpected error: a fixed line, with the safety headers (this answer is sent outside the gate)."""
    headers = {name.decode(): value.decode() for name, value in HEADERS}
    return Response("Internal Server Error\n", status_code=500, media_type="text/plain", headers=headers)


HANDLERS: dict[Any, Any] = {HTTPException: failed, RunnerError: failed, BadQuery: failed, 500: crashed}
