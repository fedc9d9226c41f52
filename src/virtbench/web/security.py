"""Who may do what: the token, browser sessions, CSRF, and the request limits.

- The token is compared with hmac.compare_digest over fixed-length digests (no timing or
  length oracle). The API takes it as ``Authorization: Bearer``; the browser trades it once
  for a signed session cookie (HttpOnly, SameSite=Strict) at /login.
- Every form that changes state carries a CSRF value bound to the session (HMAC of its
  nonce); a POST without it is refused even with a valid cookie.
- Sessions are stateless (signed, with an expiry) and signed with a key derived from the
  token, so changing the token logs everybody out.
- State never changes on GET: the write dependencies below only exist on POST/DELETE routes.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .settings import Settings

SESSION_COOKIE = "vb_session"
LOGIN_COOKIE = "vb_login"
"""Double-submit CSRF value of the login form (there is no session yet to bind it to)."""
PUBLIC_PATHS = ("/login", "/static/", "/healthz")
"""What a private instance serves before a login."""
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class Viewer:
    """The requester as far as permissions go."""

    authenticated: bool
    via: str = ""
    """'bearer' or 'session'."""
    csrf: str = ""
    """CSRF value for this session's forms ('' without a session)."""

    @property
    def can_write(self) -> bool:
        return self.authenticated


class Auth:
    def __init__(self, settings: Settings) -> None:
        if not settings.token:
            raise ValueError("a token is required")
        self.settings = settings
        self._token = _digest(settings.token)
        self._key = hmac.new(settings.token.encode(), b"virtbench-web-session-v1", hashlib.sha256).digest()
        self.failures = FailureLimiter()

    # -- the token -------------------------------------------------------------------------
    def token_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(_digest(candidate), self._token)

    # -- sessions ----------------------------------------------------------------------------
    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        payload = f"v1.{int(time.time())}.{secrets.token_hex(16)}"
        return f"{payload}.{self._sign(payload)}"

    def session_nonce(self, cookie: str | None) -> str | None:
        """The session's nonce if the cookie is ours and not expired."""
        if not cookie or cookie.count(".") != 3:
            return None
        payload, _, sig = cookie.rpartition(".")
        if not hmac.compare_digest(sig, self._sign(payload)):
            return None
        _, issued, nonce = payload.split(".")
        if not issued.isdigit() or time.time() - int(issued) > self.settings.session_hours * 3600:
            return None
        return nonce

    def csrf_for(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")[:40]

    # -- the requester -------------------------------------------------------------------------
    def viewer(self, request: Request) -> Viewer:
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            return Viewer(self.token_ok(header[7:].strip()), "bearer")
        nonce = self.session_nonce(request.cookies.get(SESSION_COOKIE))
        if nonce:
            return Viewer(True, "session", self.csrf_for(nonce))
        return Viewer(False)


class FailureLimiter:
    """Slows down guessing: more than LIMIT failed attempts a minute from one client get 429."""

    LIMIT = 20

    def __init__(self) -> None:
        self._seen: dict[str, deque[float]] = defaultdict(deque)

    def _recent(self, client: str) -> deque[float]:
        q = self._seen[client]
        while q and time.monotonic() - q[0] > 60:
            q.popleft()
        return q

    def blocked(self, client: str) -> bool:
        return len(self._recent(client)) >= self.LIMIT

    def failed(self, client: str) -> None:
        self._recent(client).append(time.monotonic())
        if len(self._seen) > 10000:  # bounded memory whatever clients do
            self._seen.clear()


def client_of(request: Request) -> str:
    return request.client.host if request.client else "?"


def auth_of(request: Request) -> Auth:
    return request.app.state.auth


def require_api_write(request: Request) -> Viewer:
    """API writes: a Bearer token, nothing else (cookies are never enough for the API)."""
    auth = auth_of(request)
    client = client_of(request)
    if auth.failures.blocked(client):
        raise HTTPException(429, "too many failed attempts; wait a minute")
    header = request.headers.get("authorization", "")
    if header[:7].lower() != "bearer ":
        raise HTTPException(401, "this changes state: send the token as 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    if not auth.token_ok(header[7:].strip()):
        auth.failures.failed(client)
        raise HTTPException(403, "wrong token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return Viewer(True, "bearer")


def require_read(request: Request) -> Viewer:
    """Reads are open unless the instance is private (then a token or a session is needed)."""
    viewer = auth_of(request).viewer(request)
    if request.app.state.settings.private and not viewer.authenticated:
        raise HTTPException(401, "this instance is private: send the token as 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    return viewer


def check_form_write(request: Request, csrf: str | None) -> Viewer:
    """Browser writes: a valid session cookie and the CSRF value of that session's form."""
    viewer = auth_of(request).viewer(request)
    if viewer.via != "session" or not viewer.authenticated:
        raise HTTPException(403, "log in with the token first")
    if not csrf or not hmac.compare_digest(csrf, viewer.csrf):
        raise HTTPException(403, "the form expired or did not come from this site; reload the page and retry")
    _check_origin(request)
    return viewer


def _check_origin(request: Request) -> None:
    """Browsers send Origin on POST; a foreign one is a cross-site request whatever else it has."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = request.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise HTTPException(403, "cross-site request refused")


def cookie_args(settings: Settings, max_age: int | None = None) -> dict[str, Any]:
    return {"httponly": True, "samesite": "strict", "secure": settings.secure_cookies, "path": "/",
            "max_age": max_age}


# -- ASGI middleware (pure ASGI: they see every response, streamed or not) ----------------------
class SecurityHeaders:
    """CSP without inline scripts or styles, no framing, no sniffing, no referrer, no caching."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
                            (b"cross-origin-opener-policy", b"same-origin")]
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimit:
    """413 for any request body over the limit, declared or streamed, before a handler parses it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                await _plain(send, 413, f"request body larger than {self.limit} bytes")
                return
        seen = 0
        started = rejected = False

        async def limited_receive() -> Message:
            nonlocal seen, rejected
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    if not started and not rejected:  # answer now: the app may swallow the exception
                        rejected = True
                        await _plain(send, 413, f"request body larger than {self.limit} bytes")
                    raise _TooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if rejected:
                return  # the 413 is out; whatever the app makes of the aborted body is dropped
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            pass


class _TooLarge(Exception):
    pass


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class PrivateGate:
    """On a private instance nothing but the login page (and its CSS/JS) is served to strangers."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(PUBLIC_PATHS):
            await self.app(scope, receive, send)
            return
        viewer = self.auth.viewer(Request(scope))
        if viewer.authenticated:
            await self.app(scope, receive, send)
            return
        if path.startswith(("/api", "/openapi.json")):
            body = b'{"detail":"this instance is private: send the token as \'Authorization: Bearer <token>\'"}'
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", b"/login"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
