"""The settings overlay under a burst of toggles: saves apply in order, the last one wins, and
the file, the overlay and the form agree."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.persistence import settings_list
from tests.test_ui_typing import GOAL, asking

DOWN = "\x1b[B"


async def test_a_burst_of_toggles_ends_with_the_last_on_disk_and_on_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first save is the slow one (a slow disk). Run concurrently, the second save finished
    # first and the first then wrote the older config over it.
    second_started = threading.Event()
    calls: list[int] = []
    real_save = settings_list.save_command

    def save(*args: Any) -> Any:
        calls.append(len(calls))
        if len(calls) == 1:
            second_started.wait(1.0)  # long enough for a concurrent second save to finish
        else:
            second_started.set()
        return real_save(*args)

    monkeypatch.setattr(settings_list, "save_command", save)
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("?")
        await ask.wait("Live settings")
        # Down to "Show footer hints" (the fifth row), then toggle it twice: off, on.
        ask.send(DOWN * 4)
        await ask.term.wait_for(lambda t: "› Show footer hints" in t.text())
        ask.send(" ")
        ask.send(" ")
        await trio.testing.wait_all_tasks_blocked()
        ask.send("?")  # close: waits for every save
        await ask.wait_gone("Live settings")
        saved = json.loads(ask.settings.read_text())
        assert saved["behaviour"]["showFooterHints"] is True
        assert "1-3 select" in ask.term.text()  # the form follows: hints shown
        ask.send("\x03", "\x03")
        await ask.finished()
    assert len(calls) == 2
