"""``pi-agent-ask mcp --desk``: a stdio MCP server whose forms are shown on a running desk.

:func:`serve_stdio_via_desk` serves MCP on standard input and output and forwards every
``tools/list`` and ``tools/call`` to the desk over Streamable HTTP, with the desk's token and
the agent key in ``X-Pi-Agent-Ask-Key``; progress notifications of the desk's long waits are
relayed to the stdio client, and a client cancelling a call cancels the forwarded call (the
desk keeps a cut foreground form queued and delivers its answer later). The desk does all the
validation: this side adds nothing and drops nothing.

The desk connection is made on first use and made again after it broke (the desk restarted):
a new connection goes to the desk the connection file names then, if one answers (a restarted
desk has a new port and token), else to the same URL again. ``tools/list`` is retried once on
a fresh connection; a ``tools/call`` is never retried, since it may have reached the desk
already (a question asked twice; the desk's journal keeps it across its restart), and fails
as a tool error that says so. :func:`find_desk` (``connection.py``) finds the running desk for
``--desk auto``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import httpx2
import mcp.types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST

from pi_agent_ask.mcp_common.connection import KEY_HEADER, desk_file_path, find_desk

__all__ = [
    "DESK_GONE_TEXT",
    "DeskUpstream",
    "find_desk",
    "forwarding_server",
    "serve_stdio_via_desk",
]

DESK_GONE_TEXT = (
    "The pi-agent-ask desk at {url} did not answer ({error}). If the question reached it, it "
    "stays queued there and its answer arrives through wait_for_answers or a later tool result."
)
CONNECT_TIMEOUT = 30.0
BROKEN_CODES = frozenset({CONNECTION_CLOSED, INVALID_REQUEST, INTERNAL_ERROR})
"""The SDK client's codes for a closed connection, an unknown session (404) and an HTTP error
response: the connection is what failed, so the next call opens a new one. (The desk's own
refusals, such as an unusable journal, are ``INVALID_PARAMS`` and keep the connection, so
calls in flight on it go on.)"""


@attrs.define(eq=False)
class DeskUpstream:
    """One MCP client session on the desk, opened on first use and again after it broke."""

    url: str
    token: str
    key: str
    _nursery: trio.Nursery
    desk_file: Path | None = None
    """The connection file to follow after a break (``None``: the default path)."""
    _session: ClientSession | None = None
    _close: trio.Event | None = None
    _broke: bool = False
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def session(self) -> ClientSession:
        async with self._lock:
            if self._session is None:
                if self._broke:
                    found = await find_desk(path=self.desk_file or desk_file_path())
                    if found is not None:
                        self.url, self.token = found.url, found.token
                self._session, self._close = await self._nursery.start(self._hold)
                self._broke = False
            return self._session

    def reset(self) -> None:
        """Drop the current session (it broke); the next call opens a new one."""
        if self._close is not None:
            self._close.set()
        self._session = None
        self._close = None
        self._broke = True

    async def _hold(
        self, *, task_status: trio.TaskStatus[tuple[ClientSession, trio.Event]]
    ) -> None:
        headers = {"Authorization": f"Bearer {self.token}", KEY_HEADER: self.key}
        # No read timeout: a person may answer hours later (the desk sends progress meanwhile).
        timeout = httpx2.Timeout(CONNECT_TIMEOUT, read=None)
        close = trio.Event()
        started = False
        try:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
                streamable_http_client(self.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                task_status.started((session, close))
                started = True
                await close.wait()
        except Exception:
            if not started:
                raise
            # The connection broke under a session handed out: its calls fail on their own.
            if self._close is close:
                self._session = None
                self._close = None
                self._broke = True


def forwarding_server(upstream: DeskUpstream) -> Server[Any]:
    """The stdio side's MCP server: every call goes to the desk as this agent."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        for attempt in range(2):
            try:
                session = await upstream.session()
                return await session.list_tools()
            except MCPError as error:
                if error.error.code not in BROKEN_CODES or attempt:
                    raise
                upstream.reset()
            except Exception as error:
                upstream.reset()
                if attempt:
                    raise MCPError(INTERNAL_ERROR, _gone(upstream, error)) from None
        raise AssertionError("unreachable")

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def relay(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        try:
            session = await upstream.session()
            return await session.call_tool(params.name, params.arguments, progress_callback=relay)
        except MCPError as error:
            if error.error.code in BROKEN_CODES:  # the desk restarted or refused the session
                upstream.reset()
            raise
        except Exception as error:
            upstream.reset()
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_gone(upstream, error))],
                is_error=True,
            )

    return Server("pi-agent-ask", on_list_tools=list_tools, on_call_tool=call_tool)


def _gone(upstream: DeskUpstream, error: BaseException) -> str:
    return DESK_GONE_TEXT.format(url=upstream.url, error=f"{type(error).__name__}: {error}")


async def serve_stdio_via_desk(
    url: str, token: str, key: str, *, stdin: Any = None, stdout: Any = None
) -> None:
    """Serve MCP on stdio (or the given anyio text streams), forwarding to the desk at ``url``.

    Returns when the stdio client closes its side."""
    from mcp.server.stdio import stdio_server

    async with trio.open_nursery() as nursery:
        upstream = DeskUpstream(url=url, token=token, key=key, nursery=nursery)
        server = forwarding_server(upstream)
        async with stdio_server(stdin, stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        nursery.cancel_scope.cancel()
