"""The page's locks: who may load it, who may write through it, what a
browser may do with it.

* **A per-run access token.** `pixie web` draws a random token at start and
  prints it in the URL. The first request carrying it (``?token=``) gets it
  back as an HttpOnly, SameSite=Strict cookie and is redirected to the same
  address without it, so the token stays out of links, history and the
  address bar. Every other request must carry that cookie; anything else gets
  a 403 that explains where the link is. The cookie's name carries the port,
  because browsers share cookies between the ports of one host.
* **The Host header** must name a loopback address when the page listens on
  one: a web page elsewhere cannot point its own host name at 127.0.0.1 (DNS
  rebinding) and read the Notebook through the browser.
* **Writes** are POST only and carry a per-run CSRF token in the form (checked
  in constant time), a browser that says the request is cross-site is
  refused outright, and a form's body is bounded (`MAX_FORM_BYTES`).
* **Every response** carries a strict Content-Security-Policy (own origin
  only, no inline script, no framing), nosniff, no referrer and no caching.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_PARAM = "token"  # noqa: S105 (the name of a query parameter)
CSRF_FIELD = "csrf"
MAX_FORM_BYTES = 1 << 20
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
)

NEEDS_LINK = (
    "This page needs the link `pixie web` printed when it started (it carries this"
    " run's token). Open that link, or restart `pixie web` for a new one."
)


@dataclass(frozen=True, slots=True)
class Secrets:
    """The two per-run tokens: ``access`` opens the page, ``csrf`` signs writes."""

    access: str
    csrf: str


def same(given: str | None, expected: str) -> bool:
    """Constant-time comparison; a missing value never matches."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def cookie_name(scope: Scope) -> str:
    server = scope.get("server")
    port = server[1] if server and server[1] is not None else 0
    return f"pixie_web_{port}"


def _host_allowed(host: str | None, scope: Scope) -> bool:
    """Whether a Host header names a loopback address (on this server's port)."""
    if not host:
        return False
    if host.startswith("["):  # an IPv6 literal, "[::1]:8000"
        name, bracket, rest = host.partition("]")
        name += bracket
        if rest and not rest.startswith(":"):
            return False
        port = rest[1:]
    else:
        name, _, port = host.partition(":")
    server = scope.get("server")
    if port and server and server[1] is not None and port != str(server[1]):
        return False
    return name.lower() in LOOPBACK_HOSTS


class Guard:
    """ASGI middleware in front of every route, static files included."""

    def __init__(self, app: ASGIApp, secrets: Secrets, *, loopback_only: bool = True) -> None:
        self.app = app
        self.secrets = secrets
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # the page speaks nothing else (no websockets)
            await send({"type": "websocket.close", "code": 1008})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers[name] = value
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> Response | None:
        conn = HTTPConnection(scope)
        if self.loopback_only and not _host_allowed(conn.headers.get("host"), scope):
            return PlainTextResponse("This page answers on its loopback address only.", 400)
        name = cookie_name(scope)
        given = conn.query_params.get(TOKEN_PARAM)
        if given is not None:
            if not same(given, self.secrets.access):
                return PlainTextResponse(NEEDS_LINK, 403)
            # Trade the token in the address for a cookie, and drop it from the address.
            rest = [
                (k, v)
                for k, v in parse_qsl(scope.get("query_string", b"").decode())
                if k != TOKEN_PARAM
            ]
            target = scope["path"] + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, 303)
            response.set_cookie(
                name, self.secrets.access, httponly=True, samesite="strict", path="/"
            )
            return response
        if not same(conn.cookies.get(name), self.secrets.access):
            return PlainTextResponse(NEEDS_LINK, 403)
        if scope["method"] == "POST":
            # A form is a note at most (32k characters, percent-encoded): the
            # body is bounded before anything reads it.
            length = conn.headers.get("content-length", "")
            if not length.isdigit():
                return PlainTextResponse("A form must say its length.", 411)
            if int(length) > MAX_FORM_BYTES:
                return PlainTextResponse("That form is too large.", 413)
        cross_site = conn.headers.get("sec-fetch-site") == "cross-site"
        if scope["method"] not in ("GET", "HEAD") and cross_site:
            return PlainTextResponse("Cross-site writes are refused.", 403)
        return None


def csrf_ok(secrets: Secrets, values: Iterable[str | None]) -> bool:
    """Whether the form carried this run's CSRF token (exactly once)."""
    given = [v for v in values if v is not None]
    return len(given) == 1 and same(given[0], secrets.csrf)


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_FIELD",
    "MAX_FORM_BYTES",
    "SECURITY_HEADERS",
    "TOKEN_PARAM",
    "Guard",
    "Secrets",
    "cookie_name",
    "csrf_ok",
    "same",
]
