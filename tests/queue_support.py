"""The queue actor's shell (``actors/queue.py``) on real Trio, for its tests: a journal that
records its frames and fails or holds writes on demand, a form runner that remembers what it
was asked to show, and ``running``, which runs a ``QueueActor`` in a nursery."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.actors.records import AskRequest, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams
from pi_agent_ask.form.validate import validate_ask_params

from .runtime_support import payload

GUARD = 20
_VALID = validate_ask_params(payload("a", background=True)).params
assert _VALID is not None
PARAMS: AskParams = _VALID


@attrs.define(eq=False)
class Journal:
    """Records the queue's writes, one frame per ``append_many``. ``fail`` makes every write
    raise ``StaleBranch``, ``error`` raise that error; ``fail_on`` fails only the writes that
    hold an entry of that type (with ``error``, else ``StaleBranch``); ``stuck`` makes writes
    wait forever, ``hold`` until it is set."""

    entries: list[tuple[str, Any]] = attrs.field(factory=list)
    frames: list[list[str]] = attrs.field(factory=list)
    """The entry types of each frame written."""
    fail: bool = False
    stuck: bool = False
    error: BaseException | None = None
    fail_on: str | None = None
    hold: trio.Event | None = None

    async def append(self, type_: str, data: Any) -> None:
        await self.append_many([(type_, data)])

    async def append_many(self, entries: Sequence[tuple[str, Any]]) -> None:
        if self.stuck:
            await trio.sleep_forever()
        if self.hold is not None:
            await self.hold.wait()
        await trio.lowlevel.checkpoint()
        if self.fail_on is not None:
            if any(type_ == self.fail_on for type_, _ in entries):
                raise self.error or StaleBranch("revoked")
        elif self.error is not None:
            raise self.error
        if self.fail:
            raise StaleBranch("revoked")
        self.entries.extend(entries)
        self.frames.append([type_ for type_, _ in entries])


@attrs.define(eq=False)
class Forms:
    """The form runner: remembers each form it was asked to show, with its cancel scope.
    ``hold``: each form stays open until its scope is cancelled, then finishes after a
    checkpoint (as a form writes its outcome once it ends); ``finished`` lists those."""

    shown: list[tuple[str, trio.CancelScope]] = attrs.field(factory=list)
    started: trio.Event = attrs.field(factory=trio.Event)
    epochs: list[int] = attrs.field(factory=list)
    forms: list[fs.FormState] = attrs.field(factory=list)
    inboxes: list[trio.MemoryReceiveChannel[FormInput]] = attrs.field(factory=list)
    commands: list[trio.MemorySendChannel[FormInput]] = attrs.field(factory=list)
    hold: bool = False
    finished: list[str] = attrs.field(factory=list)

    async def __call__(
        self,
        request: AskRequest,
        form: fs.FormState,
        epoch: int,
        scope: trio.CancelScope,
        commands: trio.MemorySendChannel[FormInput],
        inbox: trio.MemoryReceiveChannel[FormInput],
    ) -> None:
        self.shown.append((request.request_id, scope))
        self.epochs.append(epoch)
        self.forms.append(form)
        self.inboxes.append(inbox)
        self.commands.append(commands)
        self.started.set()
        if self.hold:
            with scope:
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
            self.finished.append(request.request_id)


@attrs.frozen
class Running:
    actor: q.QueueActor
    inbox: trio.MemorySendChannel[q.QueueMessage]
    wakes: trio.MemoryReceiveChannel[dict[str, Any]]
    scope: trio.CancelScope

    async def ask(self, make: Any) -> Any:
        reply_tx, reply_rx = trio.open_memory_channel[Any](1)
        await self.inbox.send(make(reply_tx))
        return await reply_rx.receive()


@asynccontextmanager
async def running(
    journal: Journal, forms: Forms, *, buffer: float = 0, **options: Any
) -> AsyncIterator[Running]:
    """A queue actor running in a nursery. ``buffer``: its channel's (0, as the runtime's;
    ``math.inf`` lets a test leave several messages waiting with ``send_nowait``)."""
    wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
    queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](buffer)
    events = options.pop("events", None) or ev.EventBus()
    actor = q.QueueActor(
        journal=journal, events=events, wakeups=wake_tx, run_background_form=forms, **options
    )
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            yield Running(actor, queue_tx, wake_rx, nursery.cancel_scope)
            nursery.cancel_scope.cancel()


def request(rid: str) -> AskRequest:
    return AskRequest(rid, PARAMS, background=True, created_at="t")


async def enqueue(queue: Running, rid: str) -> None:
    await queue.ask(lambda reply: q.Enqueue(request(rid), fs.new_form(PARAMS), reply))


def completed_ids(state: Any) -> tuple[str, ...]:
    """The requests of a ``QueueState``'s epoch with an outcome, oldest first (every request is
    walked: for tests; ``QueueStats.completed`` counts them)."""
    return tuple(item.request.request_id for item in state.ordered() if item.outcome is not None)


def delivered_ids(state: Any) -> tuple[str, ...]:
    """The requests of a ``QueueState``'s epoch whose outcome was delivered, oldest first."""
    return tuple(item.request.request_id for item in state.ordered() if item.delivered)
