"""The web desk: the desk's board as a page, on the desk's own listener beside ``/mcp``.

:class:`WebDesk` is a Starlette application (Starlette runs on anyio, so on the desk's Trio
server). The page is rendered on the server from the board's snapshots (``view.py``, Jinja2
templates with autoescaping); a little JavaScript from the package (``static/desk.js``) keeps
it live over server-sent events and sends the person's edits back. The board stays the one
place that decides what is shown: the page reads its snapshots and sends commands through the
channel each form's runtime handed the board, as the terminal does:

- a draft typed on the page is a ``ReplaceDrafts`` command (the form journals it as it does any
  draft change, so a reload, a crash or another device finds it); a team desk keeps drafts
  its own way (:attr:`WebDesk.drafter`) and may refuse one (another desk holds the form): the
  page is told who holds it (``423``) and keeps what the person typed;
- Submit and Cancel are remote responses (``pi-agent-ask:submit``'s path): the form checks the
  answer and the first submission wins; a form already gone is "answered elsewhere";
- "Later" is the terminal's Esc on a background form (the agent's questions wait their turn);
  on a form someone else is on (:attr:`WebDesk.holder`) it changes nothing and says so.

Routes: ``/`` (the page, or the sign-in message), ``/login`` (``GET``: a one-time link opened ->
a session; fetched by a preview, a page that tries nothing; ``POST``, from that page: the code
tried -> a session),
``/login-code`` (``POST`` with the desk's bearer token: a new sign-in URL), ``/session`` (the
browser's session's CSRF token, for a page open from before a new sign-in), ``/events`` (the
live stream), ``/fragment/form`` and ``/fragment/queue`` (parts of the page, for the live
updates), ``/api/*`` (state changes), ``/history`` and ``/history/export``, ``/static``,
``/favicon.ico`` (the desk's icon, ``static/icon.svg``).
"""

from __future__ import annotations

import functools
import hmac
import json
import math
import secrets
import socket
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import attrs
import jinja2
import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from pi_agent_ask.actors.form import RemoteResponse, UserCommand
from pi_agent_ask.desk.board import Board, Shown
from pi_agent_ask.desk.web import history as hist
from pi_agent_ask.desk.web import view
from pi_agent_ask.desk.web.auth import CODE_LIFETIME, SESSION_LIFETIME, Auth, Session
from pi_agent_ask.desk.web.security import (
    COOKIE,
    NOT_SIGNED_IN,
    SIGN_IN_COOKIE,
    SecurityHeaders,
    is_preview,
    refusal,
    same_origin,
    session_of,
)
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import Draft

__all__ = [
    "ANSWERED_ELSEWHERE",
    "KEEPALIVE",
    "DraftRefused",
    "Drafter",
    "WebDesk",
    "form_drafts",
    "web_base_url",
]

HERE = Path(__file__).parent
ICON = HERE / "static" / "icon.svg"
KEEPALIVE = 15.0
"""Seconds between keep-alive comments on an idle live stream (proxies close silent ones)."""
ANSWERED_ELSEWHERE = "This form was already answered elsewhere (on the terminal or another page)."
LINKED_FORM_GONE = (
    "The form this link opened is no longer waiting: it was answered elsewhere (on the terminal "
    "or another page) or its agent withdrew it."
)
NOT_PUT_BACK = (
    ", so the form stays here with your answers: press Later again once the desk can write, "
    "or answer it."
)
"""What Later says after why a put-back was not recorded ("Not saved for later: writing to
the session file failed (...)"): one sentence, saying what to do once."""
MAX_BODY = 4 * 1024 * 1024
SIGN_OUT_HEADERS = {"referrer-policy": "same-origin"}
"""The pages with Sign out in their header: under the desk's usual no-referrer its form's
``POST`` says "Origin: null"; so its own origin is named (a referrer goes to the desk itself
only)."""
TOO_LARGE = (
    f"The request is too large: over the {MAX_BODY // (1024 * 1024)} MiB ({MAX_BODY:,} bytes) "
    "the desk takes at once."
)


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    return Jinja2Templates(env=env)


