"""Regressions found by the property suite (``test_runtime_properties.py``), one test each.

Each pins a bug the property suite found, in the queue actor or the runtime.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.abc
import trio.lowlevel
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.records import AskRequest, StaleBranch
from pi_agent_ask.actors.runtime import FORM_INTERRUPTED_TEXT
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.session_file import Entry, SessionFile, SessionFileError

from .runtime_support import (
    EventLog,
    RecordingSurface,
    WriteGate,
    answer,
    payload,
    settings_file,
    settle,
    submit,
)

GUARD = 30
"""Seconds after which a test that hangs fails instead (never reached by a passing test)."""


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path)


def branch(path: Path) -> tuple[Entry, ...]:
    with SessionFile.open(path, readonly=True) as session:
        return session.branch()


# -- fixed in the queue actor ----------------------------------------------------------------


async def test_a_foreground_call_waiting_for_the_surface_is_interrupted_by_a_reload(
    settings: Path, tmp_path: Path
) -> None:
    # Found as: [AskForeground, Reload]. The queue dropped waiting claims on Restore without
    # granting them, so the call waited for a grant forever.
    surface = RecordingSurface()
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(session=session, settings=settings, surface=surface) as rt:
            await rt.call_tool("ask_user", payload("a", background=True), "b1")
            await settle()
            assert surface.visible == "tool:b1"
            out: dict[str, Any] = {}

            async def foreground() -> None:
                out["result"] = await rt.call_tool("ask_user", payload("a"), "f1")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(foreground)
                await settle()
                await rt.change_session("reload")
            await settle()
            # The background form comes back; the foreground call belonged to the old branch.
            assert surface.visible == "tool:b1"
            assert surface.shown == ["tool:b1", "tool:b1"]
    assert out["result"] == {
        "content": [{"type": "text", "text": FORM_INTERRUPTED_TEXT}],
        "isError": True,
    }


@attrs.define(eq=False)
class _Journal:
    """A journal that records what the queue writes."""

    entries: list[tuple[str, Any]] = attrs.field(factory=list)

    async def append(self, type_: str, data: Any) -> None:
        self.entries.append((type_, data))
        await trio.lowlevel.checkpoint()

    async def append_many(self, entries: Any) -> None:
        self.entries.extend(entries)
        await trio.lowlevel.checkpoint()


def _bare_queue(wake_tx: trio.MemorySendChannel[dict[str, Any]]) -> q.QueueActor:
    """A queue actor alone: no forms are ever shown."""

    async def no_forms(*_args: Any) -> None:
        raise AssertionError("no form is shown")

    return q.QueueActor(
        journal=_Journal(),
        events=ev.EventBus(),
        wakeups=wake_tx,
        run_background_form=no_forms,
    )


@attrs.frozen
class _RunningQueue:
    """A running queue actor: its inbox, the wakes it sent, and the scope that ends it."""

    inbox: trio.MemorySendChannel[q.QueueMessage]
    wakes: trio.MemoryReceiveChannel[dict[str, Any]]
    scope: trio.CancelScope

    async def restore(
        self, epoch: int, journal: Any, follow_ups: tuple[q.FollowUp, ...] = ()
    ) -> None:
        """A session change's Restore onto ``journal``, waited for."""
        reply_tx, reply_rx = trio.open_memory_channel[None](1)
        await self.inbox.send(q.Restore(epoch, (), True, journal, reply_tx, follow_ups=follow_ups))
        await reply_rx.receive()

    async def boundary(self) -> list[dict[str, Any]]:
        reply_tx, reply_rx = trio.open_memory_channel[list[dict[str, Any]]](1)
        await self.inbox.send(q.TurnBoundary(reply_tx))
        return await reply_rx.receive()


@asynccontextmanager
async def running_queue() -> AsyncIterator[_RunningQueue]:
    """A queue actor alone (``_bare_queue``), running until the block ends or its scope is
    cancelled; a test that hangs fails after ``GUARD`` seconds."""
    wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
    queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)
    actor = _bare_queue(wake_tx)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            yield _RunningQueue(queue_tx, wake_rx, nursery.cancel_scope)
            nursery.cancel_scope.cancel()


