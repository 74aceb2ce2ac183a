"""The ASGI pieces both desks' HTTP sides share (a desk of files, ``desk/http.py``; a team desk,
``store/http.py``): reading a header, a JSON response, noticing a client that went away in
the middle of a call, and ending that call instead of answering nobody."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import mcp.types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

__all__ = [
    "DISCONNECTED",
    "Receive",
    "Scope",
    "Send",
    "header",
    "progress_reporter",
    "respond_json",
    "unless_gone",
    "watch_disconnect",
]

DISCONNECTED = "pi_agent_ask.disconnected"
"""The ASGI scope key of the event set when the request's client went away."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def header(scope: Scope, name: str) -> str | None:
    """The request's header ``name`` (lower case), or ``None``."""
    raw = name.encode("ascii")
    for key, value in scope.get("headers", ()):
        if key.lower() == raw:
            return bytes(value).decode("latin-1")
    return None


async def respond_json(
    send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole JSON response (the desks' refusals and status answers)."""
    payload = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def watch_disconnect(scope: Scope, receive: Receive) -> Receive:
    """``receive``, noting in the request's scope when its client goes away.

    A client that drops its connection in the middle of a call (killed, or cut without the
    courtesy ``notifications/cancelled``) leaves the SDK's handler running, and the result it
    returns later has nowhere to go. The event in the scope lets the tool handler end the
    call instead (:func:`unless_gone`), so a foreground form stays queued and its answer is
    delivered later."""
    disconnected = trio.Event()
    scope[DISCONNECTED] = disconnected

    async def watched() -> dict[str, Any]:
        message = await receive()
        if message.get("type") == "http.disconnect":
            disconnected.set()
        return message

    return watched


async def unless_gone(ctx: Any, call: Awaitable[types.CallToolResult]) -> types.CallToolResult:
    """Await the tool call ``call`` of request context ``ctx`` unless its client's connection
    closes first (:func:`watch_disconnect`): then the call is cancelled (a foreground form
    stays queued, its answer delivered later) and nothing is answered."""
    scope = getattr(ctx.request, "scope", None)
    disconnected = scope.get(DISCONNECTED) if isinstance(scope, dict) else None
    if disconnected is None:
        return await call
    results: list[types.CallToolResult] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            results.append(await call)
            nursery.cancel_scope.cancel()

        async def watch() -> None:
            await disconnected.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(run)
        nursery.start_soon(watch)
    if not results:
        raise MCPError(CONNECTION_CLOSED, "The client went away; its question stays queued.")
    return results[0]


def progress_reporter(ctx: Any) -> Any:
    """The session's ``report_progress`` when the call asked for progress (a progress token
    in its ``_meta``), else ``None``."""
    meta = ctx.meta
    if not isinstance(meta, dict):
        return None
    if meta.get("progressToken", meta.get("progress_token")) is None:
        return None
    return ctx.session.report_progress