def web_base_url(scheme: str, host: str, port: int) -> str:
    """The page's address for a listen address: an unspecified one (every interface) is named
    by this machine's host name, which other machines on the network can usually resolve."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def _digest(board: Board, holder: view.Holder) -> str:
    return json.dumps(view.board_digest(board, holder), separators=(",", ":"))


def _differs(seen: str, holder: view.Holder, board: Board) -> bool:
    return _digest(board, holder) != seen


@attrs.define(eq=False)
class BoardEvents:
    """The live stream's events: a ``retry`` line, then the board's digest whenever it
    changes, and a keep-alive comment after :data:`KEEPALIVE` quiet seconds.

    An async iterator, not an async generator: the response is cancelled between two events
    when the page goes away or the desk stops, and a generator left at its ``yield`` would be
    finalised later by the garbage collector (Trio warns of each one)."""

    board: Board
    holder: view.Holder
    signed_in: Callable[[], bool] = lambda: True
    """Whether the stream's session still lives: once it is signed out, the stream ends
    before its next event (within :data:`KEEPALIVE` seconds), telling nothing more."""
    last: str | None = None
    """The digest sent last; ``None`` before the first event."""

    def __aiter__(self) -> BoardEvents:
        return self

    async def __anext__(self) -> str:
        if self.last is None:
            self.last = ""
            return "retry: 1000\n\n"
        while True:
            if not self.signed_in():
                raise StopAsyncIteration
            digest = _digest(self.board, self.holder)
            if digest != self.last:
                self.last = digest
                return f"event: board\ndata: {digest}\n\n"
            with trio.move_on_after(KEEPALIVE) as idle:
                await self.board.wait_for(functools.partial(_differs, self.last, self.holder))
            if idle.cancelled_caught:
                return ": keep-alive\n\n"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _not_routed(request: Request, exc: Exception) -> Response:
    """An unknown path or a wrong method: the API's callers read a JSON sentence, like every
    other refusal of theirs; a page's path gets Starlette's plain text."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if not path.startswith(("/api/", "/login-code")):
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("allow", "POST")
        message = f"{request.method} is not allowed on {path}: use {allowed}."
    else:
        message = (
            f"There is no {path} (the API is /api/draft, /api/submit, /api/cancel, /api/later)."
        )
    return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)


async def _icon(request: Request) -> Response:
    """The desk's icon where a browser looks for one by itself (the pages name it too)."""
    return FileResponse(ICON, media_type="image/svg+xml")