async def test_a_restore_never_overfills_the_reply_of_an_answered_wait() -> None:
    # A wait answered at once (empty queue) whose waiter has not read its reply yet, then a
    # session change: the queue sent a second reply into the one-slot channel and died with
    # WouldBlock. The waiter keeps its answer; nothing else is sent.
    async with running_queue() as queue:
        wait_tx, wait_rx = trio.open_memory_channel[q.WaitEnd](1)
        await queue.inbox.send(q.StartWait(1, wait_tx))
        await queue.restore(1, _Journal())
        assert wait_rx.receive_nowait() == q.WaitEnd("complete")
        with pytest.raises(trio.WouldBlock):
            wait_rx.receive_nowait()
        stats = await _inspect(queue.inbox)
        assert (stats.epoch, stats.waiting, stats.herdr_owners) == (1, False, frozenset())


async def _inspect(queue_tx: trio.MemorySendChannel[q.QueueMessage]) -> q.QueueStats:
    reply_tx, reply_rx = trio.open_memory_channel[q.QueueStats](1)
    await queue_tx.send(q.Inspect(reply_tx))
    return await reply_rx.receive()


# -- fixed in actors/runtime.py --------------------------------------------------------------


async def test_a_call_overlapping_a_reload_returns_a_result(settings: Path, tmp_path: Path) -> None:
    # Found as: [AskForeground, Reload] (the call raised StaleBranch('ask:payload')).
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            for index in range(5):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(rt.change_session, "reload")
                    # Every other task is blocked: the reload is reading the file in its worker
                    # thread, so the journal of the old branch is already revoked.
                    await settle()
                    result = await rt.call_tool(
                        "ask_user", payload("a", background=True), f"c{index}"
                    )
                    assert isinstance(result, dict)


class _CancelOnceJournaled(trio.abc.Instrument):
    """Cancels ``scope`` right after an entry of ``entry_type`` reached the session file."""

    def __init__(self, path: Path, scope: trio.CancelScope, entry_type: str) -> None:
        self.path = path
        self.scope = scope
        self.entry_type = entry_type

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.scope.cancel_called and any(
            entry.type == self.entry_type for entry in branch(self.path)
        ):
            self.scope.cancel()


async def test_a_call_aborted_after_its_request_was_journaled_records_an_outcome(
    settings: Path, tmp_path: Path
) -> None:
    # Found as: [StartWait, CancelVisible, StartWait, AskForeground, Defer, CancelForeground].
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            scope = trio.CancelScope()
            instrument = _CancelOnceJournaled(session, scope, "ask:history-request")
            trio.lowlevel.add_instrument(instrument)
            try:
                with scope:
                    await rt.call_tool("ask_user", payload("a"), "f1")
            finally:
                trio.lowlevel.remove_instrument(instrument)
            assert scope.cancelled_caught
    entries = branch(session)
    [request] = [e.data for e in entries if e.type == "ask:history-request"]
    completions = [e.data for e in entries if e.type == "ask:history-completed"]
    assert [c["requestId"] for c in completions] == [request["requestId"]]
    assert completions[0]["result"]["cancelled"] is True


async def test_a_wait_result_is_never_delivered_again_after_a_reload(
    settings: Path, tmp_path: Path
) -> None:
    # Found as: [AskBackground, AskBackground, AnswerVisible, AnswerVisible, StartWait, Reload].
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            rt.agent_started()
            for index in range(3):
                receipt = await rt.call_tool("ask_user", payload("a", background=True), f"c{index}")
                await settle()
                submit(rt.events, f"tool:c{index}", answer({"a": ["a1"]}))
                await settle()
                out: dict[str, Any] = {}

                async def wait(out: dict[str, Any] = out, index: int = index) -> None:
                    out["wait"] = await rt.call_tool("wait_for_answers", {}, f"w{index}")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wait)
                    await rt.change_session("reload")
                details = out["wait"].get("details") or {"results": []}
                delivered = [item["requestId"] for item in details["results"]]
                delivered += [m["details"]["requestId"] for m in await rt.turn_boundary()]
                assert delivered == [receipt["details"]["requestId"]]


