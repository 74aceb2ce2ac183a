"""The queue's I/O shell (``actors/queue.py``) on real Trio: it performs the reducer's effects in
order, goes on with the transitions a failed write continues into, and never leaves a caller
waiting when the queue ends. A fake form runner stands in for the runtime's background form."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.validate import validate_ask_params

from .runtime_support import payload

GUARD = 20
_PARAMS = validate_ask_params(payload("a", background=True)).params
assert _PARAMS is not None


@attrs.define(eq=False)
class Journal:
    """Records the queue's writes; ``fail`` makes every write raise ``StaleBranch``; ``stuck``
    makes writes wait forever."""

    entries: list[tuple[str, Any]] = attrs.field(factory=list)
    fail: bool = False
    stuck: bool = False

    async def append(self, type_: str, data: Any) -> None:
        await self.append_many([(type_, data)])

    async def append_many(self, entries: Any) -> None:
        if self.stuck:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        if self.fail:
            raise StaleBranch("revoked")
        self.entries.extend(entries)


@attrs.define(eq=False)
class Forms:
    """The form runner: remembers each form it was asked to show, with its cancel scope."""

    shown: list[tuple[str, trio.CancelScope]] = attrs.field(factory=list)
    started: trio.Event = attrs.field(factory=trio.Event)

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
        self.started.set()


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
async def running(journal: Journal, forms: Forms, **options: Any) -> AsyncIterator[Running]:
    wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
    queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)
    actor = q.QueueActor(
        journal=journal, events=ev.EventBus(), wakeups=wake_tx, run_background_form=forms, **options
    )
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            yield Running(actor, queue_tx, wake_rx, nursery.cancel_scope)
            nursery.cancel_scope.cancel()


def _request(rid: str) -> AskRequest:
    assert _PARAMS is not None
    return AskRequest(rid, _PARAMS, background=True, created_at="t")


async def _enqueue(queue: Running, rid: str) -> None:
    assert _PARAMS is not None
    await queue.ask(lambda reply: q.Enqueue(_request(rid), fs.new_form(_PARAMS), reply))


@pytest.mark.parametrize("fail", [False, True])
async def test_quiesce_answers_when_the_closing_form_ends_with_an_answer(fail: bool) -> None:
    # The visible form is answered just as Quiesce cancels it: FormStopped carries an outcome,
    # the idle agent's wake is tried (its mark write fails when the branch is revoked), and the
    # draft save that answers Quiesce still runs after it.
    journal = Journal()
    forms = Forms()
    async with running(journal, forms) as queue:
        await _enqueue(queue, "r1")
        await forms.started.wait()
        [(rid, scope)] = forms.shown
        quiesce_tx, quiesce_rx = trio.open_memory_channel[None](1)
        await queue.inbox.send(q.Quiesce(quiesce_tx))
        await trio.testing.wait_all_tasks_blocked()
        assert scope.cancel_called
        journal.fail = fail
        outcome = Outcome(rid, result=AskResult(cancelled=False))
        await queue.inbox.send(q.FormStopped(rid, 0, fs.new_form(_PARAMS), outcome))
        assert await quiesce_rx.receive() is None
        stats = queue.actor.stats()
        assert stats.completed == ("r1",)
        assert stats.delivered == (() if fail else ("r1",))
        assert [type_ for type_, _ in journal.entries] == (
            [] if fail else ["ask:background-answer"]
        )


async def test_a_caller_hears_when_the_queue_ends_during_its_write() -> None:
    # Disposal cancels the queue while it journals a Defer: the caller's reply channel closes
    # instead of leaving it waiting.
    journal = Journal(stuck=True)
    async with running(journal, Forms()) as queue:
        defer_tx, defer_rx = trio.open_memory_channel[None](1)
        await queue.inbox.send(q.Defer("hidden", defer_tx))
        await trio.testing.wait_all_tasks_blocked()
        queue.scope.cancel()
    with pytest.raises(trio.EndOfChannel):
        defer_rx.receive_nowait()


async def test_a_queue_shows_forms_at_once_unless_told_to_wait_for_the_surface() -> None:
    forms = Forms()
    async with running(Journal(), forms) as queue:
        await _enqueue(queue, "r1")
        await forms.started.wait()
        assert [rid for rid, _ in forms.shown] == ["r1"]
    waiting = Forms()
    async with running(Journal(), waiting, surface_ready=False) as queue:
        await _enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        assert waiting.shown == []
        await queue.inbox.send(q.SurfaceReady())
        await waiting.started.wait()


async def test_a_queue_without_a_terminal_shows_nothing_and_delivers_nothing() -> None:
    forms = Forms()
    async with running(Journal(), forms, tui=False) as queue:
        await _enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        assert forms.shown == []
        assert await queue.ask(q.TurnBoundary) == []
        assert queue.actor.stats().herdr_owners == frozenset()
