"""The console's gate: the token, same-origin actions, a read-only mode and the safety headers.

One ASGI middleware in front of every route, so no page or API route can forget a check.
Loopback without a token also checks the ``Host`` header: a page on another site that rebinds
its DNS name to 127.0.0.1 would otherwise be same-origin with the console and read it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.requests import cookie_parser

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "runner_ui_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost"})
# Scripts and styles only from the console itself: a stored <script> that escaped escaping still cannot run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


def loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or a Host header's name) is this machine only.

    An address, not a name that looks like one: ``127.0.0.1.nip.io`` is a DNS name anyone can point here.
    """
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


class Guard:
    """The middleware: refuses what the console must not do, and adds the safety headers to every answer.

    ``token``: every request carries it (``Authorization: Bearer``, or the cookie set by opening a URL
    with ``?token=``). A state-changing request must be a POST from the console's own origin (its
    ``Origin``, else its ``Referer``); ``read_only`` refuses every one.
    """

    def __init__(self, app: App, *, token: str | None, read_only: bool) -> None:
        self.app, self.token, self.read_only = app, token, read_only
        # The cookie holds the token percent-encoded: a space, ``;`` or ``,`` would end a raw cookie value.
        self.cookie_value = quote(token, safe="") if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            status, text = refusal
            await (json_line if scope.get("path", "").startswith("/api/") else plain)(send, status, text)
            return
        if self.token is not None and scope["method"] == "GET" and self._query_token(scope) is not None:
            await self._set_cookie(scope, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        """The status and one-line reason a request is refused with, or None to let it through."""
        host = headers.get("host", "")
        if self.token is None and not loopback(_hostname(host)):
            return 403, f"this console answers requests for 127.0.0.1 or localhost only, not {host!r}"
        if self.token is not None and not self._authorized(scope, headers):
            return 401, "this console needs its token: open the URL it printed (with ?token=), or send a bearer token"
        method = scope["method"]
        if method in SAFE_METHODS:
            return None
        if self.read_only:
            return 403, "this console is read-only: it takes no action"
        if method != "POST":
            return 405, f"{method} is not an action here: actions are POSTs"
        source = headers.get("origin") or headers.get("referer")
        if source is not None and _origin(source) != f"{scope.get('scheme', 'http')}://{host}".lower():
            return 403, "refused: this action came from another origin"
        return None

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        assert self.cookie_value is not None
        given = [headers.get("authorization", "").removeprefix("Bearer ").strip(), self._query_token(scope) or ""]
        # Parsed as browsers send cookies: a malformed cookie of another app on localhost hides none of ours.
        cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE, "")
        return (any(value and hmac.compare_digest(value.encode(), self.token.encode()) for value in given)
                or (bool(cookie) and hmac.compare_digest(cookie.encode(), self.cookie_value.encode())))

    def _query_token(self, scope: Scope) -> str | None:
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        return next((value for key, value in pairs if key == "token"), None)

    async def _set_cookie(self, scope: Scope, send: Send) -> None:
        """Answer ``GET /x?token=T`` with the cookie and a redirect to ``/x`` without the token in its URL.

        The path is percent-encoded and starts with one ``/``: ``//evil.example`` would be another site.
        """
        pairs = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k != "token"]
        target = "/" + quote(scope.get("path", "/")).lstrip("/") + (f"?{urlencode(pairs)}" if pairs else "")
        cookie = f"{COOKIE}={self.cookie_value}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", target.encode("ascii")), (b"set-cookie", cookie.encode("ascii")),
                                *HEADERS]})
        await send({"type": "http.response.body", "body": b""})


def _hostname(host: str) -> str:
    """The name in a ``Host`` header, without its port."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case (``null`` and junk give themselves)."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else url.strip().lower()


async def plain(send: Send, status: int, text: str) -> None:
    """A one-line plain-text answer, with the safety headers."""
    await answer(send, status, b"text/plain; charset=utf-8", (text + "\n").encode())


async def json_line(send: Send, status: int, text: str) -> None:
    """A refusal as the JSON API answers every one: ``{"error": "one line"}``."""
    await answer(send, status, b"application/json", json.dumps({"error": text}, ensure_ascii=True).encode())


async def answer(send: Send, status: int, content_type: bytes, body: bytes) -> None:
    """A whole answer from the gate itself, with the safety headers."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": body})
