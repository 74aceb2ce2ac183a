"""End to end: ``pi-agent-ask desk`` in a real terminal (tmux), an MCP client's foreground
``ask_user`` answered there by key presses.

The client is the SDK's own (``mcp.client.streamable_http``), reading the desk's connection
file; tmux types the keys and shows the screen (``tests/e2e/test_e2e_ask.py`` has the pane).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.connection import read_desk_file
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client
from tests.e2e.test_e2e_ask import COMMAND, pane

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
]

ASK = {
    "title": "Release",
    "questions": [
        {
            "id": "channel",
            "label": "Channel",
            "prompt": "Where should the release go?",
            "options": [
                {"value": "beta", "label": "Beta"},
                {"value": "stable", "label": "Stable"},
            ],
        }
    ],
}


async def test_a_foreground_ask_from_an_mcp_client_is_answered_on_the_desk(tmp_path: Path) -> None:
    file = tmp_path / "desk.json"
    status = tmp_path / "status"
    command = (
        f"PI_AGENT_ASK_DESK_FILE={file} {COMMAND} desk --state {tmp_path / 'state'} "
        f"--settings {tmp_path / 'settings.json'}; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, 110, 30) as term:
            await term.wait_for(lambda screen: "http://127.0.0.1:" in screen)
            address = read_desk_file(file)
            assert address is not None
            results: list[Any] = []
            async with desk_client(address, "release-bot") as client, trio.open_nursery() as n:

                async def call() -> None:
                    results.append(await client.call_tool("ask_user", ASK))

                n.start_soon(call)
                screen = await term.wait_for("Where should the release go?")
                assert "From release-bot" in screen and "blocked until you answer" in screen
                assert "release-bot" in screen.splitlines()[3]  # the agents pane row
                await term.keys("Down", "Enter")
                await term.wait_for("Review your answers")
                await term.keys("1")
                await term.wait_for("again")
                await term.keys("1")
            (result,) = results
            assert not result.is_error
            assert result.structured_content["answers"]["channel"]["values"] == ["stable"]
            await term.wait_for("No questions waiting")
            await term.keys("C-q")
            await term.tmux("wait-for", "finished")
    assert status.read_text().strip() == "0"
    assert not file.exists()
