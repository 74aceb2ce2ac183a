"""Live settings and the question mode switch (/ask-mode) through the runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from pi_agent_ask import open_runtime
from pi_agent_ask.persistence.settings import load_settings

from .runtime_support import RecordingSurface, payload, settings_file, settle


def tool_names(definitions: list[dict[str, Any]]) -> list[str]:
    return [d["name"] for d in definitions]


async def test_switching_before_the_first_model_request_needs_no_confirmation(
    tmp_path: Path,
) -> None:
    settings = settings_file(tmp_path)
    asked: list[str] = []

    async def confirm(message: str) -> bool:
        asked.append(message)
        return True

    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        assert "wait_for_answers" in tool_names(rt.tool_definitions())
        assert await rt.set_question_mode("background-only", confirm=confirm)
        assert asked == []
        assert "wait_for_answers" not in tool_names(rt.tool_definitions())
        schema = rt.tool_definitions()[0]["inputSchema"]
        assert "background" not in schema["properties"]
        receipt = await rt.call_tool("ask_user", payload("a"), "c1")
        assert receipt["structuredContent"]["status"] == "queued"
    saved = json.loads(settings.read_text())
    assert saved["behaviour"]["questionMode"] == "background-only"


async def test_after_a_model_request_a_refused_confirmation_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = settings_file(tmp_path)
    before = settings.read_text()
    asked: list[str] = []

    async def refuse(message: str) -> bool:
        asked.append(message)
        return False

    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        assert not await rt.set_question_mode("background-only", confirm=refuse)
        assert not await rt.set_question_mode("background-only")  # no hook: no change
        assert "wait_for_answers" in tool_names(rt.tool_definitions())
    assert len(asked) == 1
    assert "cannot reuse the cached prompt" in asked[0]
    assert settings.read_text() == before


async def test_enabling_background_only_releases_a_running_wait_and_keeps_forms(
    tmp_path: Path,
) -> None:
    async def accept(message: str) -> bool:
        return True

    async with open_runtime(settings=settings_file(tmp_path), surface=RecordingSurface()) as rt:
        rt.agent_started()
        queued = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        out: dict[str, Any] = {}
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                out["wait"] = await rt.call_tool("wait_for_answers", {}, "w1")

            nursery.start_soon(wait)
            await settle()
            assert await rt.set_question_mode("background-only", confirm=accept)
        details = out["wait"]["structuredContent"]
        assert details["status"] == "deferred"
        assert details["reason"] == "mode_changed"
        assert details["pendingRequestIds"] == [queued["details"]["requestId"]]
        stats = await rt.statistics()
        assert stats.pending == (queued["details"]["requestId"],)
        assert stats.visible == "tool:c1"


async def test_a_failed_save_changes_nothing_and_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings = blocker / "settings.json"  # its parent is a file: saving must fail
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        assert not await rt.set_question_mode("background-only")
        notices = []
        while True:
            try:
                notices.append(rt.notices.receive_nowait())
            except trio.WouldBlock:
                break
        assert any(n.startswith("Unable to save ask config at") for n in notices)
        assert "wait_for_answers" in tool_names(rt.tool_definitions())


async def test_applied_settings_reach_the_visible_form_at_once(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        assert surface.states["tool:c1"].settings.double_press_review_shortcuts is True
        loaded = load_settings(settings)
        behaviour = attrs.evolve(loaded.config.behaviour, double_press_review_shortcuts=False)
        rt.apply_settings(
            loaded.with_global_config(attrs.evolve(loaded.config, behaviour=behaviour))
        )
        await settle()
        assert surface.states["tool:c1"].settings.double_press_review_shortcuts is False
        # Forms created later get them too.
        assert rt.config.form_settings.double_press_review_shortcuts is False


async def test_settings_saved_after_disposal_are_kept_without_error(tmp_path: Path) -> None:
    # The overlay saves in a worker thread; a save that finishes after the runtime closed (the
    # surface outlives it in `pi-agent-ask ask` and the shell) called start_soon on the closed
    # nursery: "Nursery is closed to new arrivals".
    settings = settings_file(tmp_path)
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        pass
    loaded = load_settings(settings)
    behaviour = attrs.evolve(loaded.config.behaviour, double_press_review_shortcuts=False)
    rt.apply_settings(loaded.with_global_config(attrs.evolve(loaded.config, behaviour=behaviour)))
    assert rt.config.form_settings.double_press_review_shortcuts is False
