"""The queue's I/O shell (``actors/queue.py``) on real Trio: it performs the reducer's effects in
order, goes on with the transitions a failed write continues into, and never leaves a caller
waiting when the queue ends. A fake form runner stands in for the runtime's background form."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.form import FormInput, UserCommand
from pi_agent_ask.actors.records import Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult

from .queue_support import (
    PARAMS,
    Forms,
    Journal,
    Running,
    completed_ids,
    delivered_ids,
    enqueue,
    request,
    running,
)


@pytest.mark.parametrize("fail", [False, True])
async def test_quiesce_answers_when_the_closing_form_ends_with_an_answer(fail: bool) -> None:
    # The visible form is answered just as Quiesce cancels it: FormStopped carries an outcome,
    # the idle agent's wake is tried (its mark write fails when the branch is revoked), and the
    # draft save that answers Quiesce still runs after it.
    journal = Journal()
    forms = Forms()
    async with running(journal, forms) as queue:
        await enqueue(queue, "r1")
        await forms.started.wait()
        [(rid, scope)] = forms.shown
        quiesce_tx, quiesce_rx = trio.open_memory_channel[None](1)
        await queue.inbox.send(q.Quiesce(quiesce_tx))
        await trio.testing.wait_all_tasks_blocked()
        assert scope.cancel_called
        journal.fail = fail
        outcome = Outcome(rid, result=AskResult(cancelled=False))
        await queue.inbox.send(q.FormStopped(rid, 0, fs.new_form(PARAMS), outcome))
        await quiesce_rx.receive()  # answered once the form's stop is committed
        stats = queue.actor.stats()
        assert completed_ids(queue.actor.state) == ("r1",) and stats.completed == 1
        assert delivered_ids(queue.actor.state) == (() if fail else ("r1",))
        assert stats.delivered == (0 if fail else 1)
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
        form = fs.new_form(PARAMS)
        await queue.ask(lambda reply: q.Enqueue(request("r1"), form, reply))
        await trio.testing.wait_all_tasks_blocked()
        assert [rid for rid, _ in forms.shown] == ["r1"]
        assert forms.forms == [form]  # the form it was given (its draft, say)
    waiting = Forms()
    async with running(Journal(), waiting, surface_ready=False) as queue:
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        assert waiting.shown == []
        await queue.inbox.send(q.SurfaceReady())
        await waiting.started.wait()


async def test_a_queue_without_a_terminal_shows_nothing_and_delivers_nothing() -> None:
    forms = Forms()
    async with running(Journal(), forms, tui=False) as queue:
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        assert forms.shown == []
        assert await queue.ask(q.TurnBoundary) == []
        assert queue.actor.stats().herdr_owners == frozenset()


_ANSWER = Outcome("r1", result=AskResult(cancelled=False))


async def _answered(queue: Running, forms: Forms) -> None:
    """r1 enqueued, shown, and answered (its outcome journaled by the form, as the runtime's)."""
    await enqueue(queue, "r1")
    await forms.started.wait()
    await queue.inbox.send(q.FormStopped("r1", 0, fs.new_form(PARAMS), _ANSWER))


async def test_a_boundary_whose_mark_write_fails_gets_nothing_and_the_answer_waits() -> None:
    journal = Journal()
    forms = Forms()
    async with running(journal, forms, idle=False) as queue:
        await _answered(queue, forms)
        journal.fail = True
        reply_tx, reply_rx = trio.open_memory_channel[Any](1)
        await queue.inbox.send(q.TurnBoundary(reply_tx))
        assert await reply_rx.receive() == []
        with pytest.raises(trio.EndOfChannel):
            await reply_rx.receive()
        journal.fail = False
        [message] = await queue.ask(q.TurnBoundary)
        assert message["details"]["requestId"] == "r1"
        assert [type_ for type_, _ in journal.entries] == ["ask:background-answer"]


async def test_the_person_hears_of_the_first_disk_failure_of_each_run_of_failures() -> None:
    journal = Journal()
    forms = Forms()
    notices: list[str] = []
    disk = OSError(5, "disk")
    expected = q.WRITE_FAILED_TEXT.format(error=disk)

    async def defer() -> None:
        # Nothing is put back when the write fails, and the caller hears why.
        said = await queue.ask(lambda reply: q.Defer("hidden", reply))
        assert said == (
            None
            if journal.error is None
            else qs.DEFER_NOT_RECORDED_TEXT.format(error=journal.error)
        )

    async def show() -> None:
        assert await queue.ask(q.Show) is None

    async with running(journal, forms, idle=False, notice=notices.append) as queue:
        await _answered(queue, forms)
        journal.error = StaleBranch("revoked")  # not the disk: no notice
        await defer()
        assert notices == []
        journal.error = disk
        await defer()
        await defer()
        assert notices == [expected]
        journal.error = None
        await defer()  # an Append that succeeds ends the run of failures
        journal.error = disk
        await show()
        assert notices == [expected, expected]
        journal.error = None
        assert len(await queue.ask(q.TurnBoundary)) == 1  # so does a delivery mark
        journal.error = disk
        await show()
        assert notices == [expected, expected, expected]
        assert "[Errno 5] disk" in expected


async def test_a_delivery_mark_in_flight_when_the_queue_ends_is_written_and_handed_out() -> None:
    # The mark's write is shielded: disposal cancelling the queue mid-write neither loses
    # the mark nor leaves a mark for a message that never went out.
    journal = Journal()
    forms = Forms()
    reply_tx, reply_rx = trio.open_memory_channel[Any](1)
    hold = trio.Event()

    async def release() -> None:
        await trio.testing.wait_all_tasks_blocked()
        hold.set()

    async with trio.open_nursery() as outer, running(journal, forms, idle=False) as queue:
        await _answered(queue, forms)
        journal.hold = hold
        await queue.inbox.send(q.TurnBoundary(reply_tx))
        await trio.testing.wait_all_tasks_blocked()
        assert journal.entries == []
        outer.start_soon(release)
        queue.scope.cancel()
    assert [type_ for type_, _ in journal.entries] == ["ask:background-answer"]
    [message] = reply_rx.receive_nowait()
    assert message["details"]["requestId"] == "r1"


async def test_a_caller_that_left_before_its_reply_does_not_end_the_queue() -> None:
    async with running(Journal(), Forms()) as queue:
        reply_tx, reply_rx = trio.open_memory_channel[None](1)
        reply_rx.close()
        await queue.inbox.send(q.Show(reply_tx))
        stats = await queue.ask(q.Inspect)
        assert stats.panel_visible


async def test_find_flow_hands_out_the_visible_forms_command_channel() -> None:
    forms = Forms()
    async with running(Journal(), forms) as queue:
        await enqueue(queue, "r1")
        await forms.started.wait()
        assert forms.epochs == [0]
        commands = await queue.ask(lambda reply: q.FindFlow("tool:r1", reply))
        assert commands is not None
        key = UserCommand(fs.Number(1))
        commands.send_nowait(key)
        assert forms.inboxes[0].receive_nowait() is key
        assert await queue.ask(lambda reply: q.FindFlow("tool:r2", reply)) is None
        # The form itself got the send side of its inbox (its key handlers send through it).
        forms.commands[0].send_nowait(key)
        assert forms.inboxes[0].receive_nowait() is key


async def test_a_restore_cancels_the_granted_foreground_claim() -> None:
    journal = Journal()
    async with running(journal, Forms()) as queue:
        scope = trio.CancelScope()
        commands_tx, _commands_rx = trio.open_memory_channel[FormInput](1)
        grant = await queue.ask(
            lambda reply: q.AcquireSurface(1, "fg:1", commands_tx, scope, reply)
        )
        assert grant == q.Grant(1, 0)
        await queue.ask(lambda reply: q.Restore(1, (), True, journal, reply))
        assert scope.cancel_called


async def test_herdr_hears_when_the_first_owner_comes_and_the_last_one_goes() -> None:
    bus = ev.EventBus()
    heard: list[Any] = []
    bus.on(ev.HERDR_BLOCKED, heard.append)
    forms = Forms()
    async with running(Journal(), forms, idle=False, events=bus) as queue:
        await enqueue(queue, "r1")
        await forms.started.wait()
        assert heard == [{"active": True, "label": "Waiting for user response"}]
        await queue.inbox.send(q.FormStopped("r1", 0, fs.new_form(PARAMS), _ANSWER))
        assert (await queue.ask(q.Inspect)).herdr_owners == frozenset()
        assert heard == [
            {"active": True, "label": "Waiting for user response"},
            {"active": False},
        ]


async def test_a_changed_draft_is_written_once_the_draft_delay_runs_out(
    mock_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    forms = Forms()
    async with running(journal, forms, draft_delay=0.25) as queue:
        await enqueue(queue, "r1")
        await forms.started.wait()
        await queue.inbox.send(q.DraftChanged("r1", 0, fs.new_form(PARAMS)))
        await trio.testing.wait_all_tasks_blocked()
        assert journal.entries == []  # within the delay
        mock_clock.jump(0.25)
        await trio.testing.wait_all_tasks_blocked()
        assert [type_ for type_, _ in journal.entries] == ["ask:draft"]


async def test_an_idle_wake_that_failed_on_the_disk_goes_out_when_the_retry_timer_ends(
    mock_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    forms = Forms()
    async with running(journal, forms) as queue:
        await enqueue(queue, "r1")
        await forms.started.wait()
        journal.error = OSError(5, "disk")
        await queue.inbox.send(q.FormStopped("r1", 0, fs.new_form(PARAMS), _ANSWER))
        await trio.testing.wait_all_tasks_blocked()
        journal.error = None
        with pytest.raises(trio.WouldBlock):
            queue.wakes.receive_nowait()
        mock_clock.jump(qs.WAKE_RETRY_FIRST)
        await trio.testing.wait_all_tasks_blocked()
        wake = queue.wakes.receive_nowait()
        assert wake["details"]["requestId"] == "r1"
        assert [type_ for type_, _ in journal.entries] == ["ask:background-answer"]
        assert not queue.actor.state.wake_retry_armed


async def test_a_settle_the_hooks_did_not_number_starts_a_period_that_may_wake() -> None:
    """Only a numbered hook call (``HookCalls``) can say a wake came after it: an activity
    message without a number after a wake starts an idle period of its own."""
    forms = Forms()
    async with running(Journal(), forms) as queue:
        for rid in ("r1", "r2"):
            await enqueue(queue, rid)
        await forms.started.wait()
        await queue.inbox.send(q.FormStopped("r1", 0, fs.new_form(PARAMS), _ANSWER))
        await trio.testing.wait_all_tasks_blocked()
        assert queue.wakes.receive_nowait()["details"]["requestId"] == "r1"
        await queue.inbox.send(q.AgentActivity(idle=True))
        await trio.testing.wait_all_tasks_blocked()
        second = Outcome("r2", result=AskResult(cancelled=False))
        await queue.inbox.send(q.FormStopped("r2", 0, fs.new_form(PARAMS), second))
        await trio.testing.wait_all_tasks_blocked()
        assert queue.wakes.receive_nowait()["details"]["requestId"] == "r2"


async def test_a_form_cut_short_by_the_queues_end_still_finishes() -> None:
    """The form runner is shielded: the queue's end cancels the visible form through its own
    scope, and what the form does once that scope has ended (writing its outcome, telling the
    queue) is not cut off."""
    forms = Forms(hold=True)
    async with running(Journal(), forms) as queue:
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        queue.scope.cancel()
    assert forms.finished == ["r1"]


async def test_the_command_channel_of_a_visible_flow_is_found_without_a_round_trip() -> None:
    forms = Forms()
    async with running(Journal(), forms) as queue:
        assert queue.actor.flow_commands("tool:r1") is None
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        assert queue.actor.flow_commands("tool:r1") is forms.commands[0]
        assert queue.actor.flow_commands("tool:r2") is None
    async with running(Journal(), Forms()) as queue:
        commands_tx, commands_rx = trio.open_memory_channel[FormInput](1)
        await queue.ask(
            lambda reply: q.AcquireSurface(1, "fg:1", commands_tx, trio.CancelScope(), reply)
        )
        assert queue.actor.flow_commands("fg:1") is commands_tx
        # FindFlow hands out a clone of the foreground form's own channel.
        found = await queue.ask(lambda reply: q.FindFlow("fg:1", reply))
        key = UserCommand(fs.Number(1))
        found.send_nowait(key)
        assert commands_rx.receive_nowait() is key


async def test_a_draft_write_that_failed_on_the_disk_is_written_when_its_retry_timer_ends(
    mock_clock: trio.testing.MockClock,
) -> None:
    journal = Journal()
    forms = Forms()
    async with running(journal, forms, draft_delay=0.25) as queue:
        await enqueue(queue, "r1")
        await trio.testing.wait_all_tasks_blocked()
        await queue.inbox.send(q.DraftChanged("r1", 0, fs.new_form(PARAMS)))
        await trio.testing.wait_all_tasks_blocked()
        journal.error = OSError(5, "disk")
        mock_clock.jump(0.25)
        await trio.testing.wait_all_tasks_blocked()
        journal.error = None
        assert journal.entries == []
        mock_clock.jump(qs.DRAFT_RETRY_FIRST)
        await trio.testing.wait_all_tasks_blocked()
        assert [type_ for type_, _ in journal.entries] == ["ask:draft"]


async def test_after_a_restore_the_queue_writes_through_the_new_branch_writer() -> None:
    """``Restore`` names the new branch's writer: the writes after it go there, both in the
    same batch of messages and later."""
    old, new = Journal(), Journal()
    async with running(old, Forms(), buffer=math.inf) as queue:
        restored_tx, restored_rx = trio.open_memory_channel[Any](1)
        deferred_tx, deferred_rx = trio.open_memory_channel[Any](1)
        queue.inbox.send_nowait(q.Restore(1, (), True, new, restored_tx))
        queue.inbox.send_nowait(q.Defer("hidden", deferred_tx))
        assert await restored_rx.receive() is None
        assert await deferred_rx.receive() is None
        assert await queue.ask(q.Show) is None
    assert old.entries == []
    assert new.frames == [["ask:panel"], ["ask:panel"]]
    assert [data["visible"] for _, data in new.entries] == [False, True]


async def _shown_when_the_claim_hid() -> list[str]:
    """A granted foreground claim, then a session change to a branch with a pending request:
    what the form runner had shown when the claim's form ended."""
    journal, forms = Journal(), Forms()
    seen: list[str] = []

    async def foreground(scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep_forever()
        seen.extend(rid for rid, _ in forms.shown)

    async with running(journal, forms) as queue, trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        commands_tx, _commands_rx = trio.open_memory_channel[FormInput](1)
        await queue.ask(lambda reply: q.AcquireSurface(1, "fg:1", commands_tx, scope, reply))
        nursery.start_soon(foreground, scope)
        await trio.testing.wait_all_tasks_blocked()
        pending = q.RestoredItem(request("r2"), fs.new_form(PARAMS), None, delivered=False)
        await queue.ask(lambda reply: q.Restore(1, (pending,), True, journal, reply))
        await forms.started.wait()
    return seen


async def test_a_claim_cancelled_by_a_session_change_hides_before_the_next_form_shows() -> None:
    """A session change cancels the granted foreground claim and shows the new branch's
    pending request in one transition: the claim's form ends first (the form runner passes
    through the scheduler before each form). Trio runs a batch of ready tasks in either
    order, so the change is made several times."""
    for _ in range(8):
        assert await _shown_when_the_claim_hid() == []
