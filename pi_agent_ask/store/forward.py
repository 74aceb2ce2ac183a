"""``pi-agent-ask mcp --desk URL[,URL...]`` for a team desk: stdio to the first desk that
answers, and on to the next one when it goes away.

Every desk of one store accepts the agent's token (``PI_AGENT_ASK_TOKEN``), and keeps nothing
of the agent that the store does not have, so any of them can carry on a call. Each tool call
gets a call key (in the request's ``_meta``, ``pi-agent-ask/callKey``) that stays the same for
every attempt of that call. When a desk goes away in the middle of a call (killed, its host
gone, its connection broken), the call is sent again, with the same key, to the next desk in
the list (round and round, with a growing pause once every desk has failed, for up to
``RETRY_FOR`` seconds): its question is found, not asked again; its wait is resumed; the
answers the lost attempt had taken for it are the ones it gets (``store/db.py``, ``take``).
The agent sees one result per call, so it sees each answer once.

Claude Code's hook is served as by ``pi-agent-ask mcp`` on its own (``mcp_server/hook.py``):
each take has a call key of its own, sent to the first desk that answers (``POST /hook``), and
to the next one with the same key when that desk is away, so a take lost with its desk is
found again, not taken twice; a reply the hook could not pass on is given back by that key.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import mcp.types as types
import trio
from mcp.client.session import ClientSession
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from pi_agent_ask.form.tools import waits_for_person
from pi_agent_ask.mcp_common import PROGRESS_INTERVAL
from pi_agent_ask.mcp_common.asgi import progress_reporter
from pi_agent_ask.mcp_common.connection import CALL_KEY_META, HOOK_PATH, desk_url
from pi_agent_ask.mcp_common.tools import progress_ticks
from pi_agent_ask.mcp_server.forward import BROKEN_CODES, Held, hold_desk_session
from pi_agent_ask.mcp_server.hook import NOTHING_TAKEN, TakeForHook, Taken
from pi_agent_ask.mcp_server.input_end import PersonWaits
from pi_agent_ask.mcp_server.stdio import ask_server

__all__ = [
    "RETRY_FOR",
    "FailoverUpstream",
    "serve_stdio_via_team",
    "team_take",
]

RETRY_FOR: Final = 300.0
"""Seconds a call keeps looking for a desk that answers before it fails."""
TOKEN_REFUSED_TEXT: Final = (
    "The desk at {url} refused this agent's token (PI_AGENT_ASK_TOKEN): it is unknown or "
    "revoked. Ask for a new one (pi-agent-ask store token)."
)
HOOK_TIMEOUT: Final = 3.0
"""Seconds one desk may take to answer a hook's take or give-back (the hook command waits 10 s
for the whole)."""
GONE_TEXT: Final = (
    "No pi-agent-ask desk of {urls} answered for {seconds:.0f} s ({error}). A question that "
    "reached one stays in the store; its answer arrives with a later call."
)


class Unreachable(Exception):
    """No desk of the list could be reached in time."""


class TokenRefused(Unreachable):
    """A desk refused the agent's token (unknown or revoked): no other desk of the store
    would take it either, so nothing is tried again."""


@attrs.define(eq=False)
class FailoverUpstream:
    """One MCP client session on one desk of ``urls`` at a time."""

    urls: Sequence[str]
    token: str
    _nursery: trio.Nursery
    retry_for: float = RETRY_FOR
    _index: int = 0
    _session: ClientSession | None = None
    _held: Held | None = None
    _generation: int = 0
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    @property
    def url(self) -> str:
        return self.urls[self._index]

    async def session(self) -> tuple[ClientSession, int]:
        """The current session and its generation (pass it to :meth:`broken`)."""
        async with self._lock:
            if self._session is not None:
                return self._session, self._generation
            deadline = trio.current_time() + self.retry_for
            pause = 0.05
            tried = 0
            while True:
                try:
                    self._session, self._held = await self._nursery.start(self._hold, self.url)
                    self._generation += 1
                    return self._session, self._generation
                except Exception as error:
                    refused = _token_refused(error)
                    if refused is not None:
                        raise refused from None
                    last = error
                self._index = (self._index + 1) % len(self.urls)
                tried += 1
                if tried % len(self.urls) == 0:
                    if trio.current_time() + pause > deadline:
                        raise Unreachable(
                            GONE_TEXT.format(
                                urls=", ".join(self.urls),
                                seconds=self.retry_for,
                                error=f"{type(last).__name__}: {last}",
                            )
                        )
                    await trio.sleep(pause)  # every desk failed: pause before the next round
                    pause = min(pause * 2, 2.0)

    def broken(self, generation: int) -> None:
        """The session of ``generation`` failed: the next call moves to the next desk."""
        if generation != self._generation or self._session is None:
            return
        if self._held is not None:
            self._held.drop()  # the desk is gone: nothing is asked of it
        self._session = None
        self._held = None
        self._index = (self._index + 1) % len(self.urls)

    async def _hold(
        self, url: str, *, task_status: trio.TaskStatus[tuple[ClientSession, Held]]
    ) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        refused = TokenRefused(TOKEN_REFUSED_TEXT.format(url=url))
        await hold_desk_session(
            url, headers, refused, on_broken=self._broke_under, task_status=task_status
        )

    def _broke_under(self, held: Held) -> None:
        """The connection broke under a session handed out: the next call moves on."""
        if self._held is held:
            self._session = None
            self._held = None
            self._index = (self._index + 1) % len(self.urls)

    async def close(self) -> None:
        """End the current session on its desk, which is still there (the agent is done):
        the desk frees it at once (at most ``CLOSE_TIMEOUT`` seconds after a desk that does
        not answer)."""
        held, self._held, self._session = self._held, None, None
        if held is not None:
            await held.end()


def _token_refused(error: BaseException) -> TokenRefused | None:
    if isinstance(error, TokenRefused):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _token_refused(inner)
            if found is not None:
                return found
    return None


def _broken(error: BaseException) -> bool:
    if isinstance(error, MCPError):
        return error.error.code in BROKEN_CODES
    return True


def failover_server(
    upstream: FailoverUpstream, person: PersonWaits, progress_interval: float = PROGRESS_INTERVAL
) -> Server[Any]:
    """The MCP server that forwards to ``upstream``; a call that waits for the person returns
    at once when the client closes its input (``person``), its question left on the desks.

    The progress of such a call is this server's, every ``progress_interval`` seconds, as
    ``pi-agent-ask mcp`` sends it through a desk (``router.py``); none is asked of the desks.
    A desk's count would start again from zero on the next desk after a failover, and MCP
    requires each value of a request to be larger than the one before."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        while True:
            try:
                session, generation = await upstream.session()
            except Unreachable as error:
                raise MCPError(INTERNAL_ERROR, str(error)) from None
            try:
                return await session.list_tools()
            except Exception as error:
                if not _broken(error):
                    raise
                upstream.broken(generation)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta: Any = {CALL_KEY_META: "fwd-" + uuid.uuid4().hex}

        async def forwarded() -> types.CallToolResult:
            while True:
                try:
                    session, generation = await upstream.session()
                except Unreachable as error:
                    return types.CallToolResult(
                        content=[types.TextContent(type="text", text=str(error))], is_error=True
                    )
                try:
                    result = await session.call_tool(params.name, params.arguments, meta=meta)
                except Exception as error:
                    if not _broken(error):
                        raise
                    upstream.broken(generation)  # the same call, with its key, on the next desk
                    continue
                assert isinstance(result, types.CallToolResult)
                return result

        if waits_for_person(params.name, params.arguments):
            async with progress_ticks(progress_reporter(ctx), progress_interval):
                return await person.unless_closed(forwarded)
        return await forwarded()

    return ask_server(list_tools, call_tool)


