"""A team desk's HTTP side: ``/mcp`` for agents holding a token of the store.

:class:`TeamDeskApp` is the desk's own :class:`~pi_agent_ask.desk.http.DeskApp` with one
change: the bearer token is an agent's token (``pi-agent-ask store token``), checked against
the store on every request (a revoked token stops working at once, on every desk), and the
token names the agent: the agent key is the token's, whatever ``X-Pi-Agent-Ask-Key`` says. The
``Origin`` and ``Host`` checks are the desk's. ``GET /desk`` answers with the desk's status,
for a valid token, as a desk of files answers it. ``POST /hook`` serves the agent's Claude Code
hook (:func:`team_hook`): ``?op=take&call=KEY`` takes its waiting text answers under a call
key of the forwarder's, as a tool call does (a take retried on another desk with the same key
gets the same answers), ``?op=give-back&call=KEY`` gives them back. Every other path is the
web page's, which checks its own sign-in, ``Origin`` and CSRF token (``desk/web/app.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import mcp.types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from pi_agent_ask.desk.http import (
    HOOK_OPS,
    INVALID_PARAMS,
    MCP_PATH,
    UNKNOWN_HOOK_OP,
    DeskApp,
    hook_query,
)
from pi_agent_ask.mcp_common.asgi import (
    Receive,
    Scope,
    Send,
    header,
    progress_reporter,
    respond_json,
    unless_gone,
)
from pi_agent_ask.mcp_common.connection import HOOK_PATH, STATUS_PATH
from pi_agent_ask.mcp_common.params import describing
from pi_agent_ask.store.agent import MAX_CALL_KEY, StoreAgentTools, call_key_of, is_call_key
from pi_agent_ask.store.db import Store
from pi_agent_ask.store.wakes import AsyncStore, Wakes

__all__ = ["AGENT_SCOPE_KEY", "TeamDeskApp", "team_hook", "team_mcp_server"]

TOKEN_REFUSED = "Missing, unknown or revoked agent token (see pi-agent-ask store token)."
AGENT_SCOPE_KEY = "pi_agent_ask.agent"
"""The ASGI scope key of the agent key the request's token names."""


@attrs.define(eq=False)
class TeamDeskApp(DeskApp):
    """``DeskApp`` with the store's agent tokens in place of the desk's one token."""

    store: AsyncStore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        for_agents = scope.get("path", "") in (MCP_PATH, MCP_PATH + "/", STATUS_PATH, HOOK_PATH)
        if self.web is not None and not for_agents:
            await super().__call__(scope, receive, send)  # the page: its own checks
            return
        if scope["type"] == "http" and self.place_refusal(scope) is None:
            scheme, _, credential = (header(scope, "authorization") or "").partition(" ")
            agent = None
            if scheme.lower() == "bearer" and credential.strip() and self.store is not None:
                agent = await self.store.run(
                    Store.agent_for_token, self.store.store, credential.strip()
                )
            if agent is None:
                await respond_json(
                    send,
                    401,
                    {"error": TOKEN_REFUSED},
                    [(b"www-authenticate", b"Bearer")],
                )
                return
            scope[AGENT_SCOPE_KEY] = agent
        await super().__call__(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        # The agent's token was checked against the store in __call__; the place checks
        # (Origin, Host) are the desk's own.
        return self.place_refusal(scope)


def _agent(ctx: Any) -> str:
    scope = getattr(ctx.request, "scope", None)
    agent = scope.get(AGENT_SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(agent, str):
        raise MCPError(INVALID_PARAMS, "No agent: this desk needs an agent token.")
    return agent


def team_hook(
    store: AsyncStore, wakes: Wakes
) -> Callable[[Scope], Awaitable[tuple[int, dict[str, Any]]]]:
    """``POST /hook`` on a team desk, for the agent the request's token names."""

    async def hook(scope: Scope) -> tuple[int, dict[str, Any]]:
        query = hook_query(scope)
        op, call_key = query.get("op", ""), query.get("call", "")
        if op not in HOOK_OPS:
            return 400, {"error": UNKNOWN_HOOK_OP}
        if not is_call_key(call_key):
            return 400, {"error": f"call must be printable text of 1 to {MAX_CALL_KEY} characters."}
        tools = StoreAgentTools(store, wakes, scope[AGENT_SCOPE_KEY])
        if op == "take":
            return 200, {"messages": await tools.take_for_hook(call_key)}
        return 200, {"givenBack": await tools.give_back_hook(call_key)}

    return hook


def team_mcp_server(
    store: AsyncStore,
    wakes: Wakes,
    *,
    progress_interval: float | None = None,
    history_tools: bool = False,
) -> Server[Any]:
    """The team desk's MCP server: the tools of the agent the request's token names
    (``history_tools``: with its history tools, the desk's ``behaviour.historyTools``)."""

    def tools(ctx: Any) -> StoreAgentTools:
        extra = {} if progress_interval is None else {"progress_interval": progress_interval}
        return StoreAgentTools(store, wakes, _agent(ctx), history_tools=history_tools, **extra)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools(ctx).list_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = tools(ctx).call_tool(
            params.name,
            params.arguments,
            call_key=call_key_of(ctx.meta),
            report_progress=progress_reporter(ctx),
        )
        return await unless_gone(ctx, call)

    return describing(
        Server(
            "pi-agent-ask-desk",
            instructions=(
                "pi-agent-ask team desk: ask the user structured questions with ask_user; "
                "background answers arrive through wait_for_answers and with the next tool result."
            ),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
    )
