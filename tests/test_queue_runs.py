"""The queue shell's runs (``actors/queue.py``) on real Trio: the messages waiting when the queue
wakes are handled together, their writes to one branch writer go out as one frame, a failed
frame is retried one write at a time so only the failing transition is void, and the host's
hook calls count from the next transition on. The messages are left waiting with
``send_nowait`` on a buffered channel, as the runtime's callers leave them blocked in ``send``
while the queue is busy."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.records import Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult

from .queue_support import PARAMS, Forms, Journal, Running, enqueue, request, running


def _channel() -> tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]:
    return trio.open_memory_channel[Any](1)


def _recorded_enqueue(rid: str, writer: Journal, reply: trio.MemorySendChannel[Any]) -> q.Enqueue:
    """An enqueue whose request and tool result the queue writes through the caller's branch
    writer (``Recording``); the result names the pending count."""
    assert PARAMS is not None
    recording = q.Recording(
        (("ask:request", {"id": rid}),),
        lambda pending: ("tool-result", {"pending": pending}),
        writer,
    )
    return q.Enqueue(request(rid), fs.new_form(PARAMS), reply, recording)


def _stopped(rid: str) -> q.FormStopped:
    """``rid``'s visible form answered (its outcome journaled by the form, as the runtime's)."""
    assert PARAMS is not None
    return q.FormStopped(
        rid, 0, fs.new_form(PARAMS), Outcome(rid, result=AskResult(cancelled=False))
    )


def _hook(queue: Running, *, idle: bool) -> None:
    """The host calls ``agent_settled`` (``idle``) or ``agent_started``, as ``actors/hooks.py``
    does: the call is noted, and its message forwarded to the queue."""
    call = queue.actor.hook_calls.next(idle=idle)
    queue.inbox.send_nowait(q.AgentActivity(idle=idle, call=call))


def _no_wake(queue: Running) -> None:
    with pytest.raises(trio.WouldBlock):
        queue.wakes.receive_nowait()


def _panel(journal: Journal) -> list[bool]:
    return [data["visible"] for type_, data in journal.entries if type_ == "ask:panel"]


async def test_the_writes_of_messages_waiting_together_go_out_as_one_frame_per_writer() -> None:
    own, caller = Journal(), Journal()
    async with running(own, Forms(), buffer=math.inf, surface_ready=False) as queue:
        enqueued, deferred, shown, deferred_again = (_channel() for _ in range(4))
        queue.inbox.send_nowait(_recorded_enqueue("r1", caller, enqueued[0]))
        queue.inbox.send_nowait(q.Defer("hidden", deferred[0]))
        queue.inbox.send_nowait(q.Show(shown[0]))
        # A hook call: read before the first transition, its forwarded message skipped.
        _hook(queue, idle=True)
        queue.inbox.send_nowait(q.Defer("hidden", deferred_again[0]))
        assert await enqueued[1].receive() == 1
        for _, reply in (deferred, shown, deferred_again):
            assert await reply.receive() is None
    # The request and its result through the caller's writer; the panel's three changes,
    # in order, in one frame through the queue's own.
    assert caller.frames == [["ask:request", "tool-result"]]
    assert caller.entries[1] == ("tool-result", {"pending": 1})
    assert own.frames == [["ask:panel", "ask:panel", "ask:panel"]]
    assert _panel(own) == [False, True, False]


async def test_a_failed_frame_is_written_again_one_write_at_a_time() -> None:
    """Only the transition whose own write fails is void: the defer before it happens, and
    the messages given back are not queued again. Nothing of the failed frame counts: the
    agent stays busy, so the answer a session change brings waits for the boundary."""
    journal = Journal(fail_on="ask:returned")
    async with running(journal, Forms(), idle=False, buffer=math.inf) as queue:
        deferred, given = _channel(), _channel()
        back = {"customType": "ask:background-answer", "content": "r0"}
        queue.inbox.send_nowait(q.Defer("hidden", deferred[0]))
        queue.inbox.send_nowait(
            q.GiveBack((q.FollowUp("ask:background-answer", back, True),), given[0])
        )
        assert await deferred[1].receive() is None
        assert isinstance(await given[1].receive(), StaleBranch)
        assert PARAMS is not None
        answer = Outcome("r2", result=AskResult(cancelled=False))
        restored = q.RestoredItem(request("r2"), fs.new_form(PARAMS), answer, delivered=False)
        await queue.ask(lambda reply: q.Restore(1, (restored,), True, journal, reply))
        _no_wake(queue)
        [message] = await queue.ask(q.TurnBoundary)
        assert message["details"]["requestId"] == "r2"
    assert journal.frames == [["ask:panel"], ["ask:background-answer"]]
    assert _panel(journal) == [False]


async def test_a_run_after_a_single_failed_write_still_writes_its_changes_as_one_frame() -> None:
    own, caller = Journal(fail_on="ask:returned"), Journal()
    async with running(own, Forms(), idle=False, buffer=math.inf, surface_ready=False) as queue:
        given, enqueued, deferred, shown = (_channel() for _ in range(4))
        back = {"customType": "ask:background-answer", "content": "r0"}
        queue.inbox.send_nowait(
            q.GiveBack((q.FollowUp("ask:background-answer", back, True),), given[0])
        )
        queue.inbox.send_nowait(_recorded_enqueue("r1", caller, enqueued[0]))
        queue.inbox.send_nowait(q.Defer("hidden", deferred[0]))
        queue.inbox.send_nowait(q.Show(shown[0]))
        assert isinstance(await given[1].receive(), StaleBranch)
        assert await enqueued[1].receive() == 1
        assert await deferred[1].receive() is None
        assert await shown[1].receive() is None
    assert caller.frames == [["ask:request", "tool-result"]]
    assert own.frames == [["ask:panel", "ask:panel"]]


async def test_every_caller_hears_when_the_queue_ends_with_messages_waiting() -> None:
    # The defer's write never ends; the enqueue behind it goes through another writer (a run
    # of its own) and the inspection waits behind both. The queue is cancelled: all three
    # callers see their reply channel closed.
    own, caller = Journal(stuck=True), Journal()
    async with running(own, Forms(), buffer=math.inf, surface_ready=False) as queue:
        deferred, enqueued, inspected = _channel(), _channel(), _channel()
        queue.inbox.send_nowait(q.Defer("hidden", deferred[0]))
        queue.inbox.send_nowait(_recorded_enqueue("r1", caller, enqueued[0]))
        queue.inbox.send_nowait(q.Inspect(inspected[0]))
        await trio.testing.wait_all_tasks_blocked()
        queue.scope.cancel()
    for _, reply in (deferred, enqueued, inspected):
        with pytest.raises(trio.EndOfChannel):
            reply.receive_nowait()
    assert caller.entries == []


async def test_a_queue_handles_more_messages_than_one_batch_holds() -> None:
    async with running(Journal(), Forms(), buffer=math.inf) as queue:
        replies = [_channel() for _ in range(q.BATCH_LIMIT + 6)]
        for send, _ in replies:
            queue.inbox.send_nowait(q.Inspect(send))
        for _, reply in replies:
            assert (await reply.receive()).pending == ()


async def test_a_hook_call_counts_from_the_next_transition_even_before_its_message() -> None:
    # ``agent_started`` is called, and an answer reaches the queue before the call's own
    # message: the busy agent is not woken. ``agent_settled`` then wakes it.
    forms = Forms()
    async with running(Journal(), forms, buffer=math.inf) as queue:
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        call = queue.actor.hook_calls.next(idle=False)
        queue.inbox.send_nowait(_stopped("r1"))
        queue.inbox.send_nowait(q.AgentActivity(idle=False, call=call))
        await trio.testing.wait_all_tasks_blocked()
        _no_wake(queue)
        _hook(queue, idle=True)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.wakes.receive_nowait()["details"]["requestId"] == "r1"


async def test_a_settle_made_while_a_wake_was_written_belongs_to_that_wakes_idle_period() -> None:
    # The host starts and settles a turn while r1's wake is being written: that wake is the
    # one of the idle period the settle began, so r2's answer waits for the next settle.
    journal = Journal()
    forms = Forms()
    async with running(journal, forms, buffer=math.inf) as queue:
        for rid in ("r1", "r2"):
            await enqueue(queue, rid)
        await trio.testing.wait_all_tasks_blocked()
        journal.hold = trio.Event()
        queue.inbox.send_nowait(_stopped("r1"))
        await trio.testing.wait_all_tasks_blocked()
        _hook(queue, idle=False)
        _hook(queue, idle=True)
        journal.hold.set()
        await trio.testing.wait_all_tasks_blocked()
        assert queue.wakes.receive_nowait()["details"]["requestId"] == "r1"
        queue.inbox.send_nowait(_stopped("r2"))
        await trio.testing.wait_all_tasks_blocked()
        _no_wake(queue)
        _hook(queue, idle=False)
        _hook(queue, idle=True)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.wakes.receive_nowait()["details"]["requestId"] == "r2"
