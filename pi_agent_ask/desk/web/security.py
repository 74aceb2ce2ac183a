"""The web desk's request checks and response headers.

- Every response carries a strict Content-Security-Policy (scripts, styles and connections
  from the desk itself only; no inline script or style, no frames, no plugins), ``nosniff``,
  no referrer, no framing and no caching.
- A state-changing request (every ``POST``) passes when it comes with the session cookie, an
  ``Origin`` naming the host the request reached (its ``Host``; the desk's Host check already
  ran), over ``http`` or ``https`` (a TLS proxy in front of the desk, ``--tls-elsewhere``,
  makes the browser's scheme differ from the desk's), and the session's CSRF token in
  ``X-CSRF-Token``.
  A cross-site page fails all three: the browser withholds the ``SameSite=Strict`` cookie, its
  ``Origin`` is its own, and it cannot read the token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from starlette.datastructures import MutableHeaders
from starlette.requests import Request

from pi_agent_ask.desk.web.auth import Auth, Session

__all__ = [
    "COOKIE",
    "CSP",
    "CSRF_HEADER",
    "NOT_SIGNED_IN",
    "PREVIEW_AGENTS",
    "SIGN_IN_COOKIE",
    "SecurityHeaders",
    "is_preview",
    "refusal",
    "same_origin",
    "session_of",
]

COOKIE = "pi_agent_ask_session"
SIGN_IN_COOKIE = "pi_agent_ask_sign_in"
"""Set by a page whose form posts a sign-in code (the page a link preview gets, the limit
page's Try again) and posted back in that form: the sign-in ``POST`` comes from that page in
this browser, not from another site's form (login CSRF)."""
CSRF_HEADER = "x-csrf-token"
NOT_SIGNED_IN = "Not signed in: open a new sign-in link (pi-agent-ask desk login-url)."
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-store",
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware: the headers above on every HTTP response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)


PREVIEW_AGENTS: Final = (
    "bot",
    "preview",
    "facebookexternalhit",
    "whatsapp",
    "crawler",
    "spider",
    "embedly",
    "iframely",
)
"""Words in the User-Agent of the robots that fetch a link to preview it (Slackbot, Discordbot,
TelegramBot, Twitterbot, SkypeUriPreview, WhatsApp, iMessage's facebookexternalhit, ...)."""


def is_preview(request: Request) -> bool:
    """A fetch of a link that no person opened: a ``HEAD``, a browser's prefetch or prerender,
    or a link-preview robot (by its User-Agent). A sign-in link fetched so is not used up."""
    if request.method == "HEAD":
        return True
    purpose = (request.headers.get("sec-purpose") or request.headers.get("purpose") or "").lower()
    if "prefetch" in purpose or "prerender" in purpose:
        return True
    agent = request.headers.get("user-agent", "").lower()
    return any(word in agent for word in PREVIEW_AGENTS)


def same_origin(request: Request, origin: str | None) -> bool:
    """Whether ``origin`` is the page this request's host serves."""
    host = request.headers.get("host")
    if not host or origin is None:
        return False
    return origin in (f"http://{host}", f"https://{host}")


def session_of(auth: Auth, request: Request) -> Session | None:
    return auth.session(request.cookies.get(COOKIE))


def refusal(
    auth: Auth, request: Request, token: str | None = None
) -> tuple[int, str] | tuple[None, Session]:
    """Why a state-changing request is refused (status, sentence), or its session.
    ``token``: the CSRF token a page's own form posted (Sign out), where no script sets the
    header."""
    session = session_of(auth, request)
    if session is None:
        return 401, NOT_SIGNED_IN
    if not same_origin(request, request.headers.get("origin")):
        return 403, "Refused: the request does not come from the desk's own page."
    if not auth.csrf_ok(session, request.headers.get(CSRF_HEADER) or token):
        return 403, "Refused: the page's security token is missing or wrong; reload the page."
    return None, session
