"""Settings problems reach the person at once: on the form (until the first key) and, for
``ask``, through ``on_notices`` (the command prints them on standard error)."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from pi_agent_ask.ui.testing import asking
from tests.test_ui_typing import GOAL


async def test_a_broken_settings_file_is_said_on_the_form(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    printed: list[tuple[str, ...]] = []
    with trio.fail_after(20):
        async with asking({"questions": [GOAL]}, settings, on_notices=printed.append) as ask:
            await ask.wait("What should I optimize for?")
            await ask.wait("Config was invalid or unsupported.")
            text = ask.term.text()
            assert "/reload" not in text and "restart pi" not in text
            assert "reads it again at its next start" in " ".join(text.split())
            ask.send("\x1b[B")  # the first key: the notice has been seen
            await ask.wait_gone("Config was invalid")
            ask.send("\x03", "\x03")
            status, _ = await ask.finished()
    assert status == 1
    # Printed (standard error): which file and what was wrong, then the notice the form shows.
    [(detail, notice)] = printed
    assert detail.startswith(f"Config file {settings}: not valid JSON: "), detail
    assert notice.startswith("Config was invalid or unsupported.")
    assert "Config file" not in text  # the form has the notice alone (a small screen's room)
    assert settings.read_text() == "{ not json"  # never rewritten


async def test_a_clashing_keymap_is_said_on_the_form(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps({"schemaVersion": 6, "keymaps": {"global": {"settings": "escape"}}})
    )
    printed: list[tuple[str, ...]] = []
    with trio.fail_after(20):
        async with asking({"questions": [GOAL]}, settings, on_notices=printed.append) as ask:
            await ask.wait("What should I optimize for?")
            await ask.wait("Using default ask keymaps")
            ask.send("\x03", "\x03")
            await ask.finished()
    assert printed and "Using default ask keymaps" in printed[0][-1]
