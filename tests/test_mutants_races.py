"""The races no test through the public API can place, each set up directly in the state it
produces: a form whose inbox closed while the queue still names it visible, a queue that closes
a ``Quiesce`` reply instead of answering it, a writer revoked under its caller, an actor started
under a cancelled caller, a background form's inbox filled by key handlers that never wait.

The queue is the real ``QueueActor`` on real Trio channels (the harness of
``tests/queue_support.py``, with its fake form runner); the runtime's side is a real
``RuntimeCore`` talking to it, so ``_find_flow``, ``statistics``, ``quiesce`` and the functions
of ``hooks`` and ``remote`` run as they do in a runtime. ``docs/mutation-runtime.md`` and
``docs/mutation-queue.md`` list the mutants each test kills.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors import hooks, remote, runtime
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.core import BranchWriter, RuntimeConfig, RuntimeCore
from pi_agent_ask.actors.form import (
    FLOW_NOT_ACTIVE,
    FormInput,
    NullSurface,
    SettingsUpdate,
    UserCommand,
    close_inbox,
)
from pi_agent_ask.actors.notifications import Notify, run_notifications
from pi_agent_ask.actors.records import StaleBranch
from pi_agent_ask.form import state as fs

from .queue_support import PARAMS as _PARAMS
from .queue_support import Forms, Journal, Running, running
from .queue_support import enqueue as _enqueue

FLOW = "tool:r1"


@asynccontextmanager
async def core_of(queue: Running, events: ev.EventBus) -> AsyncIterator[RuntimeCore]:
    """A runtime's state whose queue is ``queue`` (the rest: real, unused channel ends)."""
    _wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](math.inf)
    notify_tx, _notify_rx = trio.open_memory_channel[Notify](0)
    aborts_tx, aborts_rx = trio.open_memory_channel[str](math.inf)
    activity_tx, _activity_rx = trio.open_memory_channel[q.AgentActivity](math.inf)
    notices_tx, notices_rx = trio.open_memory_channel[str](math.inf)
    async with trio.open_nursery() as nursery:
        yield RuntimeCore(
            mode="tui",
            events=events,
            config=RuntimeConfig(),
            cwd=Path.cwd(),
            settings=None,
            wakeups=wake_rx,
            nursery=nursery,
            queue_tx=queue.inbox.clone(),
            writer=BranchWriter(None),
            journal=None,
            surface=NullSurface(),
            notify_tx=notify_tx,
            opened=trio.Event(),
            aborts_tx=aborts_tx,
            aborts=aborts_rx,
            activity_tx=activity_tx,
            hook_calls=q.HookCalls(),
            notices_tx=notices_tx,
            notices=notices_rx,
        )


@asynccontextmanager
async def ended_form() -> AsyncIterator[tuple[RuntimeCore, ev.EventBus, Forms]]:
    """The visible form ``r1`` has ended (its owner closed its inbox, as every form's owner
    does) and the queue has not heard yet: it still names the flow visible and hands out its
    command channel. This is the window between the queue's lookup and the send."""
    events = ev.EventBus()
    forms = Forms()
    async with running(Journal(), forms, events=events) as queue:
        await _enqueue(queue, "r1")
        await forms.started.wait()
        close_inbox(forms.inboxes[0])
        async with core_of(queue, events) as core:
            assert (await core.statistics()).visible == FLOW
            assert await core._find_flow(FLOW) is not None
            yield core, events, forms


async def test_a_command_for_a_form_that_ended_after_the_lookup_is_not_sent() -> None:
    # hooks.send_command 7: the send fails (the inbox is closed), so the key did nothing.
    async with ended_form() as (core, _events, _forms):
        assert await hooks.send_command(core, FLOW, fs.NextOption()) is False


async def test_a_push_to_a_visible_form_that_ended_after_the_lookup_is_dropped() -> None:
    # core._tell_visible 7, 9: a settings push (or a surface failure) to a form that ended
    # meanwhile has nothing left to do; it must not raise into the settings change.
    async with ended_form() as (core, _events, _forms):
        await core._tell_visible(SettingsUpdate(fs.FormSettings()))
        await core._tell_visible(UserCommand(fs.NextOption()))