async def test_agent_hooks_take_effect_in_call_order(settings: Path) -> None:
    # Found as: [AskBackground, CancelVisible, AskBackground, AskBackground, AgentBusy,
    # AgentIdle]: the last answer never woke the idle agent.
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
            for index in range(20):
                rt.agent_started()
                rt.agent_settled()
                await settle()
                # The agent is idle now: a finished form must wake it.
                await rt.call_tool("ask_user", payload("a", background=True), f"c{index}")
                await settle()
                submit(rt.events, f"tool:c{index}", answer({"a": ["a1"]}))
                await settle()
                wake = rt.wakeups.receive_nowait()
                assert wake["details"]["result"]["answers"]["a"]["values"] == ["a1"]


async def test_a_wait_that_ends_once_the_agent_started_does_not_wake_it(
    settings: Path, tmp_path: Path
) -> None:
    # Found as: [AskBackground, StartWait, Elapse, AskBackground, AnswerVisible, AgentBusy],
    # then the wait aborted in the same tick as ``agent_started``. The hook reaches the queue
    # through a forwarding task, and the aborted wait's EndWait, when the scheduler ran it
    # first, overtook it: the queue still took the agent for idle and woke it with the answer
    # the wait had held. Here the queue is busy with a write when the abort and then the hook
    # come, so the EndWait reaches it first every time.
    gate = WriteGate()
    with trio.fail_after(GUARD):
        async with (
            gate.open_runtime(
                session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
            ) as rt,
            trio.open_nursery() as nursery,
        ):
            for call_id in ("b1", "b2"):
                await rt.call_tool("ask_user", payload("a", background=True), call_id)
            wait = trio.CancelScope()

            async def waiting() -> None:
                with wait:
                    await rt.call_tool("wait_for_answers", {}, "w1")

            nursery.start_soon(waiting)
            await settle()
            submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
            await settle()  # the answer is the wait's, which waits for b2 still
            gate.hold("before")
            nursery.start_soon(rt.call_tool, "ask_user", payload("a", background=True), "b3")
            await settle()
            assert gate.held_types == ["tool-call"]  # the queue writes b3's request
            wait.cancel()
            await settle()
            rt.agent_started()
            await settle()
            gate.release()
            await settle()
            with pytest.raises(trio.WouldBlock):
                rt.wakeups.receive_nowait()
            [message] = await rt.turn_boundary()
            assert message["details"]["result"]["answers"]["a"]["values"] == ["a1"]
            nursery.cancel_scope.cancel()


async def test_herdr_is_released_when_the_session_reloads(settings: Path, tmp_path: Path) -> None:
    # A guard for the queue's restore path: everything the old branch held is released once,
    # then the rebuilt panel takes Herdr again.
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        await rt.change_session("reload")
        await settle()
        assert log.herdr() == [True, False, True]
        stats = await rt.statistics()
        assert stats.herdr_owners == frozenset({"panel"})


async def test_restored_follow_ups_go_out_once(settings: Path) -> None:
    # The queue side of recovered answers surviving a session change: follow-ups handed over
    # by ``Restore`` are sent like new ones (a wake while idle), journaled once.
    journal = _Journal()
    message = {"customType": "ask:resume-answer", "content": "Q1: Yes", "details": {}}
    async with running_queue() as queue:
        follow_up = q.FollowUp("ask:resume-answer", message, wake=True)
        await queue.restore(1, journal, (follow_up,))
        assert queue.wakes.receive_nowait() == message
        assert await queue.boundary() == []
    assert journal.entries == [("ask:resume-answer", message)]


