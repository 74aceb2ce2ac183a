"""The ASGI pieces both desks' HTTP sides share (a desk of files, ``desk/http.py``; a team desk,
``store/http.py``): reading a header, a JSON response, noticing a client that went away in
the middle of a call, and ending that call instead of answering nobody."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import attrs
import mcp.types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

__all__ = [
    "DISCONNECTED",
    "Disconnect",
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
"""The ASGI scope key of the request's :class:`Disconnect`."""

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


@attrs.define(eq=False)
class Disconnect:
    """Whether a request's client went away, and the tool calls that end when it does.

    The request's ``receive`` notes the ``http.disconnect`` (:func:`watch_disconnect`), and
    that cancels the scope of every call running under :meth:`cancelling` there and then: no
    task of its own watches for it, so a call's result goes back to the transport in the
    task that made it."""

    gone: bool = False
    _calls: set[trio.CancelScope] = attrs.field(factory=set, init=False)

    def note(self) -> None:
        self.gone = True
        for scope in self._calls:
            scope.cancel()

    @contextlib.contextmanager
    def cancelling(self) -> Iterator[trio.CancelScope]:
        """A cancel scope that is cancelled when (or since) the client went away."""
        with trio.CancelScope() as scope:
            if self.gone:
                scope.cancel()
            self._calls.add(scope)
            try:
                yield scope
            finally:
                self._calls.discard(scope)


def watch_disconnect(scope: Scope, receive: Receive) -> Receive:
    """``receive``, noting in the request's scope when its client goes away.

    A client that drops its connection in the middle of a call (killed, or cut without the
    courtesy ``notifications/cancelled``) leaves the SDK's handler running, and the result it
    returns later has nowhere to go. The :class:`Disconnect` in the scope lets the tool
    handler end the call instead (:func:`unless_gone`), so a foreground form stays queued and
    its answer is delivered later."""
    disconnect = Disconnect()
    scope[DISCONNECTED] = disconnect

    async def watched() -> dict[str, Any]:
        message = await receive()
        if message.get("type") == "http.disconnect":
            disconnect.note()
        return message

    return watched


async def unless_gone(ctx: Any, call: Awaitable[types.CallToolResult]) -> types.CallToolResult:
    """Await the tool call ``call`` of request context ``ctx`` unless its client's connection
    closes first (:func:`watch_disconnect`): then the call is cancelled (a foreground form
    stays queued, its answer delivered later) and nothing is answered."""
    scope = getattr(ctx.request, "scope", None)
    disconnect = scope.get(DISCONNECTED) if isinstance(scope, dict) else None
    if not isinstance(disconnect, Disconnect):
        return await call
    with disconnect.cancelling():
        return await call
    raise MCPError(CONNECTION_CLOSED, "The client went away; its question stays queued.")


def progress_reporter(ctx: Any) -> Any:
    """The session's ``report_progress`` when the call asked for progress (a progress token
    in its ``_meta``), else ``None``."""
    meta = ctx.meta
    if not isinstance(meta, dict):
        return None
    if meta.get("progressToken", meta.get("progress_token")) is None:
        return None
    return ctx.session.report_progress
