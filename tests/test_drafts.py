"""Drafts of background forms: coalesced into few journal entries, never lost on hide, reload,
exit or restart, and following the active branch."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from pi_agent_ask import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import RecordingSurface, payload, settings_file, settle


def drafts_in(session: Path) -> list[dict]:
    return [
        e.data for e in SessionFile.open(session, readonly=True).branch() if e.type == "ask:draft"
    ]


async def type_into_custom_row(rt, flow: str, text: str) -> None:
    # Question "a" has two options; the custom row is the third: landing on it opens the editor.
    await rt.send_command(flow, fs.NextOption())
    await rt.send_command(flow, fs.NextOption())
    for end in range(1, len(text) + 1):
        await rt.send_command(flow, fs.EditorChanged(text[:end]))


async def test_typing_is_coalesced_into_few_draft_entries(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # The clock moves only when the test jumps it: the typing takes no time at all, however
    # loaded the machine is, and the coalescing delay runs out exactly once, after it.
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        await type_into_custom_row(rt, "tool:c1", "a fairly long answer typed key by key")
        await settle()
        assert drafts_in(session) == []  # still within the coalescing delay
        mock_clock.jump(0.6)  # past it
        await settle()
        written = drafts_in(session)
        assert len(written) == 1
        assert written[-1]["form"]["editor"]["text"] == "a fairly long answer typed key by key"


async def test_a_draft_survives_exit_and_restart(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        await type_into_custom_row(rt, "tool:c1", "half an answer")
        # Leave at once: no time for the coalescing delay.
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await settle()
        restored = surface.states["tool:c1"]
        assert restored.editor is not None
        assert restored.editor.text == "half an answer"


async def test_a_draft_survives_reload(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
        await settle()
        await rt.send_command("tool:c1", fs.Number(2))
        await rt.change_session("reload")
        await settle()
        assert surface.shown == ["tool:c1", "tool:c1"]
        restored = surface.states["tool:c1"]
        assert restored.drafts[0].selected == (1,)
        assert restored.tab == 1


async def test_drafts_and_panel_visibility_follow_the_branch(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
        await settle()
        before_draft = (await rt._writer.branch())[-1].id
        await rt.send_command("tool:c1", fs.Number(1))
        await rt.defer_queue()
        await settle()
        assert (await rt.statistics()).panel_visible is False
        # Back to the branch point before the answer and the hiding.
        await rt.change_session("tree", before_draft)
        await settle()
        stats = await rt.statistics()
        assert stats.panel_visible is True
        assert surface.states["tool:c1"].drafts[0].selected == ()
