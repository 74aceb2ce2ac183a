"""Asking a busy queue. An asker that finds the queue task busy (not parked) asks again once
it is about to park, having handled what it was sent (``QueueActor.ask_now(wait=True)``), so
askers that keep coming do not keep it busy with a backlog; a shielded one waits through a
cancellation, as its send would have, and the queue's end releases them all.

A message the queue task must answer waits for its reply in a ``queue.Answer``, which keeps the
promise of the one-shot reply channel it stands for: every reply case runs on both, with real
Trio scheduling, and the asker and the queue see the same things (values, errors,
cancellations, passes through the scheduler)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime

from .runtime_support import WriteGate, payload, settings_file
from .test_enqueue_fast import Journal, _enqueue, _queue_actor

GUARD = 10


class _Channel:
    """The reply channel an ``Answer`` stands for, as its asker used it: a pair with a buffer
    of one, read with ``with receive: await receive.receive()``."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[Any](1)

    def send_nowait(self, value: Any) -> None:
        self.send.send_nowait(value)

    def close(self) -> None:
        self.send.close()

    async def wait(self) -> Any:
        with self.receive:
            return await self.receive.receive()


def _both() -> list[Any]:
    return [pytest.param(_Channel, id="channel"), pytest.param(q.Answer, id="answer")]


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


async def _outcome(reply: Any) -> tuple[str, Any]:
    try:
        return "value", await reply.wait()
    except trio.EndOfChannel:
        return "closed", None


def _error(call: Any, *args: Any) -> str | None:
    try:
        call(*args)
    except Exception as error:
        return type(error).__name__
    return None


@pytest.mark.parametrize("make", _both())
async def test_a_reply_there_before_the_wait_is_read_after_one_pass(make: Any) -> None:
    reply = make()
    reply.send_nowait(7)
    assert _error(reply.send_nowait, 8) == "WouldBlock"  # one value only
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        assert await _outcome(reply) == ("value", 7)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert steps.count == 1  # this task's step after its pass through the scheduler


@pytest.mark.parametrize("make", _both())
async def test_a_reply_closed_before_the_wait_ends_it_at_once(make: Any) -> None:
    reply = make()
    reply.close()
    assert _error(reply.send_nowait, 1) == "ClosedResourceError"
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        assert await _outcome(reply) == ("closed", None)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert steps.count == 0  # no pass through the scheduler


@pytest.mark.parametrize("make", _both())
@pytest.mark.parametrize("how", ["value", "close"])
async def test_a_waiting_asker_gets_the_reply_or_the_close(make: Any, how: str) -> None:
    reply = make()
    got: list[tuple[str, Any]] = []

    async def ask() -> None:
        got.append(await _outcome(reply))

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            if how == "value":
                reply.send_nowait("v")
            else:
                reply.close()
                reply.close()  # twice: nothing more happens
    assert got == ([("value", "v")] if how == "value" else [("closed", None)])