async def _body(request: Request) -> bytes | None:
    """The request's body, or ``None`` when it is over :data:`MAX_BODY`: told from its
    declared length before anything is read, else as it arrives (a chunked body), so an
    oversized one is never held in memory whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None
    body = bytearray()
    async with aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > MAX_BODY:
                return None
    return bytes(body)


@attrs.frozen
class DraftRefused:
    """A draft the desk did not keep, with the sentence the person reads.

    ``held``: another desk holds the form (``held_by`` on desk ``desk``, its lease until
    ``until``, ISO 8601); the page keeps the text and tries again when the form is free.
    ``here``: the same, held by this desk's terminal (the page says so as a note: its
    person's answer from the page goes through all the same).
    ``answered``: the form was answered meanwhile. ``refused``: the store cannot keep this
    text (the message says what to change); the form stays, the page keeps the text and
    saves it again once the person changes it. ``unwritten``: not written for a reason that
    passes, nothing in the text is to change: the form took the draft and its agent's journal
    could not be written (a full disk; the desk keeps it and writes it again by itself), or a
    team desk's store is away or refuses writes; the page keeps the text and sends it again
    now and then until it is written."""

    code: str
    message: str
    held_by: str | None = None
    desk: str | None = None
    until: str | None = None


Drafter = Callable[[Shown, tuple[Draft, ...]], Awaitable[DraftRefused | None]]
"""Keeps a form's drafts typed on the page; ``None`` when kept. Raises
``trio.ClosedResourceError``, ``trio.BrokenResourceError`` or ``trio.EndOfChannel`` when the
form is gone."""


async def form_drafts(shown: Shown, drafts: tuple[Draft, ...]) -> DraftRefused | None:
    """A desk of files: the form's ``ReplaceDrafts`` command, which its runtime journals; kept
    once it is written. A write that failed is ``unwritten``, with its sentence: the queue
    writes the draft again, and the page keeps the text and saves it again."""
    saved, written = trio.open_memory_channel[str | None](1)
    with written:
        await shown.commands.send(UserCommand(fs.ReplaceDrafts(drafts), saved))
        why = await written.receive()
    return None if why is None else DraftRefused("unwritten", why)


@attrs.define(eq=False)
class WebDesk:
    """The web desk of one running desk. ``base_url`` is set once the desk listens."""

    board: Board
    histories: hist.AgentHistories
    """Where each agent's history is read (its journal, or a team desk's store)."""
    token: str
    """The desk's bearer token: ``/login-code`` needs it (empty: no ``/login-code``)."""
    clock: Callable[[], float] = trio.current_time
    secure: bool = False
    """The desk serves TLS: the cookie is ``Secure``."""
    base_url: str = ""
    holder: view.Holder = view.nobody
    """Who is answering a form on another desk (a team desk's claims)."""
    drafter: Drafter = form_drafts
    """Where the page's drafts go (a team desk: its store, under a claim)."""
    auth: Auth = attrs.field(init=False)
    templates: Jinja2Templates = attrs.field(init=False, factory=_templates)
    app: Any = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.auth = Auth(clock=self.clock)
        routes = [
            Route("/", self.page),
            Route("/login", self.login, methods=["GET"]),
            Route("/login", self.login_post, methods=["POST"]),
            Route("/login-code", self.login_code, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/session", self.session_token),
            Route("/events", self.events),
            Route("/fragment/form", self.form_fragment),
            Route("/fragment/queue", self.queue_fragment),
            Route("/api/draft", self.api_draft, methods=["POST"]),
            Route("/api/submit", self.api_submit, methods=["POST"]),
            Route("/api/cancel", self.api_cancel, methods=["POST"]),
            Route("/api/later", self.api_later, methods=["POST"]),
            Route("/history", self.history),
            Route("/history/export", self.history_export),
            Route("/favicon.ico", _icon),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]
        handlers = {404: _not_routed, 405: _not_routed}
        self.app = SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # -- URLs ---------------------------------------------------------------------------------

    def login_url(self) -> str:
        """A new one-time sign-in URL (single use, valid 10 minutes)."""
        return f"{self.base_url}/login?code={self.auth.new_code()}"

    def form_url(self, key: str, flow_id: str) -> str:
        """Where the page shows agent ``key``'s form ``flow_id`` (notifications link to it)."""
        return f"{self.base_url}/?form={quote(key + '/' + flow_id, safe='')}"

    # -- helpers ------------------------------------------------------------------------------

    def _find(self, form_id: object) -> Shown | None:
        for shown in self.board.shown_forms():
            if view.form_id(shown) == form_id:
                return shown
        return None

    def _chosen(self, request: Request) -> Shown | None:
        """The form the page asks for (``?form=``), else that agent's form, else the first in
        the board's order; never ``?skip=`` (a form the page just answered, which the board
        may show until its runtime takes the answer in). Forms someone else is on
        (:attr:`holder`, a team desk's claims) come after the rest: this page could only
        watch them."""
        wanted = request.query_params.get("form")
        skip = request.query_params.get("skip")
        forms = sorted(  # stable: the board's order within each part
            (s for s in self.board.shown_forms() if view.form_id(s) != skip),
            key=lambda s: self.holder(s) is not None,
        )
        found = next((s for s in forms if view.form_id(s) == wanted), None)
        if found is None and wanted:
            key = wanted.rsplit("/", 1)[0]
            found = next((s for s in forms if s.key == key), None)
        return found if found is not None else next(iter(forms), None)

    def _context(self, request: Request, session: Session, shown: Shown | None) -> dict[str, Any]:
        return {
            "csrf": session.csrf,
            "form": view.form_view(self.board, shown, self.holder) if shown is not None else None,
            "agents": view.agent_rows(self.board, shown),
        }

    async def _json(self, request: Request) -> tuple[Session, dict[str, Any]] | JSONResponse:
        status, checked = refusal(self.auth, request)
        if status is not None:
            return _error(status, str(checked))
        assert isinstance(checked, Session)
        body = await _body(request)
        if body is None:
            return _error(413, TOO_LARGE)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            # RecursionError: nested deeper than the parser goes, which no page sends.
            return _error(400, "The request body is not JSON.")
        if not isinstance(data, dict):
            return _error(400, "The request body must be a JSON object.")
        return checked, data

    async def _target(self, request: Request) -> tuple[Shown, dict[str, Any]] | JSONResponse:
        checked = await self._json(request)
        if isinstance(checked, JSONResponse):
            return checked
        data = checked[1]
        wanted = data.get("form")
        if not isinstance(wanted, str):
            return _error(400, 'The request must name its form: "form", the form\'s id (a string).')
        shown = self._find(wanted)
        if shown is None:
            return self._gone(wanted)
        return shown, data

    def _gone(self, wanted: str) -> JSONResponse:
        """A form the page named is no longer waiting: what became of it, as the board
        remembers it (``code`` ``ended``), else "answered elsewhere" (``gone``; the page says
        it naming the form, ``FormView.gone``)."""
        ended = view.ended_text(self.board, wanted)
        return JSONResponse(
            {"error": ended or ANSWERED_ELSEWHERE, "code": "gone" if ended is None else "ended"},
            status_code=409,
        )

    # -- pages --------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        session = session_of(self.auth, request)
        if session is None:
            problem = "signed_out" if "signed-out" in request.query_params else None
            return self.templates.TemplateResponse(
                request, "signin.html", {"problem": problem}, status_code=401
            )
        shown = self._chosen(request)
        wanted = request.query_params.get("form")
        # A link to one form (a notification's) whose form is gone shows another: say so.
        gone = bool(wanted) and (shown is None or view.form_id(shown) != wanted)
        ended = view.ended_text(self.board, wanted) if gone and wanted else None
        notice = (
            f"The form this link opened is no longer waiting. {ended}"
            if ended
            else LINKED_FORM_GONE
        )
        return self.templates.TemplateResponse(
            request,
            "page.html",
            {**self._context(request, session, shown), "notice": notice if gone else ""},
            headers=SIGN_OUT_HEADERS,
        )

    async def form_fragment(self, request: Request) -> Response:
        session = session_of(self.auth, request)
        if session is None:
            return PlainTextResponse("Not signed in.", status_code=401)
        shown = self._chosen(request)
        return self.templates.TemplateResponse(
            request, "_main.html", self._context(request, session, shown)
        )

    async def queue_fragment(self, request: Request) -> Response:
        session = session_of(self.auth, request)
        if session is None:
            return PlainTextResponse("Not signed in.", status_code=401)
        shown = self._find(request.query_params.get("form"))
        return self.templates.TemplateResponse(
            request, "_queue.html", self._context(request, session, shown)
        )

    async def login(self, request: Request) -> Response:
        """A sign-in link opened. A person's browser is signed in at once (the session cookie,
        then the desk); a fetch no person asked for (a chat app's link preview, a prefetch:
        ``is_preview``) gets a page whose form signs in (``login_post``, posted by its script
        or its button), and nothing is tried, so the preview uses nothing up."""
        if session_of(self.auth, request) is not None:
            # This browser is signed in already: a link it opens again (the terminal and a
            # notification may show a used one) leads to the desk, not to "not valid".
            return self.templates.TemplateResponse(request, "signed_in.html", {})
        code = request.query_params.get("code", "")
        if is_preview(request):
            return self._sign_in_page(request, "login.html", {"code": code})
        outcome, session = self.auth.sign_in(code)
        if session is None:
            return self._refused_sign_in(request, outcome, code)
        # A page, not a redirect: a SameSite=Strict cookie set during a navigation that began
        # on another site (a QR scanner, a notification) is not sent on the redirect's next
        # request; the page's own navigation is same-site.
        response = self.templates.TemplateResponse(request, "signed_in.html", {})
        self._set_session_cookie(response, session.id)
        return response

    def _sign_in_page(
        self, request: Request, template: str, context: dict[str, Any], **options: Any
    ) -> Response:
        """``template`` with a form that posts ``code`` to ``login_post``, and the nonce that
        post must carry set as a cookie (only this browser's own page can post it)."""
        nonce = secrets.token_urlsafe(32)
        headers = {**options.pop("headers", {}), "referrer-policy": "same-origin"}
        # Under the desk's usual no-referrer a form's POST says "Origin: null"; this page's
        # own POST names its origin (and a referrer goes to the desk itself only).
        response = self.templates.TemplateResponse(
            request, template, {**context, "nonce": nonce}, headers=headers, **options
        )
        response.set_cookie(
            SIGN_IN_COOKIE, nonce, max_age=int(CODE_LIFETIME), path="/login", **self._cookie_flags
        )
        return response

    def _refused_sign_in(self, request: Request, outcome: str, code: str) -> Response:
        """A code not signed in with: past the limit of failed sign-ins (the code was not
        tried: the page says when the same link works again), or not valid."""
        if outcome == "limited":
            wait = max(1, math.ceil(self.auth.retry_after()))
            return self._sign_in_page(
                request,
                "signin.html",
                {"problem": "limited", "wait": wait, "code": code},
                status_code=429,
                headers={"retry-after": str(wait)},
            )
        return self.templates.TemplateResponse(
            request, "signin.html", {"problem": "invalid"}, status_code=403
        )

    @property
    def _cookie_flags(self) -> dict[str, Any]:
        """Every cookie the desk sets or removes: sent over TLS only when the desk serves it,
        never read by scripts, never sent from another site's page."""
        return {"secure": self.secure, "httponly": True, "samesite": "strict"}

    def _set_session_cookie(self, response: Response, session_id: str) -> None:
        response.set_cookie(
            COOKIE, session_id, max_age=int(SESSION_LIFETIME), path="/", **self._cookie_flags
        )

    async def login_post(self, request: Request) -> Response:
        """Sign in with the code a sign-in page posts (the page a preview gets, the limit page's
        Try again), from that page in this browser only."""
        body = await _body(request)
        fields = parse_qs(body.decode("utf-8", "replace")) if body is not None else {}
        code = (fields.get("code") or [""])[0]
        nonce = (fields.get("nonce") or [""])[0]
        cookie = request.cookies.get(SIGN_IN_COOKIE, "")
        if not same_origin(request, request.headers.get("origin")) or not (
            nonce and hmac.compare_digest(cookie.encode(), nonce.encode("utf-8", "replace"))
        ):
            # Not the desk's own sign-in page in this browser (another site's form, or a page
            # from before the cookie ran out): the code is not tried, so it is not used up.
            return self.templates.TemplateResponse(
                request, "signin.html", {"problem": "foreign"}, status_code=403
            )
        outcome, session = self.auth.sign_in(code)
        if session is None:
            return self._refused_sign_in(request, outcome, code)
        # The browser posted from the desk's own page, so the request is same-site and the
        # SameSite=Strict cookie goes with the redirect's request.
        response = RedirectResponse("/", status_code=303)
        self._set_session_cookie(response, session.id)
        response.delete_cookie(SIGN_IN_COOKIE, path="/login", **self._cookie_flags)
        return response

    async def login_code(self, request: Request) -> Response:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if not self.token:
            return _error(404, "This desk hands out sign-in URLs on its own output only.")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode("utf-8", "replace"), self.token.encode()
        ):
            return _error(401, "Missing or wrong bearer token (see the desk's connection file).")
        return JSONResponse({"url": self.login_url()})

    async def logout(self, request: Request) -> Response:
        """Sign out (the header's Sign out, a form posting the session's CSRF token): the desk
        ends the session, so its cookie opens nothing any more (a page open in another tab
        included: its live stream ends), and the browser goes to the sign-in page, which
        says so. A browser signed out already (a desk restart signs everyone out) is only sent
        there, its cookie, which opens nothing, removed."""
        body = await _body(request)
        fields = parse_qs(body.decode("utf-8", "replace")) if body is not None else {}
        if session_of(self.auth, request) is not None:
            token = (fields.get("csrf") or [""])[0]
            status, checked = refusal(self.auth, request, token or None)
            if status is not None:
                return _error(status, str(checked))
            assert isinstance(checked, Session)
            self.auth.sign_out(checked.id)
        response = RedirectResponse("/?signed-out", status_code=303)
        response.delete_cookie(COOKIE, path="/", **self._cookie_flags)
        return response

    async def session_token(self, request: Request) -> Response:
        """The CSRF token of the browser's session. A page open from before the browser signed
        in again (a desk restart signs everyone out; the person opens a new link in another
        tab) takes it up and goes on, with what was typed meanwhile, instead of being reloaded.
        Only the desk's own pages can read it, as they can read the page that carries it."""
        session = session_of(self.auth, request)
        if session is None:
            return _error(401, NOT_SIGNED_IN)
        return JSONResponse({"csrf": session.csrf})

    # -- the live stream ----------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        session = session_of(self.auth, request)
        if session is None:
            return PlainTextResponse("Not signed in.", status_code=401)
        return StreamingResponse(
            BoardEvents(
                self.board,
                self.holder,
                lambda: self.auth.session(session.id) is not None,
            ),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    # -- state changes ------------------------------------------------------------------------

    async def _with_drafts(self, request: Request) -> tuple[Shown, tuple[Draft, ...]] | Response:
        """The form a draft or an answer is for, and the page's drafts checked against it."""
        target = await self._target(request)
        if isinstance(target, JSONResponse):
            return target
        shown, data = target
        try:
            return shown, view.drafts_from_json(shown.state, data.get("drafts"))
        except view.DraftError as error:
            return _error(400, str(error))

    async def api_draft(self, request: Request) -> Response:
        checked = await self._with_drafts(request)
        if isinstance(checked, Response):
            return checked
        shown, drafts = checked
        try:
            refused = await self.drafter(shown, drafts)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
            return self._gone(view.form_id(shown))
        if refused is None:
            return JSONResponse({"ok": True, "rev": view.draft_rev(drafts)})
        if refused.code in ("refused", "unwritten"):
            # Behind the page's checks the store could not keep this text, or the journal
            # could not be written: the form is still there (the page keeps the text
            # meanwhile, and says which).
            return JSONResponse({"error": refused.message, "code": refused.code}, status_code=422)
        if refused.code not in ("held", "here"):
            return JSONResponse({"error": refused.message, "code": refused.code}, status_code=409)
        return JSONResponse(
            {
                "error": refused.message,
                "code": refused.code,
                "heldBy": refused.held_by,
                "desk": refused.desk,
                "until": refused.until,
            },
            status_code=423,
        )

    async def _respond(self, shown: Shown, response: dict[str, object]) -> Response:
        """Send a remote response to the form and wait for its verdict."""
        reply_tx, reply_rx = trio.open_memory_channel[tuple[str, str] | None](1)
        try:
            await shown.commands.send(RemoteResponse(response, reply_tx))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return self._gone(view.form_id(shown))
        try:
            verdict = await reply_rx.receive()
        except trio.EndOfChannel:
            return self._gone(view.form_id(shown))
        if verdict is None:
            # Which showing of the form took it: should the answer not be recorded (its
            # journal's write failed), the form is shown again, and the page tells the two apart.
            return JSONResponse({"ok": True, "shown": shown.seq})
        error, message = verdict
        if error == "flow_not_found":
            return self._gone(view.form_id(shown))
        return _error(422, message)

    async def api_submit(self, request: Request) -> Response:
        checked = await self._with_drafts(request)
        if isinstance(checked, Response):
            return checked
        shown, drafts = checked
        if view.has_images(drafts):
            return _error(
                422,
                "This form has images attached on the terminal, which the page cannot send: "
                "submit it on the terminal desk (your text is saved there too).",
            )
        answers = view.remote_answers(shown.state, drafts)
        return await self._respond(shown, {"kind": "answer", "answers": answers})

    async def api_cancel(self, request: Request) -> Response:
        target = await self._target(request)
        if isinstance(target, JSONResponse):
            return target
        return await self._respond(target[0], {"kind": "cancel"})

    async def api_later(self, request: Request) -> Response:
        target = await self._target(request)
        if isinstance(target, JSONResponse):
            return target
        shown = target[0]
        if not shown.state.background:
            return _error(
                400, "The agent waits on this question now: answer it, skip it or cancel it."
            )
        held = self.holder(shown)
        if held is not None:
            # Someone else is on it (another desk, or a team desk's own terminal): Later here
            # would take the form from under them, so it changes nothing and says so.
            return JSONResponse(
                {
                    "error": f"{held} Later here changes nothing: it stays with them.",
                    "code": "held",
                },
                status_code=423,
            )
        # Answered once the form is put back (or closed unanswered: it left meanwhile); a
        # put-back the agent's journal could not record left the form as it was: the page
        # keeps it, with the answers, and says why.
        put_back, answered = trio.open_memory_channel[str | None](1)
        with answered:
            try:
                await shown.commands.send(UserCommand(fs.Cancel(), put_back))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return self._gone(view.form_id(shown))
            try:
                refused = await answered.receive()
            except trio.EndOfChannel:
                refused = None
        if refused is not None:
            return JSONResponse(
                {"error": refused + NOT_PUT_BACK, "code": "refused"}, status_code=422
            )
        return JSONResponse({"ok": True})

    # -- history ------------------------------------------------------------------------------

    async def _history(
        self, request: Request
    ) -> tuple[list[str], tuple[str, str, list[Any]] | None]:
        keys = await self.histories.keys()
        agent_key = request.query_params.get("agent") or (keys[0] if keys else None)
        query = request.query_params.get("q", "")
        found = await self.histories.records(agent_key) if agent_key is not None else None
        if agent_key is None or found is None:
            return keys, None
        return keys, (agent_key, query, hist.matching(found, query))

    async def history(self, request: Request) -> Response:
        session = session_of(self.auth, request)
        if session is None:
            return self.templates.TemplateResponse(
                request, "signin.html", {"problem": None}, status_code=401
            )
        keys, found = await self._history(request)
        agent_key, query, records = found if found is not None else (None, "", [])
        shown = [hist.record_view(record) for record in hist.newest_first(records)][
            : hist.MAX_SHOWN
        ]
        export = (
            f"/history/export?agent={quote(agent_key, safe='')}&q={quote(query, safe='')}"
            if agent_key is not None
            else None
        )
        return self.templates.TemplateResponse(
            request,
            "history.html",
            {
                "csrf": session.csrf,
                "keys": keys,
                "agent": agent_key,
                "query": query,
                "records": shown,
                "total": len(records),
                "export": export,
            },
            headers=SIGN_OUT_HEADERS,
        )

    async def history_export(self, request: Request) -> Response:
        if session_of(self.auth, request) is None:
            return PlainTextResponse("Not signed in.", status_code=401)
        _keys, found = await self._history(request)
        if found is None:
            return PlainTextResponse("No such agent.", status_code=404)
        agent_key, _query, records = found
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in str(agent_key))[:60]
        # A header is Latin-1: the key's own name goes percent-encoded UTF-8 (RFC 6266's
        # filename*), and an ASCII one for clients that read only filename.
        plain = "".join(c if c.isascii() else "-" for c in name)
        disposition = (
            f'attachment; filename="ask-history-{plain}.md"; '
            f"filename*=UTF-8''{quote(f'ask-history-{name}.md', safe='')}"
        )
        return Response(
            hist.export_markdown(records),
            media_type="text/markdown; charset=utf-8",
            headers={"content-disposition": disposition},
        )