async def test_a_recovered_answer_survives_a_reload_before_delivery(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with (
            open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(rt.call_tool, "ask_user", payload("a"), "f1")
            await settle()
            # The reload interrupts the call: no outcome, no tool result on the branch.
            await rt.change_session("reload")
        surface = RecordingSurface()
        async with open_runtime(session=session, settings=settings, surface=surface) as rt:
            rt.agent_started()
            await settle()
            assert surface.visible == "tool:f1"  # recovered on startup
            submit(rt.events, "tool:f1", answer({"a": ["a2"]}))
            await settle()
            await rt.change_session("reload")
            messages = await rt.turn_boundary()
    assert [m["customType"] for m in messages] == ["ask:resume-answer"]
    assert messages[0]["details"]["result"]["answers"]["a"]["values"] == ["a2"]


async def test_a_queue_waiting_for_its_surface_shows_nothing_until_it_is_ready() -> None:
    # The queue side of "handlers registered at the top of the block see every event": a
    # recovered form is neither shown nor holds Herdr before SurfaceReady.
    events = ev.EventBus()
    log = EventLog()
    log.attach(events)
    shown: list[str] = []
    wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
    queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)

    async def show(request: AskRequest, _form: Any, _epoch: int, scope: Any, *_args: Any) -> None:
        # A form runs in its scope: the queue's end reaches it through the scope alone.
        shown.append(request.request_id)
        with scope:
            await trio.sleep_forever()

    actor = q.QueueActor(
        journal=_Journal(),
        events=events,
        wakeups=wake_tx,
        run_background_form=show,
        surface_ready=False,
    )
    params = validate_ask_params(payload("a", background=True)).params
    assert params is not None
    request = AskRequest("r1", params, background=True, created_at="2026-01-01T00:00:00Z")
    item = q.RestoredItem(request, fs.new_form(params), outcome=None, delivered=False)
    with trio.fail_after(GUARD), wake_rx:
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            restored_tx, restored_rx = trio.open_memory_channel[None](1)
            await queue_tx.send(q.Restore(1, (item,), True, _Journal(), restored_tx))
            await restored_rx.receive()
            await settle()
            assert (shown, log.herdr(), (await _inspect(queue_tx)).visible) == ([], [], None)
            await queue_tx.send(q.SurfaceReady())
            await settle()
            assert (shown, log.herdr()) == (["r1"], [True])
            nursery.cancel_scope.cancel()


async def test_handlers_at_the_top_of_the_block_see_herdr_of_recovered_forms(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await settle()
        assert (await rt.statistics()).herdr_owners == frozenset({"panel"})
        assert log.herdr() == [True]


# -- a delivery mark on the branch means the message went out ---------------------------------


@attrs.define(eq=False)
class _SlowJournal:
    """A journal whose writes reach the file at once but whose acknowledgement waits for
    ``acknowledge``: the moment a cancellation can fall between the two."""

    acknowledge: trio.Event = attrs.field(factory=trio.Event)
    written: trio.Event = attrs.field(factory=trio.Event)
    entries: list[tuple[str, Any]] = attrs.field(factory=list)

    async def append(self, type_: str, data: Any) -> None:
        await self.append_many([(type_, data)])

    async def append_many(self, entries: Any) -> None:
        self.entries.extend(entries)
        self.written.set()
        await self.acknowledge.wait()


async def test_a_wake_marked_delivered_goes_out_even_when_disposal_cancels_the_write() -> None:
    # Found as: [AgentBusy, StartWait, AskBackground, AnswerVisible, AgentBusy, CancelVisible,
    # AgentIdle] then disposal. The queue was cancelled while journaling the wake's delivery
    # mark: the mark reached the file, the wake never reached the host, and the rebuild
    # trusted the mark. The answer was lost.
    journal = _SlowJournal()
    message = {"customType": "ask:resume-answer", "content": "Q1: Yes", "details": {}}
    follow_up = q.FollowUp("ask:resume-answer", message, wake=True)
    restored_tx, _restored_rx = trio.open_memory_channel[None](1)
    async with running_queue() as queue:
        # Idle: the restored follow-up wakes the agent; its mark is being written.
        await queue.inbox.send(
            q.Restore(1, (), True, journal, restored_tx, follow_ups=(follow_up,))
        )
        await journal.written.wait()
        queue.scope.cancel()  # disposal, while the write is unacknowledged
        journal.acknowledge.set()
    assert journal.entries == [("ask:resume-answer", message)]
    assert queue.wakes.receive_nowait() == message


async def test_a_boundary_cancelled_after_marking_still_returns_its_messages(
    settings: Path, tmp_path: Path
) -> None:
    # The host's turn_boundary call cancelled once the queue had journaled the delivery marks:
    # the reply was dropped, the messages were marked delivered and lost.
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            rt.agent_started()  # busy: the answer waits for the boundary
            receipt = await rt.call_tool("ask_user", payload("a", background=True), "b1")
            await settle()
            submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
            await settle()
            scope = trio.CancelScope()
            instrument = _CancelOnceJournaled(session, scope, "ask:background-answer")
            messages: list[dict[str, Any]] | None = None
            trio.lowlevel.add_instrument(instrument)
            try:
                with scope:
                    messages = await rt.turn_boundary()
            finally:
                trio.lowlevel.remove_instrument(instrument)
            assert scope.cancel_called
    assert messages is not None, "the boundary's messages were marked delivered, then dropped"
    assert [m["details"]["requestId"] for m in messages] == [receipt["details"]["requestId"]]


# -- the queue outlives callers that left and writes that cannot be recorded -------------------


class _RevokedJournal:
    """The journal view of a branch revoked by a session change: every write is refused."""

    async def append(self, type_: str, data: Any) -> None:
        raise StaleBranch(type_)

    async def append_many(self, entries: Any) -> None:
        raise StaleBranch(entries[0][0])


async def test_a_boundary_in_the_revoked_window_delivers_nothing_and_the_queue_lives() -> None:
    # Found in review: a TurnBoundary handled between the revocation of the old branch and the
    # Restore of the new one raised StaleBranch out of the queue actor (the runtime died), and
    # the boundary's caller, waiting under a shield, waited forever.
    message = {"customType": "ask:resume-answer", "content": "Q1: Yes", "details": {}}
    follow_up = q.FollowUp("ask:resume-answer", message, wake=False)
    async with running_queue() as queue:
        await queue.restore(1, _RevokedJournal(), (follow_up,))
        assert await queue.boundary() == []  # nothing recorded, nothing delivered
        stats = await _inspect(queue.inbox)  # the queue is still there
        assert stats.epoch == 1
        # The next branch's Restore hands the follow-up over again; it goes out once.
        journal = _Journal()
        await queue.restore(2, journal, (follow_up,))
        assert await queue.boundary() == [message]
        assert journal.entries == [("ask:resume-answer", message)]


async def test_a_caller_that_left_before_its_reply_does_not_end_the_queue() -> None:
    # Found in review: a host call cancelled after its request reached the queue (statistics()
    # during a shutdown, say) closed its reply channel; the queue's reply raised
    # BrokenResourceError and the queue actor died with it.
    async with running_queue() as queue:
        gone_tx, gone_rx = trio.open_memory_channel[q.QueueStats](1)
        gone_rx.close()
        await queue.inbox.send(q.Inspect(gone_tx))
        defer_tx, defer_rx = trio.open_memory_channel[None](1)
        defer_rx.close()
        await queue.inbox.send(q.Defer("hidden", defer_tx))
        stats = await _inspect(queue.inbox)
        assert stats.panel_visible is False


# -- a session change that does not finish leaves a working runtime ---------------------------


async def test_resuming_a_file_that_is_not_a_session_keeps_the_runtime_writing(
    settings: Path, tmp_path: Path
) -> None:
    # Found in review: the old branch's writer was revoked before the switch, and a switch that
    # raised (or was cancelled) never replaced it: every later write was refused as stale.
    session = tmp_path / "s.pas"
    not_a_session = tmp_path / "notes.txt"
    not_a_session.write_text("these are notes\n")
    surface = RecordingSurface()
    with trio.fail_after(GUARD):
        async with open_runtime(session=session, settings=settings, surface=surface) as rt:
            first = await rt.call_tool("ask_user", payload("a", background=True), "b1")
            await settle()
            with pytest.raises(SessionFileError):
                await rt.change_session("resume", not_a_session)
            await settle()
            assert surface.visible == "tool:b1"  # the queue came back on the same branch
            second = await rt.call_tool("ask_user", payload("a", background=True), "b2")
            assert second.get("isError") is not True, second
            submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
            await settle()
            answered = first["details"]["requestId"]
            stats = await rt.statistics(params_of=(answered,))
            assert stats.completed == 1 and answered in dict(stats.params)
            assert stats.pending == (second["details"]["requestId"],)
    assert not_a_session.read_text() == "these are notes\n"
    types = [e.type for e in branch(session)]
    assert types.count("ask:queued") == 2 and "ask:history-completed" in types
