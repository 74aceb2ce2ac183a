"""Write faults and outer cancellation at the runtime's edges (the gated journal).

A call's own write that fails is a tool error; a disk failure (``OSError``) behind the
boundary (a background answer's write, the queue's own writes) leaves the runtime running
with nothing lost; an outer cancellation of the runtime still saves the latest drafts. The
property suite (``test_runtime_properties.py``) generates these cases too.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import trio
import trio.testing

from pi_agent_ask import open_runtime
from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.persistence import WriteRefused
from pi_agent_ask.form import state as fs

from .runtime_support import (
    InjectedDiskError,
    RecordingSurface,
    WriteGate,
    answer,
    branch_types,
    payload,
    settings_file,
    submit,
)


@pytest.mark.parametrize(
    "error",
    [WriteRefused("tool-call", ValueError("refused")), InjectedDiskError(errno.EIO, "disk")],
    ids=["refused", "disk"],
)
async def test_a_call_whose_first_write_fails_is_a_tool_error_and_queues_nothing(
    tmp_path: Path, error: BaseException
) -> None:
    gate = WriteGate()
    surface = RecordingSurface()
    session = tmp_path / "s.pas"
    async with gate.open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface, cwd=tmp_path
    ) as rt:
        gate.fail_next("tool-call", error)
        result = await rt.call_tool("ask_user", payload("a", background=True), "b1")
        assert result["isError"] is True
        assert "ask_user failed" in result["content"][0]["text"]
        stats = await rt.statistics()
        assert stats.pending == ()
        # The runtime goes on: the next call is queued.
        result = await rt.call_tool("ask_user", payload("a", background=True), "b2")
        assert result["structuredContent"]["status"] == "queued"
    assert branch_types(session).count("ask:history-request") == 1


async def test_a_held_outcome_write_survives_the_callers_cancellation(tmp_path: Path) -> None:
    """A foreground answer on its way to the journal when the agent aborts the call: the
    outcome is recorded once (the write is shielded), and the call ends."""
    gate = WriteGate()
    surface = RecordingSurface()
    session = tmp_path / "s.pas"
    async with (
        gate.open_runtime(
            session=session, settings=settings_file(tmp_path), surface=surface, cwd=tmp_path
        ) as rt,
        trio.open_nursery() as nursery,
    ):
        scope = trio.CancelScope()

        async def call() -> None:
            with scope:
                await rt.call_tool("ask_user", payload("a"), tool_call_id="f1")

        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        assert surface.visible == "tool:f1"
        gate.hold("before")
        submit(rt.events, "tool:f1", answer({"a": ["a1"]}))
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1 and gate.held_types == ["ask:history-completed"]
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        gate.release()
    assert branch_types(session).count("ask:history-completed") == 1


async def test_a_disk_failure_recording_a_background_answer_leaves_the_runtime_running(
    tmp_path: Path,
) -> None:
    gate = WriteGate()
    surface = RecordingSurface()
    session = tmp_path / "s.pas"
    async with gate.open_runtime(
        session=session,
        settings=settings_file(tmp_path),
        surface=surface,
        cwd=tmp_path,
    ) as rt:
        rt.agent_started()  # busy: the answer waits for a boundary
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await trio.testing.wait_all_tasks_blocked()
        gate.fail_next("ask:history-completed", InjectedDiskError(errno.ENOSPC, "full"))
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await trio.testing.wait_all_tasks_blocked()
        # Nothing was recorded, so nothing happened: the person hears of it and the form
        # is pending and shown again; no error outcome stands in for the answer.
        assert gate.failed_types == ["ask:history-completed"]
        assert "could not be saved" in rt.notices.receive_nowait()
        assert surface.visible == "tool:b1"
        stats = await rt.statistics()
        assert len(stats.pending) == 1 and stats.completed == 0
        result = await rt.call_tool("ask_user", payload("b", background=True), "b2")
        assert result["structuredContent"]["status"] == "queued"
        # The disk is back: the same answer, submitted again, is recorded and delivered.
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await trio.testing.wait_all_tasks_blocked()
        assert surface.visible == "tool:b2"
        messages = await rt.turn_boundary()
    assert branch_types(session).count("ask:history-completed") == 1
    assert len(messages) == 1 and "a1" in str(messages[0])


async def test_a_disk_failure_marking_a_delivery_keeps_the_answer_for_the_next_boundary(
    tmp_path: Path,
) -> None:
    """The queue's own write (the delivery mark) fails on the disk: the boundary gets nothing,
    the person a notice, and the answer goes out at the next boundary, marked once."""
    gate = WriteGate()
    session = tmp_path / "s.pas"
    async with gate.open_runtime(
        session=session,
        settings=settings_file(tmp_path),
        surface=RecordingSurface(),
        cwd=tmp_path,
    ) as rt:
        rt.agent_started()  # busy: the answer waits for a boundary
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await trio.testing.wait_all_tasks_blocked()
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await trio.testing.wait_all_tasks_blocked()
        gate.fail_next("ask:background-answer", InjectedDiskError(errno.EIO, "disk"))
        assert await rt.turn_boundary() == []
        assert gate.failed_types == ["ask:background-answer"]
        assert "A write to the session file failed" in rt.notices.receive_nowait()
        messages = await rt.turn_boundary()
        assert len(messages) == 1
        assert await rt.turn_boundary() == []
    assert branch_types(session).count("ask:background-answer") == 1


async def test_a_disk_failure_marking_an_idle_wake_is_retried_by_the_queues_timer(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The agent is idle and nothing else happens: the wake whose delivery mark failed on the
    disk goes out when the queue's retry timer runs out, marked once. A retry that fails
    again doubles the wait. The clock moves only when the test jumps it."""
    gate = WriteGate()
    session = tmp_path / "s.pas"
    async with gate.open_runtime(
        session=session,
        settings=settings_file(tmp_path),
        surface=RecordingSurface(),
        cwd=tmp_path,
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(2):
            gate.fail_next("ask:background-answer", InjectedDiskError(errno.EIO, "disk"))
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await trio.testing.wait_all_tasks_blocked()
        assert gate.failed_types == ["ask:background-answer"]
        assert "A write to the session file failed" in rt.notices.receive_nowait()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        mock_clock.jump(qs.WAKE_RETRY_FIRST)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.failed_types == ["ask:background-answer"] * 2  # the retry failed too
        mock_clock.jump(qs.WAKE_RETRY_FIRST)  # half of the doubled wait
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        mock_clock.jump(qs.WAKE_RETRY_FIRST)
        await trio.testing.wait_all_tasks_blocked()
        wake = rt.wakeups.receive_nowait()
        assert "a1" in str(wake)
        assert branch_types(session).count("ask:background-answer") == 1
        assert await rt.turn_boundary() == []
    assert branch_types(session).count("ask:background-answer") == 1


async def test_an_outer_cancellation_keeps_the_latest_draft(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    with trio.CancelScope() as host:
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface(), cwd=tmp_path
        ) as rt:
            await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
            await trio.testing.wait_all_tasks_blocked()
            assert await rt.send_command("tool:b1", fs.Number(1))
            await trio.testing.wait_all_tasks_blocked()
            host.cancel()
            await trio.lowlevel.checkpoint()
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface, cwd=tmp_path):
        await trio.testing.wait_all_tasks_blocked()
        assert surface.visible == "tool:b1"
        assert fs.state_to_json(surface.states["tool:b1"])["drafts"] == [{"selected": [0]}]


