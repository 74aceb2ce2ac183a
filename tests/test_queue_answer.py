"""The reply of a message for the queue (``queue.Answer``) keeps the promise of the one-shot
reply channel it stands for: every scenario below runs on both, with real Trio scheduling, and
the asker and the queue see the same things (values, errors, cancellations, passes through the
scheduler). And a question the queue task must answer (a busy queue) makes no channel pair."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime

from .runtime_support import payload, settings_file

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


async def test_a_busy_queue_is_asked_once_and_answers_without_a_channel_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sixteen callers at once keep the queue busy (a message is on its way to it whenever a
    # caller asks), so their enqueues go to the queue task: each asks whether the queue is
    # parked once, and waits for its reply in an ``Answer``, not in a channel pair of its own.
    callers, calls = 16, 4
    parked_checks = 0
    channels = 0
    real_parked = q.QueueActor._parked
    real_channel = trio.open_memory_channel

    def parked(self: q.QueueActor) -> bool:
        nonlocal parked_checks
        parked_checks += 1
        return real_parked(self)

    class Counting:
        def __getitem__(self, _item: Any) -> Counting:
            return self

        def __call__(self, size: float) -> Any:
            nonlocal channels
            channels += 1
            return real_channel(size)

    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()  # on its way to the queue when the callers start
            monkeypatch.setattr(q.QueueActor, "_parked", parked)
            monkeypatch.setattr(trio, "open_memory_channel", Counting())
            to_queue_task = 0
            real_handle = q.QueueActor._handle

            async def handle(self: q.QueueActor, message: Any) -> None:
                nonlocal to_queue_task
                to_queue_task += isinstance(message, q.Enqueue)
                await real_handle(self, message)

            monkeypatch.setattr(q.QueueActor, "_handle", handle)

            async def caller(first: int) -> None:
                for i in range(first, callers * calls, callers):
                    await rt.call_tool("ask_user", payload("a", background=True), f"c{i}")

            async with trio.open_nursery() as nursery:
                for first in range(callers):
                    nursery.start_soon(caller, first)
            monkeypatch.undo()
            assert len((await rt.statistics()).pending) == callers * calls
    assert to_queue_task > callers  # the queue was busy for most of them
    assert parked_checks == callers * calls
    # Forms shown (the first one, once the panel opens) make their inbox; no enqueue does.
    assert channels <= 1
