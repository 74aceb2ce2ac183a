"""The queue's form runner: background forms run one after the other in one shielded task,
each under its own cancel scope, which the form enters only once it must wait
(``run_form(scope=...)``, ``host_form(scope=...)``). Real runtimes, real Trio scheduling; no
timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors import ask
from pi_agent_ask.actors.core import TEARDOWN_TIMEOUT
from pi_agent_ask.actors.form import (
    FLOW_NOT_ACTIVE,
    Ended,
    FormInput,
    NullSurface,
    RemoteResponse,
    Saved,
    UserCommand,
    close_inbox,
    run_form,
)
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params

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

GUARD = 60  # seconds; only stops a hang
ROUNDS = 16
"""Trio runs the tasks woken together in either order: each round is a fresh chance for a
form shown too early to overlap the one still hiding (half the time, without the fix)."""


@attrs.define(eq=False)
class OverlapSurface(RecordingSurface):
    """Notices a form shown while another is still on the surface."""

    open_forms: int = 0
    overlaps: list[tuple[str, str | None]] = attrs.field(factory=list)

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[Any]
    ) -> None:
        if self.open_forms:
            self.overlaps.append((flow_id, self.visible))
        self.open_forms += 1
        super().show(flow_id, state, commands)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        self.open_forms -= 1
        super().hide(flow_id, ended)


async def test_a_foreground_form_cut_by_a_session_change_hides_before_the_background_form_shows(
    tmp_path: Path,
) -> None:
    # The session change cancels the foreground claim and starts the background form in one
    # transition; the runner passes through the scheduler first, so the cut form hides first.
    for round_ in range(ROUNDS):
        surface = OverlapSurface()
        with trio.fail_after(GUARD):
            async with open_runtime(
                session=tmp_path / f"s{round_}.pias",
                settings=settings_file(tmp_path),
                surface=surface,
            ) as rt:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(rt.call_tool, "ask_user", payload("f"), "f1")
                    await settle()
                    assert surface.visible == "tool:f1"
                    await rt.call_tool("ask_user", payload("b", background=True), "b1")
                    await settle()
                    assert surface.visible == "tool:f1"  # the background form waits its turn
                    await rt.change_session("reload")
                    await settle()
                assert (surface.overlaps, surface.visible) == ([], "tool:b1")


def _form() -> tuple[fs.FormState, AskRequest]:
    params = validate_ask_params(payload("a", background=True)).params
    assert params is not None
    request = AskRequest("r1", params, background=True, created_at="2026-01-01T00:00:00Z")
    return fs.new_form(params, fs.FormSettings(), background=True), request


async def _run(
    form: fs.FormState,
    inbox: trio.MemoryReceiveChannel[FormInput],
    commands: trio.MemorySendChannel[FormInput],
    scope: trio.CancelScope,
    changes: list[fs.FormState],
) -> fs.FormState | None:
    async def on_change(state: fs.FormState, _saved: Saved | None) -> None:
        changes.append(state)

    return await run_form(
        flow_id="tool:c1",
        state=form,
        inbox=inbox,
        commands=commands,
        surface=NullSurface(),
        on_change=on_change,
        scope=scope,
    )


async def test_a_form_answered_at_once_ends_with_its_answer_outside_its_scope() -> None:
    form, _request = _form()
    commands, inbox = trio.open_memory_channel[FormInput](64)
    replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
    commands.send_nowait(RemoteResponse(answer({"a": ["a1"]}), replies))
    changes: list[fs.FormState] = []
    scope = trio.CancelScope()
    final = await _run(form, inbox, commands, scope, changes)
    assert final is not None and final.outcome is not None and not changes
    assert reply.receive_nowait() is None  # answered: ok
    with scope:  # never entered by the form (a scope can be entered once)
        pass


async def test_a_form_given_a_cancelled_scope_reads_nothing_even_with_an_answer_waiting() -> None:
    form, _request = _form()
    commands, inbox = trio.open_memory_channel[FormInput](64)
    replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
    commands.send_nowait(RemoteResponse(answer({"a": ["a1"]}), replies))
    scope = trio.CancelScope()
    scope.cancel()
    changes: list[fs.FormState] = []
    assert await _run(form, inbox, commands, scope, changes) is None
    assert scope.cancelled_caught and not changes
    close_inbox(inbox)
    assert reply.receive_nowait() == FLOW_NOT_ACTIVE


async def test_a_form_that_must_wait_waits_under_its_scope() -> None:
    # A key already waiting is a draft: the form reports it (under its scope, since that
    # waits), then waits for more; cancelling the scope ends it with no outcome.
    form, _request = _form()
    commands, inbox = trio.open_memory_channel[FormInput](64)
    commands.send_nowait(UserCommand(fs.Number(1)))
    scope = trio.CancelScope()
    changes: list[fs.FormState] = []
    result: list[fs.FormState | None] = []

    async def run() -> None:
        result.append(await _run(form, inbox, commands, scope, changes))

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await settle()
            assert len(changes) == 1 and changes[0].drafts[0].selected == (0,)
            assert result == []  # waiting for the next input
            scope.cancel()
    assert result == [None] and scope.cancelled_caught
    with pytest.raises(RuntimeError), scope:  # the form entered it once it had to wait
        pass


async def test_a_background_form_cancelled_before_it_runs_announces_and_shows_nothing(
    tmp_path: Path,
) -> None:
    surface = RecordingSurface()
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=surface) as rt:
            await settle()
            log = EventLog()
            log.attach(rt.events)
            form, request = _form()
            commands, inbox = trio.open_memory_channel[FormInput](64)
            scope = trio.CancelScope()
            scope.cancel()
            final = await ask.host_form(rt, request, form, commands, inbox, None, scope=scope)
            assert final is None and scope.cancelled_caught
            assert (log.of(ev.STARTED), surface.shown) == ([], [])


async def test_an_answer_written_while_disposal_gives_up_waiting_is_still_announced(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The answer's entries are written, and its task waits at the gate (after the write) when
    # the runtime closes: the quiesce gives up after its bound and the actors are cancelled.
    # The runner is shielded, so the write and its ``completed`` are never separated. (In
    # memory: no worker threads under the virtual clock; no guard either, its deadline would
    # be virtual too.)
    gate = WriteGate()
    log = EventLog()
    async with trio.open_nursery() as outer:

        async def release_late() -> None:
            await trio.sleep(TEARDOWN_TIMEOUT * 2)  # once disposal stopped waiting
            gate.release()

        async with gate.open_runtime(
            settings=settings_file(tmp_path), surface=RecordingSurface()
        ) as rt:
            log.attach(rt.events)
            rt.agent_started()  # busy: no wake to write
            await rt.call_tool("ask_user", payload("a", background=True), "b1")
            await settle()
            gate.hold("after")
            submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
            await settle()
            assert gate.held_types == ["ask:history-completed"]
            outer.start_soon(release_late)
    [completed] = log.of(ev.COMPLETED)
    assert completed["flowId"] == "tool:b1"


@attrs.define(eq=False)
class EndingSurface(RecordingSurface):
    """Keeps why each form left (``hide``'s ``ended``)."""

    endings: list[Ended | None] = attrs.field(factory=list)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        self.endings.append(ended)
        super().hide(flow_id, ended)


@pytest.mark.parametrize(
    ("given", "ended"),
    [
        ("answer", "submitted"),
        ("cancel", "cancelled"),
        ("later", "deferred"),
        ("scope", "withdrawn"),
    ],
)
async def test_a_form_tells_its_surface_why_it_left(given: str, ended: Ended) -> None:
    """Answered, cancelled (a remote cancel, the agent told "User cancelled"), put back with
    Esc or Later (it comes back), or ended with no outcome (its call cancelled): the surface
    hears which, so the desk's page can say what happened to a form it shows."""
    form, _request = _form()
    commands, inbox = trio.open_memory_channel[FormInput](64)
    replies, _reply = trio.open_memory_channel[tuple[str, str] | None](1)
    surface = EndingSurface()
    scope = trio.CancelScope()

    async def on_change(state: fs.FormState, _saved: Saved | None) -> None:
        pass

    async def on_defer() -> None:
        scope.cancel()  # as the queue does: the panel hidden, the form's scope cancelled
        await trio.sleep_forever()

    async def run() -> None:
        await run_form(
            flow_id="tool:c1",
            state=form,
            inbox=inbox,
            commands=commands,
            surface=surface,
            on_change=on_change,
            on_defer=on_defer,
            scope=scope,
        )

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await settle()
            if given == "answer":
                await commands.send(RemoteResponse(answer({"a": ["a1"]}), replies))
            elif given == "cancel":
                await commands.send(RemoteResponse({"kind": "cancel"}, replies))
            elif given == "later":
                await commands.send(UserCommand(fs.Cancel()))  # Esc on a background form
            else:
                scope.cancel()
    assert surface.endings == [ended]