@pytest.mark.parametrize("make", _both())
async def test_an_asker_cancelled_while_it_waits_leaves_and_refuses_the_reply(make: Any) -> None:
    reply = make()
    cancelled = False

    async def ask(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        nonlocal cancelled
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await reply.wait()
        cancelled = scope.cancelled_caught

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            scope = await nursery.start(ask)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert cancelled
    assert _error(reply.send_nowait, "late") == "BrokenResourceError"
    assert _error(reply.close) is None


@pytest.mark.parametrize("make", _both())
@pytest.mark.parametrize("answered", [True, False])
async def test_a_cancelled_asker_reads_nothing_even_with_the_reply_there(
    make: Any, answered: bool
) -> None:
    reply = make()
    if answered:
        reply.send_nowait(1)
    with trio.CancelScope() as scope:
        scope.cancel()
        await reply.wait()
    assert scope.cancelled_caught


def _count_enqueues_in_the_queue_task(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    handled = [0]
    real_handle = q.QueueActor._handle

    async def handle(self: q.QueueActor, message: Any) -> None:
        handled[0] += isinstance(message, q.Enqueue)
        await real_handle(self, message)

    monkeypatch.setattr(q.QueueActor, "_handle", handle)
    return handled


async def test_callers_that_find_the_queue_busy_ask_again_once_it_parks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sixteen callers at once, and a message on its way to the queue when they start: none of
    # their enqueues goes to the queue task (each had gone there, one per pass through the
    # scheduler, the callers' next calls finding it busy with the ones before them).
    callers, calls = 16, 4
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            handled = _count_enqueues_in_the_queue_task(monkeypatch)
            rt.agent_started()  # on its way to the queue when the callers start

            async def caller(first: int) -> None:
                for i in range(first, callers * calls, callers):
                    await rt.call_tool("ask_user", payload("a", background=True), f"c{i}")

            async with trio.open_nursery() as nursery:
                for first in range(callers):
                    nursery.start_soon(caller, first)
            stats = await rt.statistics()
    assert len(stats.pending) == callers * calls
    assert handled == [0]


def _channels_opened_by_the_askers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many channel pairs ``actors/core.py`` opens from now on."""
    import sys

    opened = [0]
    real = trio.open_memory_channel

    class Counting:
        def __getitem__(self, _item: Any) -> Counting:
            return self

        def __call__(self, size: float) -> Any:
            opened[0] += sys._getframe(1).f_code.co_filename.endswith("actors/core.py")
            return real(size)

    monkeypatch.setattr(trio, "open_memory_channel", Counting())
    return opened


@pytest.mark.parametrize("cancel", [False, True])
async def test_an_enqueue_the_queue_task_answers_waits_without_a_channel_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cancel: bool
) -> None:
    # The queue is busy (c1's write is held), so c2 waits for it to park; then c2's own write
    # would be held, so its enqueue goes to the queue task and c2 waits for the reply in an
    # ``Answer``. Shielded, c2 goes through a cancellation and gets its receipt.
    gate = WriteGate()
    with trio.fail_after(GUARD):
        async with gate.open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()
            handled = _count_enqueues_in_the_queue_task(monkeypatch)
            opened = _channels_opened_by_the_askers(monkeypatch)
            gate.hold("before")
            results: dict[str, Any] = {}

            async def call(call_id: str, scope: trio.CancelScope) -> None:
                with scope:
                    results[call_id] = await rt.call_tool(
                        "ask_user", payload("a", background=True), call_id
                    )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "c1", trio.CancelScope())
                await trio.testing.wait_all_tasks_blocked()
                assert gate.held == 1
                second = trio.CancelScope()
                nursery.start_soon(call, "c2", second)
                await trio.testing.wait_all_tasks_blocked()
                if cancel:
                    second.cancel()
                    await trio.testing.wait_all_tasks_blocked()
                assert gate.held == 1  # c2 waits for the queue to park, not in a write
                # c1's write goes on; c2's, which the queue then can take, is held again.
                gate.release()
                gate.hold("before")
                await trio.testing.wait_all_tasks_blocked()
                assert gate.held_types == ["tool-call", "tool-call"]
                assert gate.held == 1 and "c1" in results and "c2" not in results
                gate.release()
            stats = await rt.statistics()
    assert handled == [2]
    assert opened == [0]
    assert set(results) == {"c1", "c2"} and not results["c2"].get("isError")
    assert len(stats.pending) == 2


async def test_an_asker_cancelled_while_the_queue_is_busy_leaves_with_nothing_done() -> None:
    hold = trio.Event()
    journal = Journal(hold=hold)
    actor, queue_tx, queue_rx = _queue_actor(journal)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            await _busy(actor, queue_tx)
            outcome: list[Any] = []

            async def ask(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    outcome.append(await actor.ask_now(_enqueue("r1", journal), wait=True))
                outcome.append(scope.cancelled_caught)

            scope = await nursery.start(ask)
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == []
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == [True]
            hold.set()
            await trio.testing.wait_all_tasks_blocked()
            assert actor.stats().pending == ()
            handled, stats = await actor.ask_now(q.Inspect, wait=True)  # parked again
            assert handled and stats.panel_visible
            nursery.cancel_scope.cancel()


async def _busy(actor: q.QueueActor, queue_tx: trio.MemorySendChannel[Any]) -> None:
    """Make the queue task busy: a ``Show`` whose panel write waits for the journal's hold."""
    import attrs

    show_tx, _show_rx = trio.open_memory_channel[None](1)
    actor.state = attrs.evolve(actor.state, panel_visible=False)
    await queue_tx.send(q.Show(show_tx))
    await trio.testing.wait_all_tasks_blocked()
    assert not actor._parked()


@pytest.mark.parametrize("shielded", [False, True])
async def test_askers_waiting_for_a_queue_that_ends_are_told_to_send(shielded: bool) -> None:
    # The queue task ends (its nursery is cancelled) while it is busy: the askers waiting for
    # it to park go on, and find nothing done (their send then fails on the closed channel,
    # as it had failed when they were blocked in it).
    journal = Journal(hold=trio.Event())
    actor, queue_tx, queue_rx = _queue_actor(journal)
    outcome: list[Any] = []
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as outer:
            async with trio.open_nursery() as nursery:
                await nursery.start(actor.run, queue_rx, queue_tx.clone())
                await _busy(actor, queue_tx)

                async def ask() -> None:
                    outcome.append(await actor.ask_now(q.Inspect, shielded=shielded, wait=True))

                outer.start_soon(ask)
                await trio.testing.wait_all_tasks_blocked()
                assert outcome == []
                nursery.cancel_scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == [(False, None)]
            # And one that comes after the end does not wait at all.
            assert await actor.ask_now(q.Inspect, shielded=shielded, wait=True) == (False, None)
