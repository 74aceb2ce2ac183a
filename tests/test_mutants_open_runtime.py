"""``open_runtime``'s own choices, found by mutation testing of its body (``actors/runtime.py``):
the mode's error, the default settings file, the headless surface, where notification bytes go.

Everything goes through ``open_runtime`` (the actors' one, which the UI layer and
``pi_agent_ask.aio`` wrap, or the public one with a terminal). ``docs/mutation-runtime.md``
lists the mutants each test kills.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from prompt_toolkit.input import create_pipe_input

import pi_agent_ask
from pi_agent_ask import events as ev
from pi_agent_ask.actors import runtime as rt_module
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.persistence.settings import load_settings
from pi_agent_ask.ui.testing import VirtualTerminal

from .runtime_support import (
    RecordingSurface,
    WriteGate,
    answer,
    auto_answer,
    gated_journal,
    payload,
    settings_file,
)

OSC9 = "\x1b]9;Question waiting: Q1\x07"


def notifying(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps({"schemaVersion": 6, "notifications": {"enabled": True, "channels": ["osc9"]}})
    )
    return path


async def test_an_unknown_mode_is_refused_with_the_modes_it_could_be() -> None:
    # open_runtime 5, 6, 7: the error names the four modes and the one given.
    with pytest.raises(ValueError) as refused:
        async with rt_module.open_runtime(mode="gui"):  # type: ignore[arg-type]
            pass
    assert str(refused.value) == "mode must be one of tui, print, json, rpc, not 'gui'"


async def test_without_a_settings_path_the_global_settings_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # open_runtime 15, 18: settings=None reads <agent dir>/extensions/pi-agent-ask.json.
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    expected = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    expected.parent.mkdir(parents=True)
    expected.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    async with rt_module.open_runtime(surface=RecordingSurface(), cwd=tmp_path) as rt:
        assert rt.settings.path == expected
        assert rt.config.history_tools is True


async def test_a_tui_runtime_without_surface_or_terminal_is_headless() -> None:
    # open_runtime 39: no surface and no terminal: a NullSurface, answered by submit events.
    async with rt_module.open_runtime(mode="tui") as rt:
        auto_answer(rt.events, lambda p: answer({"a": ["a2"]}))
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert result["structuredContent"]["answers"]["a"]["values"] == ["a2"]


async def _ask_on_a_terminal(tmp_path: Path, term: VirtualTerminal, **options: Any) -> None:
    with create_pipe_input() as keys, trio.fail_after(20):
        async with pi_agent_ask.open_runtime(
            settings=notifying(tmp_path), input=keys, output=term.output, cwd=tmp_path, **options
        ) as rt:
            auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
            result = await rt.call_tool("ask_user", payload("a"), "c1")
            await trio.testing.wait_all_tasks_blocked()
    assert result["structuredContent"]["answers"]["a"]["values"] == ["a1"]


async def test_a_terminals_notification_bytes_go_to_its_output(tmp_path: Path) -> None:
    # open_runtime 42-46, 104: a tui runtime drawing on a terminal writes its bell/OSC there.
    term = VirtualTerminal(100, 30)
    await _ask_on_a_terminal(tmp_path, term)
    assert term.raw.count(OSC9) == 1


async def test_a_hosts_write_terminal_takes_the_bytes_instead_of_the_terminal(
    tmp_path: Path,
) -> None:
    # open_runtime 41: a write_terminal given by the host wins over the terminal's output.
    term = VirtualTerminal(100, 30)
    written: list[str] = []
    await _ask_on_a_terminal(tmp_path, term, write_terminal=written.append)
    assert written == [OSC9]
    assert OSC9 not in term.raw


async def test_a_runtime_with_its_own_surface_writes_no_bytes_to_output(tmp_path: Path) -> None:
    # open_runtime 40: output alone (no terminal drawn by the runtime) gets no notification.
    term = VirtualTerminal(100, 30)
    async with rt_module.open_runtime(
        settings=notifying(tmp_path), surface=RecordingSurface(), output=term.output
    ) as rt:
        auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
        await rt.call_tool("ask_user", payload("a"), "c1")
        await trio.testing.wait_all_tasks_blocked()
    term.output.flush()
    assert OSC9 not in term.raw


async def test_a_host_cancelling_as_a_background_form_opens_still_gets_its_notification(
    tmp_path: Path,
) -> None:
    # open_runtime 61, 62: the notification actor is shielded until disposal, like the queue.
    # The host cancels the block from its STARTED handler: between the form's announcement
    # and its notification. The form (in the queue's shielded nursery) still notifies, and the
    # runtime closes cleanly; an unshielded actor would have gone with the cancellation.
    written: list[str] = []
    with trio.CancelScope() as host:
        async with rt_module.open_runtime(
            settings=notifying(tmp_path),
            surface=RecordingSurface(),
            write_terminal=written.append,
        ) as rt:
            rt.events.on(ev.STARTED, lambda _payload: host.cancel())
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await trio.sleep_forever()
    assert host.cancelled_caught
    assert written == [OSC9]


async def test_a_boundary_cancelled_before_the_busy_queue_took_it_hands_out_nothing(
    tmp_path: Path,
) -> None:
    # open_runtime 94 (the queue's channel buffers one message): the queue is busy (a
    # background ask's write is held), so a turn boundary waits to hand its request over;
    # cancelled there, it never reached the queue and hands out nothing. The answer goes to
    # the next boundary. A buffered channel would take the request anyway and answer it.
    gate = WriteGate()
    with gated_journal(gate):
        async with rt_module.open_runtime(
            session=tmp_path / "s.pas", settings=settings_file(tmp_path), surface=NullSurface()
        ) as rt:
            rt.agent_started()
            auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await trio.testing.wait_all_tasks_blocked()
            gate.hold("before")
            got: list[Any] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rt.call_tool, "ask_user", payload("b", background=True), "c2")
                await trio.testing.wait_all_tasks_blocked()
                assert gate.held == 1
                boundary = trio.CancelScope()
                nursery.start_soon(_boundary_into, rt, boundary, got)
                await trio.testing.wait_all_tasks_blocked()
                boundary.cancel()
                await trio.testing.wait_all_tasks_blocked()
                gate.release()
            assert got == []
            [message] = await rt.turn_boundary()
    assert message["details"]["result"]["answers"]["a"]["values"] == ["a1"]


async def _boundary_into(rt: Any, scope: trio.CancelScope, got: list[Any]) -> None:
    with scope:
        got.append(await rt.turn_boundary())


@attrs.define(eq=False)
class RecordingTerminal:
    """A terminal that shows nothing and records what the runtime attached to it."""

    surface: RecordingSurface = attrs.field(factory=RecordingSurface)
    attached: list[tuple[Callable[[Any], None], Path]] = attrs.field(factory=list)

    def attach(self, apply_settings: Callable[[Any], None], cwd: Path) -> None:
        self.attached.append((apply_settings, cwd))

    async def run(self, input: Any, output: Any, *, task_status: Any) -> None:
        task_status.started()
        await trio.sleep_forever()


async def test_the_terminal_is_attached_to_the_runtimes_settings_and_directory(
    tmp_path: Path,
) -> None:
    # open_runtime 194, 195: the terminal's settings saves apply to this runtime, and its
    # relative paths start in the runtime's working directory.
    term = RecordingTerminal()
    async with rt_module.open_runtime(
        settings=notifying(tmp_path), cwd=tmp_path, terminal=lambda _loaded: term
    ) as rt:
        [(apply_settings, cwd)] = term.attached
        assert cwd == tmp_path
        assert rt.config.notifications_enabled is True
        quiet = tmp_path / "quiet.json"
        quiet.write_text(json.dumps({"schemaVersion": 6, "notifications": {"enabled": False}}))
        apply_settings(load_settings(quiet, project_dir=tmp_path))
        assert rt.config.notifications_enabled is False


async def test_a_runtime_without_a_terminal_mode_delivers_no_background_answer(
    tmp_path: Path,
) -> None:
    # open_runtime 161: the queue knows its mode. An answer recorded in a tui session is
    # not handed out by a print runtime on the same file; the next tui runtime hands it out.
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with rt_module.open_runtime(session=session, settings=settings, agent_idle=False) as rt:
        auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await trio.testing.wait_all_tasks_blocked()
    async with rt_module.open_runtime(
        session=session, settings=settings, mode="print", agent_idle=False
    ) as rt:
        assert await rt.turn_boundary() == []
    async with rt_module.open_runtime(session=session, settings=settings, agent_idle=False) as rt:
        [message] = await rt.turn_boundary()
    assert message["details"]["result"]["answers"]["a"]["values"] == ["a1"]