async def serve_stdio_via_team(
    urls: Sequence[str],
    token: str,
    *,
    key: str | None = None,
    cwd: Path | None = None,
    hook_dir: Path | None = None,
    stdin: Any = None,
    stdout: Any = None,
    progress_interval: float = PROGRESS_INTERVAL,
) -> None:
    """Serve MCP on stdio, forwarding to the first desk of ``urls`` that answers, and Claude
    Code's hook socket under ``key`` (default: the client's first default key in ``cwd`` that
    no running server holds, ``stdio.agent_keys``, so two sessions in one directory keep their
    hooks apart). A line the SDK cannot read is answered as ``pi-agent-ask mcp`` answers it
    (``unreadable.py``), and so is the end of the input (``input_end.py``)."""
    from pi_agent_ask.mcp_common.journals import default_state_dir
    from pi_agent_ask.mcp_server.hook import serve_hook_endpoint
    from pi_agent_ask.mcp_server.stdio import (
        ReplayedStdin,
        agent_keys,
        end_on_signal,
        parse_hello,
        serve_lines,
        standard_input,
    )

    source = stdin if stdin is not None else standard_input()
    first = await source.readline()
    if not first:
        return  # the client closed before saying anything
    hello = parse_hello(first)
    work_dir = cwd if cwd is not None else Path.cwd()
    replay = ReplayedStdin(first, source)
    async with (
        agent_keys(key, hello.name, work_dir, default_state_dir()) as (hook_key, base_key),
        trio.open_nursery() as nursery,
    ):
        upstream = FailoverUpstream(urls=list(urls), token=token, nursery=nursery)
        left = trio.Event()

        async def hooks(task_status: trio.TaskStatus[Path | None]) -> None:
            try:
                await serve_hook_endpoint(
                    team_take(urls, token, _log),
                    hook_key,
                    hello.name,
                    work_dir,
                    directory=hook_dir,
                    base_key=base_key,
                    task_status=task_status,
                )
            finally:
                left.set()  # the hook socket and the file beside it are removed

        # The socket is there before the client hears from the server; a signal lets it go
        # as the end of the input does, then ends the process by that signal.
        await nursery.start(hooks)
        nursery.start_soon(end_on_signal, nursery.cancel_scope, left)
        # The end of the input is met as ``pi-agent-ask mcp`` meets it (``input_end.py``):
        # every request read is answered, a call waiting for the person says so at once.
        person = PersonWaits(_log)
        server = failover_server(upstream, person, progress_interval)
        try:
            await serve_lines(server, replay, stdout, on_end=person.close)
        finally:
            # Also when cancelled: the session held on a desk waits, shielded, for its end
            # (``forward.hold_desk_session``), and the nursery would wait for it forever.
            with trio.CancelScope(shield=True):
                await upstream.close()  # within CLOSE_TIMEOUT
            nursery.cancel_scope.cancel()


def team_take(urls: Sequence[str], token: str, log: Callable[[str], None]) -> TakeForHook:
    """Takes for the hook socket from the team's desks: under a call key of their own, on the
    first desk of ``urls`` that answers (the next one, same key, when one is away)."""

    async def post(**params: str) -> Any:
        """The JSON answer of the first desk that answers (``None``: none did, or refused)."""
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=HOOK_TIMEOUT) as http:
            for url in urls:
                try:
                    response = await http.post(desk_url(url, HOOK_PATH), params=params)
                except httpx2.TransportError:
                    continue  # that desk is away: the next one, with the same call key
                try:
                    body = response.json()
                except ValueError:
                    body = {}
                if response.status_code == 200:
                    return body
                error = body.get("error") if isinstance(body, dict) else None
                log(f"pi-agent-ask: the desk at {url} refused a Claude Code hook: {error}")
                return None
        log(f"pi-agent-ask: no desk of {', '.join(urls)} answered a Claude Code hook")
        return None

    async def take() -> Taken:
        call = "hook-" + uuid.uuid4().hex
        body = await post(op="take", call=call)
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return NOTHING_TAKEN

        async def give_back() -> None:
            await post(op="give-back", call=call)

        return Taken(messages, give_back)

    return take


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
