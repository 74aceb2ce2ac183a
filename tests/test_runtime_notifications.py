"""Notifications from the runtime: one per opened form, never in the form's way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import trio
import trio.testing

from pi_agent_ask import open_runtime

from .runtime_support import RecordingSurface, answer, auto_answer, payload


def settings_with(tmp_path: Path, notifications: dict) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schemaVersion": 6, "notifications": notifications}))
    return path


async def test_each_opened_form_notifies_once(tmp_path: Path) -> None:
    written: list[str] = []
    settings = settings_with(tmp_path, {"enabled": True, "channels": ["bell", "osc9"]})
    async with open_runtime(
        settings=settings, surface=RecordingSurface(), write_terminal=written.append
    ) as rt:
        auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
        await rt.call_tool("ask_user", payload("a"), "c1")
        await rt.call_tool("ask_user", payload("a"), "c2")
        await trio.testing.wait_all_tasks_blocked()
    assert written == [
        "\x07",
        "\x1b]9;Question waiting: Q1\x07",
        "\x07",
        "\x1b]9;Question waiting: Q1\x07",
    ]


async def test_disabled_notifications_write_nothing(tmp_path: Path) -> None:
    written: list[str] = []
    settings = settings_with(tmp_path, {"enabled": False, "channels": ["bell"]})
    async with open_runtime(
        settings=settings, surface=RecordingSurface(), write_terminal=written.append
    ) as rt:
        auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
        await rt.call_tool("ask_user", payload("a"), "c1")
    assert written == []


async def test_a_hanging_command_channel_never_delays_the_form(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    command = f'echo "$ASK_NOTIFY_MESSAGE" > {fifo}; sleep 30'
    settings = settings_with(
        tmp_path, {"enabled": True, "channels": [{"type": "command", "command": command}]}
    )
    with trio.fail_after(10):
        async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
            auto_answer(rt.events, lambda p: answer({"a": ["a2"]}))
            result = await rt.call_tool("ask_user", payload("a"), "c1")
            assert result["structuredContent"]["answers"]["a"]["values"] == ["a2"]
            # The command did run, in parallel with the form (reading blocks until it writes).
            heard = await trio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)
            assert heard == "Question waiting: Q1\n"
