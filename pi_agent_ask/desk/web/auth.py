"""Who may use the web desk: one-time sign-in codes, sessions, CSRF tokens, the sign-in limit.

Rules, stated once:

1. A sign-in code is made only for a caller holding the desk's bearer token
   (``pi-agent-ask desk login-url``) or by the desk itself at start. It is 128 random bits,
   valid for :data:`CODE_LIFETIME` seconds and for one use: it is removed when it is used,
   whether the sign-in then succeeds or not. A fetch no person asked for (a chat app's link
   preview, a prefetch) tries no code: it gets a page that posts the code (``app.py``), so
   the person's own opening of the link still signs in.
2. Using a code opens a session: a random session id (the cookie's value) and a random CSRF
   token (the page sends it back in a header with every state-changing request). Sessions live
   in the desk's memory: a desk restart signs everyone out.
3. Sign-in attempts are limited across all clients (an attacker can change addresses): at most
   :data:`ATTEMPT_LIMIT` failed attempts per :data:`ATTEMPT_WINDOW` seconds; past that every
   attempt, good or bad, is refused (and its code left unused) until the window moves on,
   :meth:`Auth.retry_after` seconds later.
4. Codes and CSRF tokens are compared in constant time (a session is found by its id, 256
   random bits, in a dict).

The clock is a parameter (``trio.current_time`` in the desk), so tests move time by hand.
"""

from __future__ import annotations

import hmac
import secrets
from collections import deque
from collections.abc import Callable
from typing import Literal

import attrs

__all__ = [
    "ATTEMPT_LIMIT",
    "ATTEMPT_WINDOW",
    "CODE_LIFETIME",
    "SESSION_LIFETIME",
    "Auth",
    "Session",
    "SignIn",
]

CODE_LIFETIME = 600.0
"""Seconds a sign-in code stays valid (10 minutes)."""
SESSION_LIFETIME = 7 * 24 * 3600.0
"""Seconds a session stays signed in."""
ATTEMPT_LIMIT = 10
ATTEMPT_WINDOW = 60.0

SignIn = Literal["ok", "invalid", "limited"]
"""What a sign-in attempt came to."""


@attrs.frozen
class Session:
    id: str
    csrf: str
    expires: float


@attrs.define(eq=False)
class Auth:
    """The desk's sign-in codes and sessions (see the module docstring)."""

    clock: Callable[[], float]
    used: Callable[[str], None] = lambda _code: None
    """Hears each code a sign-in used (the desk's terminal, whose sign-in lines show one)."""
    _codes: dict[str, float] = attrs.field(factory=dict)
    """Code -> expiry time."""
    _sessions: dict[str, Session] = attrs.field(factory=dict)
    _failures: deque[float] = attrs.field(factory=deque)

    def new_code(self) -> str:
        now = self.clock()
        self._codes = {code: end for code, end in self._codes.items() if end > now}
        code = secrets.token_urlsafe(16)
        self._codes[code] = now + CODE_LIFETIME
        return code

    def sign_in(self, code: str) -> tuple[SignIn, Session | None]:
        """Use ``code``: a new session when it is valid, else why not."""
        now = self.clock()
        if len(self._recent_failures(now)) >= ATTEMPT_LIMIT:
            return "limited", None
        found = None
        for known in self._codes:
            if hmac.compare_digest(known.encode(), code.encode("utf-8", "replace")):
                found = known
        expiry = self._codes.pop(found, 0.0) if found is not None else 0.0
        if expiry <= now:
            self._failures.append(now)
            return "invalid", None
        session = Session(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            expires=now + SESSION_LIFETIME,
        )
        self._sessions[session.id] = session
        self.used(code)
        return "ok", session

    def retry_after(self) -> float:
        """Seconds until a sign-in attempt is tried again (``0``: it is now): past the limit,
        until the oldest failure in the window leaves it."""
        now = self.clock()
        recent = self._recent_failures(now)
        if len(recent) < ATTEMPT_LIMIT:
            return 0.0
        return recent[-ATTEMPT_LIMIT] + ATTEMPT_WINDOW - now

    def _recent_failures(self, now: float) -> deque[float]:
        """The failed attempts of the last :data:`ATTEMPT_WINDOW` seconds, oldest first (the
        older ones are dropped)."""
        while self._failures and self._failures[0] <= now - ATTEMPT_WINDOW:
            self._failures.popleft()
        return self._failures

    def session(self, session_id: str | None) -> Session | None:
        """The live session with this cookie value, if any."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires <= self.clock():
            del self._sessions[session_id]
            return None
        return session

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(
            session.csrf.encode(), token.encode("utf-8", "replace")
        )

    def sign_out(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