async def test_a_submission_for_a_form_that_ended_after_the_lookup_is_flow_not_found() -> None:
    # remote.handle_submit 61: the response cannot reach the form, so the submitter hears
    # flow_not_found, never ok.
    async with ended_form() as (core, events, _forms):
        results: list[Any] = []
        events.on(ev.SUBMIT_RESULT, results.append)
        payload = {
            "version": 1,
            "requestId": "s1",
            "flowId": FLOW,
            "response": {"kind": "cancel"},
        }
        await remote.handle_submit(core, payload)
        error, message = FLOW_NOT_ACTIVE
        assert results == [
            {
                "version": 1,
                "requestId": "s1",
                "flowId": FLOW,
                "ok": False,
                "error": error,
                "message": message,
            }
        ]


async def test_quiesce_returns_when_the_queue_closes_its_reply_instead_of_answering() -> None:
    # core.quiesce 6, 9: the queue cannot save the drafts (the branch was revoked under it),
    # so it closes the Quiesce reply (EndOfChannel for the caller) instead of answering.
    # Disposal and session changes go on: quiesce returns, it does not raise.
    journal = Journal()
    events = ev.EventBus()
    async with running(
        journal, Forms(), events=events, surface_ready=False, draft_delay=math.inf
    ) as queue:
        await _enqueue(queue, "r1")
        assert _PARAMS is not None
        await queue.inbox.send(q.DraftChanged("r1", 0, fs.new_form(_PARAMS)))
        journal.fail = True
        async with core_of(queue, events) as core:
            await core.quiesce()
            # The reply was closed, not answered: the draft is still unsaved.
            assert journal.entries == []
            assert queue.actor.state.dirty == {"r1"}


async def test_a_revoked_writer_names_the_entry_it_refused() -> None:
    # BranchWriter.append 1, append_many 1-3, 5, 6: the StaleBranch names the first entry of
    # the refused chain (the notice of a reopened form shows it), "" for an empty chain.
    writer = BranchWriter(journal=None, revoked=True)
    with pytest.raises(StaleBranch) as refused:
        await writer.append("ask:draft", {"requestId": "r1"})
    assert refused.value.args == ("ask:draft",)
    with pytest.raises(StaleBranch) as refused:
        await writer.append_many([("ask:request", {"requestId": "r1"}), ("ask:draft", {})])
    assert refused.value.args == ("ask:request",)
    with pytest.raises(StaleBranch) as refused:
        await writer.append_many([])
    assert refused.value.args == ("",)


async def test_an_actor_started_under_a_cancelled_caller_starts_at_once() -> None:
    # runtime._start_shielded 1, 2: without the shield, nursery.start under a cancelled caller
    # leaves the (shielded) actor in its temporary nursery and waits for it to end: forever.
    notify_tx, notify_rx = trio.open_memory_channel[Notify](0)
    actor = trio.CancelScope(shield=True)
    returned: list[bool] = []
    written: list[str] = []

    async def open_cancelled(nursery: trio.Nursery) -> None:
        with trio.CancelScope() as caller:
            caller.cancel()
            await runtime._start_shielded(
                nursery,
                actor,
                functools.partial(run_notifications, notify_rx, write_terminal=written.append),
            )
            returned.append(True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(open_cancelled, nursery)
        try:
            await trio.testing.wait_all_tasks_blocked()
            started = bool(returned)
        finally:
            actor.cancel()
    assert started, "the start waited for the actor to end"
    notify_tx.close()


async def test_a_background_forms_inbox_takes_the_key_handlers_64_unawaited_commands() -> None:
    # queue._perform_now 61: the key handlers send without waiting (send_nowait); the inbox
    # of a background form holds 64 of them, as a foreground form's (ask.py), and the next
    # is refused (the terminal drops it: "Busy").
    forms = Forms()
    async with running(Journal(), forms) as queue:
        await _enqueue(queue, "r1")
        await forms.started.wait()
        commands: trio.MemorySendChannel[FormInput] = forms.commands[0]
        taken = 0
        with pytest.raises(trio.WouldBlock):
            for _ in range(100):
                commands.send_nowait(UserCommand(fs.NextOption()))
                taken += 1
        assert taken == 64
