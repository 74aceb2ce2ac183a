"""The desk's HTTP side: the MCP Streamable HTTP endpoint at ``/mcp``, and who may use it.

:class:`DeskApp` is the ASGI application hypercorn serves (on Trio). Every request passes
three checks, in this order, before the SDK's session manager sees it:

1. ``Origin``: absent (command-line clients send none) or one of the desk's own origins
   (``http://127.0.0.1:PORT``, ``http://localhost:PORT``, ``http://[::1]:PORT``, and the
   listen address). Anything else is a web page trying to reach the desk: 403.
2. ``Host``: on a loopback listen, one of the loopback names with the desk's port (a DNS
   rebinding attack arrives with the attacker's host name): 421. A non-loopback listen
   (``--allow-remote``) accepts any host name; the token still guards it.
3. ``Authorization: Bearer <token>``, compared in constant time: 401 otherwise.

The agent key of a request is its ``X-Pi-Agent-Ask-Key`` header, else its MCP session id.
``GET /desk`` (authenticated too) answers the desk's pid, so a finder can tell a live desk
from a stale connection file. ``POST /hook`` (authenticated, with an agent key) serves the
Claude Code hook of that agent's stdio server: ``?op=take`` hands out the agent's waiting text
answers, marked delivered, with a receipt; ``?op=give-back&receipt=R`` gives back what a take
handed out when the hook could not pass it on (``Agent.take_for_hook``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import attrs
import mcp.types as types
from hypercorn.config import Config as HypercornConfig
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from pi_agent_ask.desk.agents import Agent, AgentRegistry, AgentUnavailable
from pi_agent_ask.mcp_common.asgi import (
    Receive,
    Scope,
    Send,
    header,
    progress_reporter,
    respond_json,
    unless_gone,
    watch_disconnect,
)
from pi_agent_ask.mcp_common.connection import (
    HOOK_PATH,
    SERVICE,
    STATUS_PATH,
    key_from_headers,
)
from pi_agent_ask.mcp_common.journals import InvalidKey
from pi_agent_ask.mcp_common.params import describing

__all__ = [
    "HOOK_OPS",
    "MCP_PATH",
    "UNKNOWN_HOOK_OP",
    "DeskApp",
    "Listen",
    "ListenError",
    "agent_hook",
    "hook_query",
    "is_loopback",
    "mcp_server",
    "parse_listen",
    "server_config",
]

MCP_PATH = "/mcp"
INVALID_PARAMS = -32602
MAX_REQUEST_BODY = 4 * 1024 * 1024
"""Bytes of one request body the desk takes (also its session manager's limit)."""
DRAIN_LIMIT = 16 * MAX_REQUEST_BODY
"""Bytes of a refused body read before the refusal, at most."""
TOO_LARGE_TEXT = (
    "The request has {size} bytes, larger than the {limit} bytes the desk takes; nothing of it "
    "was asked or stored. Ask with shorter text (a long context can be a file path)."
)


class ListenError(ValueError):
    """A ``--listen`` value that is not ``HOST:PORT``, or a non-loopback one without
    ``--allow-remote``."""


@attrs.frozen
class Listen:
    host: str
    port: int

    @property
    def bind(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_config(
    where: Listen, tls_cert: Path | None = None, tls_key: Path | None = None
) -> HypercornConfig:
    """The desk's hypercorn configuration: one bind, HTTPS with both TLS files, no logs."""
    config = HypercornConfig()
    config.bind = [where.bind]
    if tls_cert is not None and tls_key is not None:
        config.certfile = str(tls_cert)
        config.keyfile = str(tls_key)
    config.errorlog = None
    config.accesslog = None
    # Idle client connections stay open between calls for an hour (clients reuse them).
    config.keep_alive_timeout = 3600
    return config


def parse_listen(text: str | None) -> Listen:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; port 0: a free one); ``None``: loopback, free."""
    if text is None:
        return Listen("127.0.0.1", 0)
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ListenError(f"--listen wants HOST:PORT, not {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ListenError(f"--listen port must be a number, not {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ListenError(f"--listen port must be 0..65535, not {port}")
    return Listen(host, port)


@attrs.define(eq=False)
class DeskApp:
    """The ASGI application: checks, then ``/mcp`` to the SDK, ``/desk`` to the status."""

    manager: StreamableHTTPSessionManager
    token: str
    listen: Listen
    pid: int
    port: int | None = None
    """The bound port (known once hypercorn listens; requests before that get 503)."""
    web: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None
    """The web desk (``pi_agent_ask.desk.web``): every path but ``/mcp``, ``/desk`` and ``/hook``
    goes to it, after the ``Host`` check; it checks its own sign-in, ``Origin`` and CSRF
    token."""
    hooks: Callable[[Scope], Awaitable[tuple[int, dict[str, Any]]]] | None = None
    """``POST /hook``'s status and JSON answer (``None``: no such endpoint, 404): the desk's
    :func:`agent_hook` on its agents, a team desk's on the store."""

    def allowed_origins(self) -> set[str]:
        names = {"127.0.0.1", "localhost", "[::1]"}
        names.add(f"[{self.listen.host}]" if ":" in self.listen.host else self.listen.host)
        return {f"http://{name}:{self.port}" for name in names}

    def host_allowed(self, host: str | None) -> bool:
        if not is_loopback(self.listen.host):
            return True
        if host is None:
            return False
        return host in {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")}

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why a request is refused (status, message), or ``None`` when it may pass."""
        refused = self.place_refusal(scope)
        if refused is not None:
            return refused
        authorization = header(scope, "authorization") or ""
        scheme, _, credential = authorization.partition(" ")
        expected = self.token.encode("utf-8")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode("utf-8", "replace"), expected
        ):
            return 401, "Missing or wrong bearer token (see the desk's connection file)."
        return None

    def place_refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Checks 1 and 2 (``Origin``, ``Host``; 503 before the port is known), without the
        token: a team desk checks each agent's own token instead (``store/http.py``)."""
        if self.port is None:
            return 503, "The desk is starting."
        origin = header(scope, "origin")
        if origin is not None and origin not in self.allowed_origins():
            return 403, "Origin not allowed."
        if not self.host_allowed(header(scope, "host")):
            return 421, "Host not allowed."
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        if self.web is not None and path not in (MCP_PATH, MCP_PATH + "/", STATUS_PATH, HOOK_PATH):
            if self.port is None:
                await respond_json(send, 503, {"error": "The desk is starting."})
            elif not self.host_allowed(header(scope, "host")):
                await respond_json(send, 421, {"error": "Host not allowed."})
            else:
                await self.web(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            status, message = refusal
            extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
            await respond_json(send, status, {"error": message}, extra)
            return
        if path in (MCP_PATH, MCP_PATH + "/"):
            size = _declared_size(scope)
            if size is not None and size > MAX_REQUEST_BODY:
                await _refuse_too_large(receive, send, size)
                return
            await self.manager.handle_request(scope, watch_disconnect(scope, receive), send)
        elif path == STATUS_PATH and scope.get("method") == "GET":
            await respond_json(send, 200, {"service": SERVICE, "pid": self.pid})
        elif path == HOOK_PATH and scope.get("method") == "POST" and self.hooks is not None:
            status, body = await self.hooks(scope)
            await respond_json(send, status, body)
        else:
            await respond_json(send, 404, {"error": "Not found."})


HOOK_OPS = ("take", "give-back")
UNKNOWN_HOOK_OP = "Unknown hook request: op must be take or give-back."


def hook_query(scope: Scope) -> dict[str, str]:
    """A ``/hook`` request's query (the first value of each name)."""
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    return {name: values[0] for name, values in query.items()}


async def agent_hook(registry: AgentRegistry, scope: Scope) -> tuple[int, dict[str, Any]]:
    """``POST /hook``: a take or a give-back for the agent of the request's key header."""
    query = hook_query(scope)
    op = query.get("op", "")
    if op not in HOOK_OPS:
        return 400, {"error": UNKNOWN_HOOK_OP}
    headers = {
        bytes(name).decode("latin-1").lower(): bytes(value).decode("latin-1")
        for name, value in scope.get("headers", ())
    }
    try:
        key = key_from_headers(headers)
    except ValueError:
        return 400, {"error": "Invalid X-Pi-Agent-Ask-Key-UTF8: not percent-encoded UTF-8."}
    if key is None:
        return 400, {"error": "No agent key: send the X-Pi-Agent-Ask-Key header."}
    try:
        agent = await registry.agent(key)
    except InvalidKey as error:
        return 400, {"error": f"Invalid X-Pi-Agent-Ask-Key: {error}"}
    except AgentUnavailable as error:
        return 503, {"error": str(error)}
    if op == "take":
        receipt, messages = await agent.take_for_hook()
        return 200, {"messages": messages, "receipt": receipt}
    if not await agent.give_back_taken(query.get("receipt", "")):
        return 404, {"error": "No such receipt: nothing was given back."}
    return 200, {"ok": True}


def _declared_size(scope: Scope) -> int | None:
    try:
        return int(header(scope, "content-length") or "")
    except ValueError:
        return None


async def _refuse_too_large(receive: Receive, send: Send, size: int) -> None:
    """413 with a JSON-RPC error as its body: the SDK's own 413 is plain text, which its
    client reports as "Server returned an error response" (and a forwarder as a desk gone).
    A body sent without its length still meets the session manager's own limit.

    The body is read (and dropped) first, up to ``DRAIN_LIMIT`` bytes: a client still sending
    when the answer comes and the connection closes (Node's fetch) sees only a reset."""
    drained = 0
    while drained <= DRAIN_LIMIT:
        message = await receive()
        if message.get("type") != "http.request":
            return  # the client went away
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    text = TOO_LARGE_TEXT.format(size=size, limit=MAX_REQUEST_BODY)
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_PARAMS, "message": text}}
    await respond_json(send, 413, error)


async def _lifespan(receive: Receive, send: Send) -> None:
    """The desk runs the session manager itself; the lifespan protocol is only acknowledged."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def agent_key(ctx: Any) -> str:
    """A request's agent key: ``X-Pi-Agent-Ask-Key`` (or its UTF-8 form), else its MCP
    session id."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    try:
        key = key_from_headers(headers) if headers is not None else None
    except ValueError:
        raise MCPError(
            INVALID_PARAMS, "Invalid X-Pi-Agent-Ask-Key-UTF8: not percent-encoded UTF-8."
        ) from None
    if key is None and headers is not None:
        key = headers.get(MCP_SESSION_ID_HEADER)
    if key is None:
        raise MCPError(INVALID_PARAMS, "No agent key: send the X-Pi-Agent-Ask-Key header.")
    return key


async def _agent(registry: AgentRegistry, ctx: Any) -> Agent:
    try:
        return await registry.agent(agent_key(ctx))
    except InvalidKey as error:
        raise MCPError(INVALID_PARAMS, f"Invalid X-Pi-Agent-Ask-Key: {error}") from None
    except AgentUnavailable as error:
        raise MCPError(INVALID_PARAMS, str(error)) from None


def mcp_server(registry: AgentRegistry, *, version: str = "") -> Server[Any]:
    """The desk's MCP server: ``tools/list`` and ``tools/call`` on the caller's own agent."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        agent = await _agent(registry, ctx)
        return types.ListToolsResult(tools=agent.list_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        agent = await _agent(registry, ctx)
        call = agent.call_tool(
            params.name, params.arguments, report_progress=progress_reporter(ctx)
        )
        return await unless_gone(ctx, call)

    return describing(
        Server(
            "pi-agent-ask-desk",
            version=version,
            instructions=(
                "pi-agent-ask desk: ask the user structured questions with ask_user; background "
                "answers arrive through wait_for_answers and with the next tool result."
            ),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
    )
