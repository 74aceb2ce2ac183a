"""The end of the client's input: every request read is answered before the server ends.

MCP ends a stdio session by closing the server's standard input: the client then waits for
the server to exit (and signals it when it takes too long). Requests the client wrote before
it closed its input are still owed their answers, and a script that writes its requests,
closes its input and reads the output (``printf '...' | pi-agent-ask mcp``) reads them. The
SDK's read loop, on the end of its input, cancels every request still running and answers it
``Connection closed``, even one that needed a few milliseconds (``tools/list``, a history
tool, a background ``ask_user``'s receipt).

:class:`Outstanding` counts the requests read and not answered yet (by id: a request adds
one, its response or error subtracts one, and so does the client's ``notifications/cancelled``
for it, which the SDK leaves unanswered). :class:`HeldReads` is the server's read stream that,
at the end of its input, first calls ``on_end`` (the calls that wait for the person return
now, saying where their forms stay: ``router.Router.input_closed``) and then ends only once
every request read has been answered. :class:`CountedWrites` is the write stream that sees
the answers go out. :class:`PersonWaits` holds the calls that wait for the person and makes
the result of each that the end of the input cuts (``status: "input_closed"``): the router of
``pi-agent-ask mcp`` and the team forwarder (``store/forward.py``) both use it.

Invariant: the read stream ends after the last answer was handed to the transport's writer,
so the SDK's teardown cancels no request and writes no ``Connection closed``; or, bounded,
``ANSWERS_LIMIT`` seconds after the input ended (a call held up by something other than a
person, a desk that stopped answering, say, must not keep the process forever: MCP clients
signal a server that does not exit soon, a script would wait without end).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import mcp.types as types
import trio
from mcp.shared.message import SessionMessage

from pi_agent_ask.mcp_common.closing import CutOnClose
from pi_agent_ask.mcp_server.unreadable import ReadStream

__all__ = ["INPUT_CLOSED", "ON_DESK", "CountedWrites", "HeldReads", "Outstanding", "PersonWaits"]

CANCELLED = "notifications/cancelled"
ANSWERS_LIMIT = 30.0
"""Seconds the answers owed may take once the input ended."""
LATE_LOG = (
    "pi-agent-ask: the client closed its input; {count} request(s) still running after "
    "{limit:g} s are ended"
)
INPUT_CLOSED = "input_closed"
"""The ``status`` in the ``structuredContent`` of a call the end of the input ended."""
INPUT_CLOSED_TEXT = (
    "The MCP client closed this server's input (standard input, which ends an MCP session) "
    "while this call waited for the user, so no answer can reach it here. {where}. A "
    "`pi-agent-ask desk`, or the next `pi-agent-ask mcp` of this agent in a client that shows "
    "forms, shows what is queued, and the answers reach the agent through wait_for_answers or "
    "with a later tool result."
)
INPUT_CLOSED_LOG = (
    "pi-agent-ask: the client closed its input while a call waited for the user. {where}."
)
ON_DESK = "Nothing is lost: the question stays queued on the pi-agent-ask desk"
"""Where the form of a call forwarded to a desk stays (a desk keeps the form of a call cut,
and a team desk makes it a background one)."""


def _id_key(request_id: Any) -> str:
    # A response carries its request's id as it came; a cancellation may name it as a string.
    return str(request_id)


@attrs.define(eq=False)
class Outstanding:
    """The requests read and not answered yet (a count per id: ids may repeat)."""

    counts: Counter[str] = attrs.field(factory=Counter)
    ended: bool = False
    """The input ended: ``settled`` is set once ``counts`` is empty."""
    settled: trio.Event = attrs.field(factory=trio.Event)

    def read(self, message: Any) -> None:
        match message:
            case types.JSONRPCRequest(id=request_id):
                self.counts[_id_key(request_id)] += 1
            case types.JSONRPCNotification(method=method, params=params) if method == CANCELLED:
                # The SDK answers no request its client cancelled.
                given = params.get("requestId") if isinstance(params, dict) else None
                if given is not None:
                    self._answered(_id_key(given))

    def written(self, message: Any) -> None:
        match message:
            case types.JSONRPCResponse(id=request_id) | types.JSONRPCError(id=request_id):
                if request_id is not None:
                    self._answered(_id_key(request_id))

    def _answered(self, key: str) -> None:
        if self.counts[key] > 1:
            self.counts[key] -= 1
        else:
            self.counts.pop(key, None)
        self._check()

    def _check(self) -> None:
        if self.ended and not self.counts:
            self.settled.set()

    async def wait_settled(self, limit: float) -> None:
        """The input ended: return once every request read has been answered, or after
        ``limit`` seconds (saying so on standard error)."""
        self.ended = True
        self._check()
        with trio.move_on_after(limit):
            await self.settled.wait()
            return
        count = sum(self.counts.values())
        print(LATE_LOG.format(count=count, limit=limit), file=sys.stderr, flush=True)


@attrs.define(eq=False)
class HeldReads(ReadStream):
    """A read stream (``inner``) whose end waits for the answers owed (``outstanding``), after
    ``on_end`` was called. Read like the SDK's own stream."""

    inner: Any
    outstanding: Outstanding
    on_end: Callable[[], None]
    limit: float = ANSWERS_LIMIT

    @property
    def last_context(self) -> Any:
        # The SDK's server runs each message in its sender's context when the stream has one.
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self.inner.receive()
        except anyio.EndOfStream:
            self.on_end()
            await self.outstanding.wait_settled(self.limit)
            raise
        if isinstance(item, SessionMessage):
            self.outstanding.read(item.message)
        return item


@attrs.define(eq=False)
class CountedWrites:
    """A write stream (``inner``) that tells ``outstanding`` of each answer it hands on."""

    inner: Any
    outstanding: Outstanding

    async def send(self, item: SessionMessage) -> None:
        await self.inner.send(item)
        self.outstanding.written(item.message)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> CountedWrites:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


@attrs.define(eq=False)
class PersonWaits:
    """The calls that wait for the person (a foreground ``ask_user``, ``wait_for_answers``:
    ``tools.waits_for_person``), and whether the client closed its input, after which no
    person answers through this server: :meth:`close` cuts them, and each returns
    :meth:`ended`'s result."""

    log: Callable[[str], None]
    _calls: CutOnClose = attrs.field(factory=lambda: CutOnClose())

    @property
    def closed(self) -> trio.Event:
        return self._calls.closed

    def close(self) -> None:
        """The input ended: every call in :meth:`unless_closed` returns now."""
        self._calls.close()

    async def unless_closed(
        self, call: Callable[[], Awaitable[types.CallToolResult]]
    ) -> types.CallToolResult:
        """``call()``'s result, or, when the input closes first, the result saying so (a call
        forwarded to a desk: the desk keeps its form queued when the call is cut)."""
        with self._calls.cut_on_close() as cut:
            result = await call()
        if not cut.cancelled_caught:
            return result
        return self.ended(ON_DESK, (), None)

    def ended(
        self, where: str, request_ids: tuple[str, ...], journal: Path | None
    ) -> types.CallToolResult:
        """The result of a call that waited for the person when the input closed: ``where``
        says where its questions stay (``request_ids``, in ``journal`` when it is a file)."""
        self.log(INPUT_CLOSED_LOG.format(where=where))
        structured = {
            "status": INPUT_CLOSED,
            "pendingRequestIds": list(request_ids),
            "sessionFile": None if journal is None else os.fspath(journal),
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=INPUT_CLOSED_TEXT.format(where=where))],
            structured_content=structured,
            is_error=True,
        )