async def test_a_draft_write_that_fails_on_the_disk_at_disposal_is_tried_again(
    tmp_path: Path,
) -> None:
    """The runtime closes while a draft is unsaved and the disk fails once: disposal writes
    it again at once (no timer), and the draft comes back after the restart."""
    gate = WriteGate()
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with gate.open_runtime(
        session=session, settings=settings, surface=RecordingSurface(), cwd=tmp_path
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await trio.testing.wait_all_tasks_blocked()
        assert await rt.send_command("tool:b1", fs.Number(1))
        await trio.testing.wait_all_tasks_blocked()
        gate.fail_next("ask:draft", InjectedDiskError(errno.EIO, "disk"))
    assert gate.failed_types == ["ask:draft"]
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface, cwd=tmp_path):
        await trio.testing.wait_all_tasks_blocked()
        assert fs.state_to_json(surface.states["tool:b1"])["drafts"] == [{"selected": [0]}]


async def test_a_draft_write_that_fails_on_the_disk_is_retried_by_the_queues_timer(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A draft flush fails on the disk while nothing else happens: the drafts stay dirty and
    the queue's retry timer writes them (the backoff doubles while the disk keeps failing)."""
    gate = WriteGate()
    session = tmp_path / "s.pas"
    async with gate.open_runtime(
        session=session,
        settings=settings_file(tmp_path),
        surface=RecordingSurface(),
        cwd=tmp_path,
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(2):
            gate.fail_next("ask:draft", InjectedDiskError(errno.EIO, "disk"))
        assert await rt.send_command("tool:b1", fs.Number(1))
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(0.25)  # the draft delay: the flush fails
        await trio.testing.wait_all_tasks_blocked()
        assert gate.failed_types == ["ask:draft"]
        mock_clock.jump(qs.DRAFT_RETRY_FIRST)  # the retry fails too
        await trio.testing.wait_all_tasks_blocked()
        assert gate.failed_types == ["ask:draft"] * 2
        assert branch_types(session).count("ask:draft") == 0
        mock_clock.jump(qs.DRAFT_RETRY_FIRST)  # half of the doubled wait: nothing yet
        await trio.testing.wait_all_tasks_blocked()
        assert branch_types(session).count("ask:draft") == 0
        mock_clock.jump(qs.DRAFT_RETRY_FIRST * 1.5)  # past the doubled wait
        await trio.testing.wait_all_tasks_blocked()
        assert branch_types(session).count("ask:draft") == 1


async def _hold_until(gate: WriteGate, entry_type: str) -> None:
    """Let writes through one at a time until one of ``entry_type`` waits at the gate."""
    while True:
        await trio.testing.wait_all_tasks_blocked()
        if gate.held and gate.held_types[-1] == entry_type:
            return
        gate.release()
        gate.hold("before")


@pytest.mark.parametrize("settle_again", [True, False])
async def test_a_settle_while_a_wake_is_being_marked_is_the_period_that_wake_belongs_to(
    tmp_path: Path, settle_again: bool
) -> None:
    """The agent settles again while an idle wake's delivery mark is being written. The wake
    goes out after that call, so it is the wake of the new idle period: a later answer waits
    for the boundary instead of waking the agent a second time in one period. Without the
    second settle, a settle after the wake starts a period that may wake again."""
    gate = WriteGate()
    async with gate.open_runtime(
        session=tmp_path / "s.pas",
        settings=settings_file(tmp_path),
        surface=RecordingSurface(),
        cwd=tmp_path,
    ) as rt:
        # A runtime starts with the agent idle: the settles below are its first hook calls.
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="b1")
        await rt.call_tool("ask_user", payload("b", background=True), tool_call_id="b2")
        await trio.testing.wait_all_tasks_blocked()
        gate.hold("before")
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await _hold_until(gate, "ask:background-answer")
        if settle_again:
            rt.agent_settled()
        gate.release()
        await trio.testing.wait_all_tasks_blocked()
        assert "a1" in str(rt.wakeups.receive_nowait())
        if not settle_again:
            rt.agent_settled()
        submit(rt.events, "tool:b2", answer({"b": ["b1"]}))
        await trio.testing.wait_all_tasks_blocked()
        if settle_again:
            with pytest.raises(trio.WouldBlock):
                rt.wakeups.receive_nowait()
            rt.agent_started()
            [message] = await rt.turn_boundary()
            assert "b1" in str(message)
        else:
            assert "b1" in str(rt.wakeups.receive_nowait())
