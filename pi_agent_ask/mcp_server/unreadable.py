"""Answers for the stdio lines the SDK cannot read.

The SDK's stdio transport parses each line of standard input into a JSON-RPC message and, when
that fails, hands the server an exception in place of the message, which the server drops
without a word. A client whose request was dropped (a lone UTF-16 surrogate in its arguments,
nesting deeper than the SDK's parser takes, a line that is not JSON) would wait forever for
its answer. :class:`AnsweredReads` is the server's read stream with those lines answered: a
JSON-RPC error, ``-32700`` (parse error, ``id`` null) for a line that is not JSON, else
``-32600`` (invalid request) with the request's ``id`` and what is wrong with it, in the
words of the boundary check every tool argument passes (``form/untrusted.py``). Notifications
and responses get no answer, as JSON-RPC says. The SDK also reads a request whose ``id`` is no
string or integer (``null``, ``1.5``, ``true``) as a notification and drops it; such a line
gets ``-32600`` with ``id`` null (:func:`misread_reply`).

Which line failed (or was misread): the SDK's reader parses a line and hands the result on (a
stream without a buffer) before it asks for the next one, so the line the server's standard
input handed out last (:class:`~pi_agent_ask.mcp_server.stdio.ReplayedStdin`) is the one an
exception (or a notification) is about.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Self

import anyio
import attrs
import mcp.types as types
from mcp.shared.message import SessionMessage

__all__ = ["AnsweredReads", "misread_reply", "unreadable_reply"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NOT_A_MESSAGE = "Invalid Request: not a JSON-RPC 2.0 message"
NOT_A_REQUEST = (
    'Invalid Request: not a JSON-RPC 2.0 request ({"jsonrpc": "2.0", "id", "method", "params"})'
)
BATCH = "Invalid Request: a batch (a JSON array); send one JSON-RPC 2.0 message per line"
BAD_ID = (
    "Invalid Request: the id of a request is a string or an integer (MCP: never null); a "
    "message without an id is a notification and gets no answer"
)


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def unreadable_reply(line: str) -> types.JSONRPCError | None:
    """The answer to a line the SDK could not read, or ``None`` when none is due (a
    notification, a response)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as error:
        return _error(None, PARSE_ERROR, f"Parse error: {error}")
    if isinstance(message, list):
        return _error(None, INVALID_REQUEST, BATCH)
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, NOT_A_MESSAGE)
    given = message.get("id")
    request_id = given if isinstance(given, str | int) and not isinstance(given, bool) else None
    if "method" not in message:
        # A response the SDK could not read is not answered; anything else is no message.
        return None if request_id is not None else _error(None, INVALID_REQUEST, NOT_A_MESSAGE)
    if "id" not in message:
        return None  # a notification
    from pi_agent_ask.form import untrusted

    refusal = untrusted.check(message)
    if refusal is None:
        return _error(request_id, INVALID_REQUEST, NOT_A_REQUEST)
    return _error(request_id, INVALID_REQUEST, f"Invalid Request: {refusal.describe()}")


def misread_reply(line: str) -> types.JSONRPCError | None:
    """The answer to a line the SDK read as a notification: ``None`` for a notification; a
    request whose ``id`` is no string or integer (``null``, ``1.5``, ``true``), which the SDK
    takes for a notification and drops, gets ``-32600`` (``id`` null, as it cannot be used)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None  # the SDK read it: not a line of this kind
    if isinstance(message, dict) and "id" in message:
        return _error(None, INVALID_REQUEST, BAD_ID)
    return None


class ReadStream:
    """What the SDK's server reads with, around ``receive()`` and ``inner``: iteration until
    the end of the stream, closing, and the ``async with`` the SDK enters. The read streams
    that wrap the SDK's own (``AnsweredReads``, ``input_end.HeldReads``) share it."""

    inner: Any

    async def receive(self) -> Any:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


@attrs.define(eq=False)
class AnsweredReads(ReadStream):
    """The server's read stream (``inner``, from the SDK's ``stdio_server``) with each line it
    could not read answered on ``write``; ``last_line()`` is the line standard input handed
    out last. Read like the SDK's own stream."""

    inner: Any
    write: Any
    last_line: Callable[[], str]

    @property
    def last_context(self) -> Any:
        # The SDK's server runs each message in its sender's context when the stream has one.
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self.inner.receive()
            if isinstance(item, Exception):
                reply = unreadable_reply(self.last_line())
            elif isinstance(item.message, types.JSONRPCNotification):
                reply = misread_reply(self.last_line())
                if reply is None:
                    return item
            else:
                return item
            if reply is not None:
                await self.write.send(SessionMessage(reply))
