"""Who may use the dashboard: one-time login codes, the sessions they open, the guard on every request.

As Jupyter's token login: the plane's owner asks for a code with the owner's credential (the
kubeconfig's bearer token: ``yard dashboard``), opens ``/dashboard/login?token=CODE`` once, and
the browser keeps a session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS). A code works
once and for ``CODE_TTL``; a session lasts ``SESSION_TTL``. Sessions live in memory: a restarted
plane asks for a new login. Writes also need the ``X-Yard-Dashboard`` header, which a page of
another site cannot send without a CORS preflight that this server never grants (the CSRF guard
beside SameSite). The clock and the randomness are injected.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiohttp import web
from aiohttp.typedefs import Middleware

from trainyard.dashboard.responses import status

COOKIE = "yard-dashboard"
WRITE_HEADER = "X-Yard-Dashboard"
CODE_TTL = timedelta(minutes=10)
SESSION_TTL = timedelta(days=7)
PREFIX = "/dashboard"
PUBLIC = (f"{PREFIX}/assets/", f"{PREFIX}/login", f"{PREFIX}/api/login-codes")
"""Paths served without a session: the built assets (code, no data), the login itself, code minting
(which checks the owner's credential instead)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Logins:
    owner_token: str | None
    """The credential that may mint codes. None: the plane has none (its plain-HTTP opt-in, where
    its API is open to anyone who reaches it), so neither is the minting of codes."""
    secure: bool = True
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    token: Callable[[], str] = field(default=lambda: secrets.token_urlsafe(32))
    _codes: dict[str, datetime] = field(default_factory=dict)
    _sessions: dict[str, datetime] = field(default_factory=dict)

    def mint(self) -> str:
        """A new one-time code."""
        now = self.clock()
        self._codes = {c: t for c, t in self._codes.items() if t > now}
        code = self.token()
        self._codes[code] = now + CODE_TTL
        return code

    def redeem(self, code: str) -> str | None:
        """The session a valid code opens (the code is spent), or None."""
        expires = self._codes.pop(code, None)
        now = self.clock()
        if expires is None or expires <= now:
            return None
        self._sessions = {s: t for s, t in self._sessions.items() if t > now}
        session = self.token()
        self._sessions[session] = now + SESSION_TTL
        return session

    def valid(self, session: str | None) -> bool:
        if not session:
            return False
        expires = self._sessions.get(session)
        return expires is not None and expires > self.clock()

    def is_owner(self, authorization: str | None) -> bool:
        if self.owner_token is None:
            return True
        if not authorization:
            return False
        scheme, _, given = authorization.strip().partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.owner_token.encode())

    def cookie(self, response: web.StreamResponse, session: str) -> None:
        response.set_cookie(
            COOKIE,
            session,
            path=PREFIX,
            httponly=True,
            secure=self.secure,
            samesite="Strict",
            max_age=int(SESSION_TTL.total_seconds()),
        )

    def middleware(self) -> Middleware:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            path = request.path
            if path.startswith(PUBLIC) or path in (PREFIX, f"{PREFIX}/"):
                return await handler(request)  # the index answers 401 itself, as a page
            if not self.valid(request.cookies.get(COOKIE)):
                return status(401, "Unauthorized", "no dashboard session: run `yard dashboard` for a login link")
            if request.method not in ("GET", "HEAD") and request.headers.get(WRITE_HEADER) != "1":
                return status(403, "Forbidden", f"a dashboard write needs the {WRITE_HEADER}: 1 header")
            return await handler(request)

        return guard
