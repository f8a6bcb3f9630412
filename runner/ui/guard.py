"""The console's gate: the token, same-origin actions, a read-only mode and the safety headers.

One ASGI middleware in front of every route, so no page or API route can forget a check.
Browsers send a host's cookies to all its ports, so the cookie only reads: acting also takes a key the
page keeps in ``sessionStorage`` (per host and port). Loopback without a token checks ``Host`` too.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.requests import cookie_parser

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "runner_ui_token"  # the prefix of a console's cookie name: ``runner_ui_token_<console id>``
KEY_FIELD = "_key"  # the form field, and
KEY_HEADER = "x-runner-key"  # the header, that carry the key to act with a cookie
MAX_FORM_BYTES = 256 * 1024  # a form or JSON body past this is refused: an observation edit fits easily
FORM = "application/x-www-form-urlencoded"
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


class Secrets(NamedTuple):
    """What a console with a token hands out: its cookie's name and value (to read) and the key to act.

    Each is derived from the token: two consoles with other tokens have other cookies, and neither value
    is the token, so a cookie another server receives is no bearer token.
    """

    cookie: str
    read: str
    act: str


def secrets_for(token: str) -> Secrets:
    """The cookie name, the cookie value and the key to act of the console whose token is ``token``."""
    def derived(purpose: str) -> str:
        return hmac.new(token.encode(), f"runner ui {purpose}".encode(), hashlib.sha256).hexdigest()

    return Secrets(f"{COOKIE}_{derived('console id')[:12]}", derived("read"), derived("act"))


class Guard:
    """The middleware: refuses what the console must not do, and adds the safety headers to every answer.

    ``token``: every request carries it (``Authorization: Bearer``), or the cookie set by opening a URL
    with ``?token=``, which also hands the page its key to act. A state-changing request must be a POST
    from the console's own origin (its ``Origin``, else its ``Referer``); ``read_only`` refuses every one.
    """

    def __init__(self, app: App, *, token: str | None, read_only: bool) -> None:
        self.app, self.token, self.read_only = app, token, read_only
        self.secrets = secrets_for(token) if token is not None else None

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
        if self._needs_key(scope, headers):
            receive, keyed = await self._key_in_form(receive, headers)
            if not keyed:
                await (json_line if scope.get("path", "").startswith("/api/") else plain)(send, 403, NO_KEY)
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
        return self._by_token(scope, headers) or self._by_cookie(headers)

    def _by_token(self, scope: Scope, headers: dict[str, str]) -> bool:
        """Whether the request carries the token itself (a bearer header or ``?token=``): it may do anything."""
        assert self.token is not None
        given = [headers.get("authorization", "").removeprefix("Bearer ").strip(), self._query_token(scope) or ""]
        return any(value and _same(value, self.token) for value in given)

    def _by_cookie(self, headers: dict[str, str]) -> bool:
        """Whether the request carries this console's cookie.

        Parsed as browsers send cookies: a malformed cookie of another app on localhost hides none of ours.
        """
        assert self.secrets is not None
        cookie = cookie_parser(headers.get("cookie", "")).get(self.secrets.cookie, "")
        return bool(cookie) and _same(cookie, self.secrets.read)

    def _needs_key(self, scope: Scope, headers: dict[str, str]) -> bool:
        """Whether this is an action let in by the cookie alone, without the key in its header."""
        if self.secrets is None or scope["method"] in SAFE_METHODS or self._by_token(scope, headers):
            return False
        return not _same(headers.get(KEY_HEADER, ""), self.secrets.act)

    async def _key_in_form(self, receive: Receive, headers: dict[str, str]) -> tuple[Receive, bool]:
        """Whether a form's ``_key`` field is the key; the body is read here and handed on to the route as sent."""
        assert self.secrets is not None
        if headers.get("content-type", "").partition(";")[0].strip().lower() != FORM:
            return receive, False
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return receive, False
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = bool(message.get("more_body")) and size <= MAX_FORM_BYTES
        body = b"".join(chunks)
        try:
            fields = parse_qsl(body.decode("latin-1"), keep_blank_values=True, max_num_fields=50)
        except ValueError:
            return receive, False
        keyed = any(name == KEY_FIELD and _same(value, self.secrets.act) for name, value in fields)
        sent = False

        async def again() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return again, keyed and size <= MAX_FORM_BYTES

    def _query_token(self, scope: Scope) -> str | None:
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        return next((value for key, value in pairs if key == "token"), None)

    async def _set_cookie(self, scope: Scope, send: Send) -> None:
        """Answer ``GET /x?token=T`` with the cookie and a redirect to ``/x#key=K`` without the token in its URL.

        The fragment reaches only the page's script, which keeps the key in ``sessionStorage``. The path is
        percent-encoded and starts with one ``/``: ``//evil.example`` would be another site.
        """
        assert self.secrets is not None
        pairs = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k != "token"]
        target = ("/" + quote(scope.get("path", "/")).lstrip("/") + (f"?{urlencode(pairs)}" if pairs else "")
                  + f"#key={self.secrets.act}")
        cookie = f"{self.secrets.cookie}={self.secrets.read}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", target.encode("ascii")), (b"set-cookie", cookie.encode("ascii")),
                                *HEADERS]})
        await send({"type": "http.response.body", "body": b""})


NO_KEY = ("refused: this console's cookie alone cannot act; open the URL runner ui printed in this tab, "
          "or send its token as a bearer token")


def _same(given: str, secret: str) -> bool:
    """Whether ``given`` is ``secret``, compared in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode("utf-8", "surrogateescape"))


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
