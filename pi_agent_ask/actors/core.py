"""The runtime's state and its conversation with the queue: what every part of the runtime uses.

``RuntimeCore`` holds only channel ends, configuration read at open, and the revocable journal
view of the current branch (``BranchWriter``): after a session change, writes from surfaces of
the old branch are refused (``StaleBranch``) instead of landing on the new one. The parts of the
runtime (``hooks``, ``dispatch``, ``ask``, ``wait``, ``remote``, ``recovery``, ``config``)
are functions over it; ``runtime.Runtime`` is the facade that offers them as the methods of
``API.md``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.form import FormInput, Surface
from pi_agent_ask.actors.notifications import Notify
from pi_agent_ask.actors.queue_state import CommandSink, ReplyTo
from pi_agent_ask.actors.records import StaleBranch
from pi_agent_ask.form import state as fs

_R = TypeVar("_R")
_T = TypeVar("_T")

Mode = Literal["tui", "print", "json", "rpc"]
MODES: tuple[Mode, ...] = ("tui", "print", "json", "rpc")

TEARDOWN_TIMEOUT = 5.0
"""Seconds a cancelled task may spend telling the queue or the journal that it ended."""


def now_iso() -> str:
    """The time now in UTC as ``2026-01-02T03:04:05.678Z`` (milliseconds, truncated)."""
    return iso_of(time.time_ns())


def iso_of(ns: int) -> str:
    """``ns`` nanoseconds after the epoch as ``now_iso`` writes them: what
    ``datetime.isoformat(timespec="milliseconds")`` gives for it in UTC, with ``Z``."""
    seconds, millis = divmod(ns // 1_000_000, 1000)
    return f"{_second_of(seconds)}{millis:03}Z"


def _second_of(seconds: int) -> str:
    """``2026-01-02T03:04:05.``: the head of every timestamp within that second."""
    year, month, day, hour, minute, second = time.gmtime(seconds)[:6]
    return f"{year}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}."


@attrs.define(eq=False, repr=False)
class Timestamps:
    """``now_iso`` for one runtime, keeping the head of the last second it wrote (``2026-01-
    02T03:04:05.``): a timestamp within that second is that text and its milliseconds, with no
    ``time.gmtime`` and no field formatted (a background form takes two, its request's and its
    answer's, most often within one second)."""

    clock: Callable[[], int] = time.time_ns
    """Nanoseconds since the epoch (``time.time_ns``)."""
    _second: int = attrs.field(default=-1, init=False)
    _head: str = attrs.field(default="", init=False)

    def now(self) -> str:
        """What ``now_iso()`` would return now: ``iso_of(self.clock())``."""
        seconds, millis = divmod(self.clock() // 1_000_000, 1000)
        if seconds != self._second:
            self._head = _second_of(seconds)
            self._second = seconds
        return f"{self._head}{millis:03}Z"


def tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


@attrs.define(eq=False, repr=False)
class BranchWriter:
    """The journal as one branch's surfaces see it: revoked when the session changes."""

    journal: Any
    revoked: bool = False

    async def append(self, type_: str, data: Mapping[str, Any]) -> Any:
        if self.revoked:
            raise StaleBranch(type_)
        return await self.journal.append(type_, data)

    async def append_many(self, entries: Sequence[tuple[str, Mapping[str, Any]]]) -> Any:
        if self.revoked:
            raise StaleBranch(entries[0][0] if entries else "")
        return await self.journal.append_many(entries)

    async def branch(self) -> Any:
        return await self.journal.branch()

    async def read(self, read: Any) -> Any:
        return await self.journal.read(read)


@attrs.define(eq=False, repr=False)
class PendingCall:
    """A tool call's ``tool-call`` entry until it is on the branch.

    ``ask_user`` writes it in the same chain as the request's first entries (one write, call
    first); a call that never writes them has it written with its result (``dispatch``).
    """

    entry: tuple[str, Mapping[str, Any]]
    written: bool = False
    result_written: bool = False
    """Its result is on the branch too (a background ``ask_user``: the queue wrote both)."""

    @property
    def tool_call_id(self) -> str | None:
        tool_call_id: str | None = self.entry[1].get("toolCallId")
        return tool_call_id

    def unwritten(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The entry, if it still has to go first in the next chain of this call."""
        return [] if self.written else [self.entry]

    async def append_with(
        self, writer: BranchWriter, entries: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> None:
        """Write ``entries`` after the call entry (if not written yet), in one chain, shielded:
        once the request's entries may be on the branch, the call goes on to record an
        outcome (or to enqueue it), whatever cancels the caller."""
        with trio.CancelScope(shield=True):
            await writer.append_many([*self.unwritten(), *entries])
        self.written = True


@attrs.frozen(repr=False)
class RuntimeConfig:
    """What the runtime reads from the settings at open (and on explicit changes)."""

    form_settings: fs.FormSettings = attrs.field(factory=fs.FormSettings)
    present_single_as_multi: bool = False
    background_only: bool = False
    history_tools: bool = False
    notifications_enabled: bool = True
    notification_channels: tuple[Any, ...] = ()


@attrs.define(eq=False, repr=False)
class RuntimeCore:
    """The state of a running runtime, and the ways its parts talk to the queue."""

    mode: Mode
    events: ev.EventBus
    config: RuntimeConfig
    cwd: Path
    settings: Any
    """The loaded settings (``persistence.settings.LoadedSettings``) the runtime follows."""
    wakeups: trio.MemoryReceiveChannel[dict[str, Any]]
    _nursery: trio.Nursery
    _queue_tx: trio.MemorySendChannel[q.QueueMessage]
    _writer: BranchWriter
    _journal: Any
    _surface: Surface
    _notify_tx: trio.MemorySendChannel[Notify]
    _opened: trio.Event
    _aborts_tx: trio.MemorySendChannel[str]
    aborts: trio.MemoryReceiveChannel[str]
    _activity_tx: trio.MemorySendChannel[q.AgentActivity]
    """Agent busy/idle, forwarded to the queue by one task: it wakes the queue, which reads
    the last call from ``_hook_calls`` (``QueueActor._unseen_hook``)."""
    _hook_calls: q.HookCalls
    _notices_tx: trio.MemorySendChannel[str]
    notices: trio.MemoryReceiveChannel[str]
    """Messages for the person: settings problems, damaged session files, recovery."""
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _timestamps: Timestamps = attrs.field(factory=Timestamps)
    """``now_iso`` for this runtime's requests and answers (``Timestamps.now``)."""
    history_index: Any = None
    """The history records of the last branch state listed (``persistence.history``)."""
    _flow_commands: Callable[[str], CommandSink | None] | None = None
    """The queue's ``flow_commands`` (set once the queue exists): remote answers find their
    form with it without a round trip through the queue."""
    _write_terminal: Callable[[str], None] = attrs.field(default=lambda _text: None)
    """Where notification bytes go (``open_runtime(write_terminal=)``): a runtime that writes
    them nowhere and runs no command makes no notification (``notifications.unheard``)."""
    _notify_link: Callable[[str], str | None] | None = None
    """The page of a form, by flow id (``open_runtime(notify_link=)``: the web desk), carried
    to command channels as ``ASK_NOTIFY_URL``."""
    one_call: bool = False
    """Shows only the forms of its own calls (``open_runtime(one_call=True)``)."""
    _epoch: int = 0
    _model_requested: bool = False
    _routing_submit: bool = False
    """A ``submit`` is being routed in the handler now (``remote.on_submit``): one emitted by
    a listener of its ``submit-result`` takes a task of its own, so retries never nest."""
    _disposed: bool = False
    """Set when ``open_runtime`` leaves: a surface may outlive the runtime (the overlay's save
    finishing late), and nothing may start in the runtime's closed nursery then."""

    def notice(self, text: str) -> None:
        """A message for the person (the host shows ``notices``); never blocks."""
        self._notices_tx.send_nowait(text)

    async def statistics(self, params_of: tuple[str, ...] = ()) -> q.QueueStats:
        """A snapshot of the queue: pending, completed, delivered, visible flow, Herdr owners;
        the params of the pending requests and of ``params_of``."""
        return await self._ask_queue(lambda reply: q.Inspect(reply, params_of))

    async def defer_queue(self) -> None:
        """Hide the panel and defer every question; queue and drafts are kept."""
        await self._put_back()

    async def _put_back(self, reason: Literal["hidden", "user_message"] = "hidden") -> str | None:
        """``defer_queue``; the sentence saying nothing was put back when its journal write
        failed (a background form's Later on the desk's page tells the person), else ``None``."""
        return await self._ask_queue(lambda reply: q.Defer(reason, reply))

    async def quiesce(self) -> None:
        """Close the visible background form and save every draft (bounded, shielded)."""
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(TEARDOWN_TIMEOUT),
            suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel),
        ):
            await self._ask_queue_done(lambda reply: q.Quiesce(reply))

    async def tell_queue(self, message: q.QueueMessage) -> None:
        """Send a message that must reach the queue even from a cancelled task (teardown).

        Shielded and bounded; once the runtime is being disposed the queue is gone and the
        message has nothing left to do, so a closed channel is not an error.
        """
        with (
            trio.CancelScope(shield=True, relative_deadline=TEARDOWN_TIMEOUT),
            suppress(trio.BrokenResourceError, trio.ClosedResourceError),
        ):
            await self._queue_tx.send(message)

    async def _ask_queue(
        self, make: Callable[[ReplyTo[_R]], q.QueueMessage], *, shielded: bool = False
    ) -> _R:
        """The queue's reply to ``make(reply)``, through a one-shot reply channel;
        ``shielded``: whatever cancels the caller."""
        if shielded:
            with trio.CancelScope(shield=True):
                return await self._ask_queue(make)
        reply_tx, reply_rx = trio.open_memory_channel[_R](1)
        with reply_rx:
            await self._queue_tx.send(make(reply_tx))
            return await reply_rx.receive()

    async def _ask_queue_done(self, make: Callable[[ReplyTo[None]], q.QueueMessage]) -> None:
        """Ask the queue for something it only acknowledges (``None``)."""
        await self._ask_queue(make)

    async def _find_flow(self, flow_id: str) -> trio.MemorySendChannel[FormInput] | None:
        """A clone of the command channel of the visible flow ``flow_id`` (``None``: not active)."""
        sink: CommandSink | None = await self._ask_queue(lambda reply: q.FindFlow(flow_id, reply))
        # The queue holds the sinks this runtime enqueued: form command channels.
        assert sink is None or isinstance(sink, trio.MemorySendChannel)
        return sink

    async def _tell_visible(self, message: FormInput) -> None:
        """Send ``message`` to the visible form, if there is one (it may end meanwhile)."""
        stats = await self.statistics()
        visible = stats.visible
        if visible is None:
            return
        target = await self._find_flow(visible)
        if target is not None:
            with target, suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await target.send(message)
