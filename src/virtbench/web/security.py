"""Who may do what: the token, browser sessions, CSRF, and the request limits.

- The token is compared with hmac.compare_digest over fixed-length digests (no timing or
  length oracle). The API takes it as ``Authorization: Bearer``; the browser trades it once
  for a signed session cookie (HttpOnly, SameSite=Strict) at /login. A token `serve` is
  given must look random (token_problem); one over MAX_TOKEN_CHARS is refused unhashed.
- Wrong tokens are counted per client address (API, private reads, the login form); past
  FailureLimiter.LIMIT a minute they get 429. The right token is checked first and always
  accepted: the limit never locks out its holder (who may share the address with a guesser).
  Guessing is made hopeless by the token's strength, the limit only keeps it expensive.
- Every form that changes state carries a CSRF value bound to the session (HMAC of its
  nonce); a POST without it is refused even with a valid cookie.
- Sessions are stateless (signed, with an expiry) and signed with a key derived from the
  token, so changing the token logs everybody out.
- State never changes on GET: the write dependencies below only exist on POST/DELETE routes.
"""
from __future__ import annotations

import hashlib
import hmac
import math
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


MAX_TOKEN_CHARS = 256
"""Longer candidates are refused before hashing; serve refuses a longer token too."""
MIN_TOKEN_CHARS = 24
STRENGTH_CHARS = 72
"""The estimator scores the first this many characters (zxcvbn's own limit; it slows down
quadratically past it): a token whose first 72 characters are strong is strong."""


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def same(a: str, b: str) -> bool:
    """Constant-time equality of any two strings (hmac.compare_digest refuses non-ASCII str,
    which a cookie or form value may hold: that was an HTTP 500)."""
    return hmac.compare_digest(_digest(a), _digest(b))


def token_problem(token: str) -> str | None:
    """Why `token` is too weak to guard the app (None if it is fine): its length, characters
    an HTTP header cannot carry, or a password-strength estimator's verdict (zxcvbn: words,
    keyboard walks, sequences, repeats, dates) below its top score. A rule, not a list: a
    typed phrase passes only when the estimator finds it as hard to guess as a random one."""
    if len(token) > MAX_TOKEN_CHARS:
        return f"the token is longer than {MAX_TOKEN_CHARS} characters"
    if not token.isascii():
        return "the token has non-ASCII characters, which an HTTP Authorization header cannot carry"
    if token.strip() != token or any(not c.isprintable() for c in token):
        return "the token has spaces at its ends or unprintable characters"
    if len(token) < MIN_TOKEN_CHARS:
        return f"the token has {len(token)} characters; at least {MIN_TOKEN_CHARS} are needed"
    from zxcvbn import zxcvbn

    rated = zxcvbn(token[:STRENGTH_CHARS], max_length=STRENGTH_CHARS)
    if rated["score"] < 4:
        why = str((rated.get("feedback") or {}).get("warning") or "").rstrip(".")
        return (f"the token is easy to guess: the zxcvbn strength estimator rates it {rated['score']} of 4"
                + (f" ({why[:1].lower() + why[1:]})" if why else " (words, keyboard rows or sequences)"))
    return None


