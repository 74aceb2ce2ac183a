"""``pi-agent-ask mcp`` while a desk runs: one MCP client session on the desk for this agent.

:class:`DeskUpstream` holds a Streamable HTTP client session on the desk, sent with the desk's
token and the agent key in ``X-Pi-Agent-Ask-Key`` (``-UTF8``, percent-encoded, when it is not
ASCII); it opens on first use and again after it broke. :func:`forward_call` sends one
``tools/call`` there and raises :class:`DeskGone` when the connection, not the desk's answer,
failed (a closed connection, an unknown session, an HTTP error, a refused connection): the
caller (``router.py``) then tells the agent in a plain sentence and moves to whatever shows
forms now. A ``tools/call`` is never retried, since it may have reached the desk already (a
question asked twice). The desk does all the validation: this side adds nothing and drops
nothing (nor does it check the desk's results again: the client it answers does). Progress of
long waits is the caller's (at its own ``--progress-interval``), so no progress is asked of the
desk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import mcp.types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST

from pi_agent_ask.mcp_common.connection import (
    HOOK_PATH,
    STATUS_PATH,
    desk_file_path,
    desk_url,
    find_desk,
    key_headers,
)
from pi_agent_ask.mcp_server.hook import NOTHING_TAKEN, TakeForHook, Taken

__all__ = [
    "DeskGone",
    "DeskUpstream",
    "Held",
    "desk_session",
    "desk_status",
    "desk_take",
    "forward_call",
    "forward_list",
    "hold_desk_session",
]

CONNECT_TIMEOUT = 30.0
HOOK_TIMEOUT = 5.0
"""Seconds one hook request to the desk may take (a take, or a give-back)."""
GIVE_BACK_FAILED_LOG = (
    "pi-agent-ask: answers a Claude Code hook could not pass on were not given back to the "
    "desk ({error}): they were handed out there, and the agent does not get them"
)
CLOSE_TIMEOUT = 5.0
"""Seconds a desk may take to end a session the agent is done with."""
TOKEN_REFUSED_TEXT = (
    "The pi-agent-ask desk at {url} refused this server's token ($PI_AGENT_ASK_DESK_TOKEN, "
    "or the connection file): the desk was restarted since (each start makes a new token), "
    "or the token is wrong. Nothing was asked. Set the desk's current token, or run this "
    "server with `--desk auto` (the default), which reads it from the connection file."
)
BROKEN_CODES = frozenset({CONNECTION_CLOSED, INVALID_REQUEST, INTERNAL_ERROR})
"""The SDK client's codes for a closed connection, an unknown session (404) and an HTTP error
response: the connection is what failed, so the next call opens a new one. (The desk's own
refusals, such as an unusable journal, are ``INVALID_PARAMS`` and keep the connection, so
calls in flight on it go on.)"""


@asynccontextmanager
async def desk_session(url: str, http: httpx2.AsyncClient) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session on the desk at ``url``, over ``http``.

    Its messages may be of any size. The SDK's client refuses a server-sent event over 1 MiB
    by default, and a desk's result can be larger (a pasted log as the answer, images, a
    history record with a context file): that would end the connection under a result the
    desk has already handed out, so the answers in it would never reach the agent."""
    async with (
        streamable_http_client(url, http_client=http, max_sse_event_size=None) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def desk_status(url: str, http: httpx2.AsyncClient) -> httpx2.Response:
    """The status of the desk whose MCP endpoint is ``url``, asked before its session opens:
    a refused token (401) is told apart from a desk that is away, which the SDK's client
    cannot do (it reports every HTTP error alike)."""
    return await http.get(desk_url(url, STATUS_PATH))


@attrs.define(eq=False)
class DeskUpstream:
    """One MCP client session on the desk, opened on first use and again after it broke.

    It ends in one of two ways. :meth:`close`: the desk is there and the agent is done, so
    the session is ended on the desk (the SDK's ``DELETE``; the desk frees it at once), within
    ``CLOSE_TIMEOUT``. :meth:`reset`: the desk is gone or its connection broke, so nothing is
    asked of it (a ``DELETE`` to a desk that stopped can only fail, and the SDK would log
    that failure)."""

    url: str
    token: str
    key: str
    _nursery: trio.Nursery
    desk_file: Path | None = None
    """The connection file to follow after a break (``None``: the default path)."""
    _session: ClientSession | None = None
    _held: Held | None = None
    _broke: bool = False
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def session(self) -> ClientSession:
        async with self._lock:
            if self._session is None:
                if self._broke:
                    found = await find_desk(path=self.desk_file or desk_file_path())
                    if found is not None:
                        self.url, self.token = found.url, found.token
                self._session, self._held = await self._nursery.start(self._hold)
                self._broke = False
            return self._session

    def reset(self) -> None:
        """Drop the current session (it broke, or the desk is gone) without a word to the
        desk; the next call opens a new one."""
        if self._held is not None:
            self._held.drop()
        self._session = None
        self._held = None
        self._broke = True

    async def close(self) -> None:
        """End the current session on the desk, which is still there; returns once it has
        ended (at most ``CLOSE_TIMEOUT`` seconds after a desk that does not answer)."""
        held, self._held, self._session = self._held, None, None
        if held is not None:
            await held.end()

    async def _hold(self, *, task_status: trio.TaskStatus[tuple[ClientSession, Held]]) -> None:
        headers = {"Authorization": f"Bearer {self.token}", **key_headers(self.key)}
        refused = DeskGone(TOKEN_REFUSED_TEXT.format(url=self.url), refused=True)
        await hold_desk_session(
            self.url, headers, refused, on_broken=self._broke_under, task_status=task_status
        )

    def _broke_under(self, held: Held) -> None:
        """The connection broke under a session handed out: its calls fail on their own."""
        if self._held is held:
            self._session = None
            self._held = None
            self._broke = True


async def hold_desk_session(
    url: str,
    headers: Mapping[str, str],
    refused: Exception,
    *,
    on_broken: Callable[[Held], None],
    task_status: trio.TaskStatus[tuple[ClientSession, Held]],
) -> None:
    """Open an SDK client session on the desk at ``url`` and hold it until its ``Held`` says
    how it ends (both forwarders' sessions: the agent's desk, a team's desks). ``refused`` is
    raised when the desk refuses the token; another failure before the session is handed out
    is raised as it is; a failure after that (the connection broke) is ``on_broken``'s."""
    # No read timeout: a person may answer hours later (the desk sends progress meanwhile).
    timeout = httpx2.Timeout(CONNECT_TIMEOUT, read=None)
    held = Held()
    started = False
    try:
        with held.scope:
            async with httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http:
                status = await desk_status(url, http)
                if status.status_code == 401:
                    raise refused
                status.raise_for_status()
                async with desk_session(url, http) as session:
                    # Once handed out, the session ends only through ``close`` or the
                    # scope's cancel: the end of the nursery it runs in must not cut the
                    # ``DELETE`` of a normal close.
                    held.scope.shield = True
                    task_status.started((session, held))
                    started = True
                    await held.close.wait()
                    held.scope.deadline = trio.current_time() + CLOSE_TIMEOUT
    except Exception:
        if not started:
            raise
        on_broken(held)
    finally:
        held.ended.set()


@attrs.frozen
class Held:
    """How a held session ends: ``close`` set (a normal end: the SDK's ``DELETE``, within
    ``CLOSE_TIMEOUT``), ``scope`` cancelled (dropped without a word to a desk that is gone),
    ``ended`` once it has."""

    close: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    ended: trio.Event = attrs.field(factory=trio.Event)

    async def end(self) -> None:
        """End the session on its desk, which is still there; returns once it has ended."""
        self.close.set()
        await self.ended.wait()

    def drop(self) -> None:
        """Drop the session without a word to its desk (gone, or its connection broke)."""
        self.scope.cancel()


class DeskGone(Exception):
    """The desk did not answer the call: its connection failed (the desk stopped or
    restarted), or (``refused``) it refused this server's token."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


async def forward_call(
    upstream: DeskUpstream, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """One ``tools/call`` on the desk as this agent; :class:`DeskGone` when the connection
    failed (the session is dropped, so a later call opens a new one)."""
    try:
        session = await upstream.session()
        # Sent as a plain request: ``ClientSession.call_tool`` would check the desk's
        # ``structuredContent`` against the tool's output schema first (listing the tools
        # before a session's first call of each, and compiling a validator: tens of
        # milliseconds on the first answer, a few on each later one). The desk made the
        # result from that schema, and the client this server answers checks it anyway.
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments)
        )
        return await session.send_request(request, types.CallToolResult)
    except MCPError as error:
        if error.error.code not in BROKEN_CODES:
            raise  # the desk's own refusal (an unusable journal): its words go to the client
        upstream.reset()
        raise DeskGone(error.error.message) from None
    except Exception as error:
        upstream.reset()
        raise _gone(error) from None


async def forward_list(upstream: DeskUpstream) -> types.ListToolsResult:
    """``tools/list`` on the desk; :class:`DeskGone` when the connection failed."""
    try:
        session = await upstream.session()
        return await session.list_tools()
    except MCPError as error:
        if error.error.code not in BROKEN_CODES:
            raise
        upstream.reset()
        raise DeskGone(error.error.message) from None
    except Exception as error:
        upstream.reset()
        raise _gone(error) from None


def _gone(error: BaseException) -> DeskGone:
    inner = error
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    return inner if isinstance(inner, DeskGone) else DeskGone(_plain(error))


def _plain(error: BaseException) -> str:
    """The first plain message inside ``error`` (the SDK's transport wraps the cause in
    exception groups, whose own text says nothing to a person)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


def desk_take(upstream: DeskUpstream, log: Callable[[str], None]) -> TakeForHook:
    """Takes for the hook socket from the desk's runtime of this agent (the desk's ``/hook``):
    the desk marks the answers delivered and keeps them under a receipt, which gives them back
    when the hook's reply cannot be written. A desk that does not answer gives nothing."""

    def post(http: httpx2.AsyncClient, **params: str) -> Awaitable[httpx2.Response]:
        return http.post(desk_url(upstream.url, HOOK_PATH), params=params)

    def client() -> httpx2.AsyncClient:
        headers = {"Authorization": f"Bearer {upstream.token}", **key_headers(upstream.key)}
        return httpx2.AsyncClient(headers=headers, timeout=HOOK_TIMEOUT)

    async def take() -> Taken:
        try:
            async with client() as http:
                response = await post(http, op="take")
                response.raise_for_status()
                body = response.json()
        except (httpx2.HTTPError, ValueError) as error:
            log(f"pi-agent-ask: a Claude Code hook got nothing from the desk: {_plain(error)}")
            return NOTHING_TAKEN
        messages, receipt = body.get("messages"), body.get("receipt")
        if not isinstance(messages, list) or not isinstance(receipt, str):
            log("pi-agent-ask: a Claude Code hook got nothing from the desk: not a take's reply")
            return NOTHING_TAKEN

        async def give_back() -> None:
            try:
                async with client() as http:
                    response = await post(http, op="give-back", receipt=receipt)
                    response.raise_for_status()
            except httpx2.HTTPError as error:
                log(GIVE_BACK_FAILED_LOG.format(error=_plain(error)))

        return Taken(messages, give_back)

    return take