@dataclass(frozen=True)
class Viewer:
    """The requester as far as permissions go."""

    authenticated: bool
    via: str = ""
    """'bearer' or 'session'."""
    csrf: str = ""
    """CSRF value for this session's forms ('' without a session)."""
    throttled: float = 0.0
    """A wrong bearer token from a client past the failure limit: seconds until it may retry."""

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
        if candidate is None or len(candidate) > MAX_TOKEN_CHARS:
            return False
        return hmac.compare_digest(_digest(candidate), self._token)

    def check_token(self, candidate: str | None, client: str) -> float | None:
        """None for the right token (never limited); else the failure is counted and the
        seconds the client should wait (0.0 while under the limit) are returned."""
        if self.token_ok(candidate):
            return None
        self.failures.failed(client)
        return self.failures.wait(client)

    # -- sessions ----------------------------------------------------------------------------
    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        payload = f"v1.{int(time.time())}.{secrets.token_hex(16)}"
        return f"{payload}.{self._sign(payload)}"

    def session_nonce(self, cookie: str | None) -> str | None:
        """The session's nonce if the cookie is ours and not expired."""
        if not cookie or cookie.count(".") != 3:
            return None
        payload, _, sig = cookie.rpartition(".")
        if not same(sig, self._sign(payload)):
            return None
        _, issued, nonce = payload.split(".")
        if not issued.isdigit() or time.time() - int(issued) > self.settings.session_hours * 3600:
            return None
        return nonce

    def csrf_for(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")[:40]

    # -- the requester -------------------------------------------------------------------------
    def viewer(self, request: Request) -> Viewer:
        """Worked out once per request (kept in its state: pages ask again when they render),
        so a wrong bearer token counts as one failure."""
        known = getattr(request.state, "viewer", None)
        if isinstance(known, Viewer):
            return known
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            wait = self.check_token(header[7:].strip(), client_of(request))
            viewer = Viewer(True, "bearer") if wait is None else Viewer(False, "bearer", throttled=wait)
        elif nonce := self.session_nonce(request.cookies.get(SESSION_COOKIE)):
            viewer = Viewer(True, "session", self.csrf_for(nonce))
        else:
            viewer = Viewer(False)
        request.state.viewer = viewer
        return viewer


class FailureLimiter:
    """Failed token checks of each client in the last WINDOW seconds; past LIMIT, its wrong
    tokens get 429 (the right one is checked before and never counted). Hand-written: the
    rate limiters made for Starlette (slowapi) count every request, so they would lock out
    the right token too."""

    LIMIT = 20
    WINDOW = 60.0
    MAX_CLIENTS = 10000

    def __init__(self) -> None:
        self._seen: dict[str, deque[float]] = defaultdict(deque)

    def _recent(self, client: str) -> deque[float]:
        q = self._seen[client]
        while q and time.monotonic() - q[0] > self.WINDOW:
            q.popleft()
        return q

    def wait(self, client: str) -> float:
        """Seconds until this client is under the limit again (0.0: it is)."""
        q = self._recent(client)
        if len(q) <= self.LIMIT:
            return 0.0
        return max(1.0, self.WINDOW - (time.monotonic() - q[-self.LIMIT - 1]))

    def failed(self, client: str) -> None:
        if len(self._seen) > self.MAX_CLIENTS:  # bounded memory whatever clients do
            for name in [c for c in self._seen if not self._recent(c)]:
                del self._seen[name]
            if len(self._seen) > self.MAX_CLIENTS:
                self._seen.clear()
        self._recent(client).append(time.monotonic())


def client_of(request: Request) -> str:
    return request.client.host if request.client else "?"


def auth_of(request: Request) -> Auth:
    return request.app.state.auth


def too_many(wait: float) -> HTTPException:
    return HTTPException(429, "too many wrong tokens from this address; wait a minute (the right token is "
                              "still accepted)", headers={"Retry-After": str(math.ceil(wait))})


def require_api_write(request: Request) -> Viewer:
    """API writes: a Bearer token, nothing else (cookies are never enough for the API)."""
    header = request.headers.get("authorization", "")
    if header[:7].lower() != "bearer ":
        raise HTTPException(401, "this needs the token: send it as 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    viewer = auth_of(request).viewer(request)
    if viewer.throttled:
        raise too_many(viewer.throttled)
    if not viewer.authenticated:
        raise HTTPException(403, "wrong token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return viewer


def require_read(request: Request) -> Viewer:
    """Reads are open unless the instance is private (then a token or a session is needed)."""
    viewer = auth_of(request).viewer(request)
    if viewer.throttled:
        raise too_many(viewer.throttled)
    if request.app.state.settings.private and not viewer.authenticated:
        raise HTTPException(401, "this instance is private: send the token as 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    return viewer


def check_form_write(request: Request, csrf: str | None) -> Viewer:
    """Browser writes: a valid session cookie and the CSRF value of that session's form."""
    viewer = auth_of(request).viewer(request)
    if viewer.via != "session" or not viewer.authenticated:
        raise HTTPException(403, "log in with the token first")
    if not csrf or not same(csrf, viewer.csrf):
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


async def _plain(send: Send, status: int, text: str, headers: dict[str, str] | None = None) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            *((k.encode(), v.encode()) for k, v in (headers or {}).items())]})
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
        if viewer.throttled:
            await _plain(send, 429, too_many(viewer.throttled).detail, {"retry-after": str(math.ceil(viewer.throttled))})
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
