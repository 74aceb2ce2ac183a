"""End to end: ``pi-agent-ask desk`` in a real terminal (tmux), an MCP client's foreground
``ask_user`` answered there by key presses.

The client is the SDK's own (``mcp.client.streamable_http``), reading the desk's connection
file; tmux types the keys and shows the screen (``tests/e2e/test_e2e_ask.py`` has the pane).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, answer_displayed, desk_client, open_desk
from pi_agent_ask.mcp_common.connection import read_desk_file
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


def pending_of(screen: str, key: str) -> int | None:
    """The pending count of ``key``'s row in the agents pane, if the row is on screen."""
    for row in screen.splitlines():
        pane_part = row.split("│", 1)[0]
        words = pane_part.replace("▶", " ").split()
        if len(words) >= 2 and words[0] == key and words[1].isdigit():
            return int(words[1])
    return None


def ask(label: str) -> dict[str, Any]:
    return {
        "background": True,
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"Question {label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
    }


async def test_a_desk_killed_after_answers_and_a_draft_loses_none(tmp_path: Path) -> None:
    """Answer forms and type a note into another on a real desk, SIGKILL it, start a new desk
    on the same state: the undelivered answer, the pending form and its draft are all there."""
    file, state = tmp_path / "desk.json", tmp_path / "state"
    command = (
        f"PI_AGENT_ASK_DESK_FILE={file} exec {COMMAND} desk --state {state} "
        f"--settings {tmp_path / 'settings.json'}"
    )

    async def answer_first_option(term: Any) -> None:
        await term.keys("1")
        await term.wait_for("Review your answers")
        await term.keys("1")
        await term.wait_for("again")
        await term.keys("1")

    with trio.fail_after(60):
        async with pane(tmp_path, command, 110, 30) as term:
            await term.wait_for(lambda screen: "http://127.0.0.1:" in screen)
            address = read_desk_file(file)
            assert address is not None
            async with desk_client(address, "alpha") as alpha, desk_client(address, "beta") as beta:
                one = (await alpha.call_tool("ask_user", ask("One"))).structured_content
                await term.wait_for("Question One?")
                await answer_first_option(term)
                await term.wait_for("No questions waiting")
                two = (await alpha.call_tool("ask_user", ask("Two"))).structured_content
                # One's answer came with the next tool result, once.
                delivered = [e["details"]["requestId"] for e in two["backgroundAnswers"]]
                assert delivered == [one["requestId"]]
                await term.wait_for("Question Two?")
                three = (await beta.call_tool("ask_user", ask("Three"))).structured_content
                await term.wait_for("1 more waiting")
            await term.keys("n")
            await term.wait_for("Note: Add a note")
            await term.literal("half a thought")
            await term.keys("Enter")
            await term.wait_for("Note: half a thought")
            await term.keys("Escape")  # later: beta's form takes its turn
            await term.wait_for("Question Three?")
            await answer_first_option(term)
            # Beta's count drops once its answer is journaled; alpha's form is back, which
            # needs it stopped first (its draft written at once) and shown again.
            await term.wait_for(lambda screen: pending_of(screen, "beta") == 0)
            await term.wait_for("Note: half a thought")
            os.kill(address.pid, signal.SIGKILL)
    assert file.exists()  # killed: nobody removed it

    with trio.fail_after(60):
        async with open_desk(tmp_path, state_dir=state) as desk:
            await desk.board.wait_for(lambda board: board.current is not None)
            shown = desk.board.current
            assert shown is not None and shown.state.params.questions[0].label == "Two"
            assert shown.state.drafts[0].option_notes == {"yes": "half a thought"}
            await answer_displayed(desk)
            async with desk_client(desk.address, "alpha") as alpha:
                waited = (await alpha.call_tool("wait_for_answers", {})).structured_content
            assert [e["requestId"] for e in waited["results"]] == [two["requestId"]]
            assert "backgroundAnswers" not in waited
            async with desk_client(desk.address, "beta") as beta:
                waited = (await beta.call_tool("wait_for_answers", {})).structured_content
            assert [e["requestId"] for e in waited["results"]] == [three["requestId"]]


LONG_NAME = "release-bot-with-long-name"

PLAN = {
    "title": "Soak and release plan for billing",
    "questions": [
        {
            "id": "channel",
            "label": "Channel",
            "prompt": "Where should the release go first?",
            "options": [
                {"value": "beta", "label": "Beta", "description": "early adopters"},
                {"value": "soak", "label": "Soak test"},
            ],
        }
    ],
}


def desk_command(tmp_path: Path) -> str:
    return (
        f"PI_AGENT_ASK_DESK_FILE={tmp_path / 'desk.json'} exec {COMMAND} desk "
        f"--state {tmp_path / 'state'} --settings {tmp_path / 'settings.json'}"
    )


def header_row(screen: str) -> str:
    """The form's header (the part right of the agents pane when the pane is beside it)."""
    row = next(row for row in screen.splitlines() if "From " in row)
    return row.split("│", 1)[-1]


async def test_the_desk_at_40x12_gives_the_form_the_width(tmp_path: Path) -> None:
    """On a narrow screen the agents pane is one line above the form; the form keeps the
    terminal's width, its header names the asking agent, and it is answered there."""
    with trio.fail_after(60):
        async with pane(tmp_path, desk_command(tmp_path), 40, 12) as term:
            await term.wait_for("http://127.0.0.1:")
            address = read_desk_file(tmp_path / "desk.json")
            assert address is not None
            results: list[Any] = []
            async with desk_client(address, "release-bot") as client, trio.open_nursery() as n:

                async def call() -> None:
                    results.append(await client.call_tool("ask_user", PLAN))

                n.start_soon(call)
                screen = await term.wait_for("Soak test")
                rows = screen.splitlines()
                assert "│" not in screen  # no pane beside the form
                assert any(row.startswith(" From release-bot") for row in rows)
                assert sum("release-bot" in row for row in rows) == 2  # the agents line too
                beta = next(row for row in rows if "1. ( ) Beta" in row)
                assert beta.index("1.") <= 3
                await term.keys("2")
                await term.wait_for("Review your answers")
                await term.keys("1")
                await term.wait_for("again")
                await term.keys("1")
            (result,) = results
            assert result.structured_content["answers"]["channel"]["values"] == ["soak"]
            await term.wait_for("No questions waiting")


@pytest.mark.parametrize(("columns", "lines"), [(80, 24), (100, 24)])
async def test_the_form_header_is_cut_at_no_word(tmp_path: Path, columns: int, lines: int) -> None:
    """Beside the agents pane, the header names the agent in full and says the agent is
    blocked in words that fit: it ends before the edge, never inside a word."""
    with trio.fail_after(60):
        async with pane(tmp_path, desk_command(tmp_path), columns, lines) as term:
            await term.wait_for("http://127.0.0.1:")
            address = read_desk_file(tmp_path / "desk.json")
            assert address is not None
            async with desk_client(address, LONG_NAME) as client, trio.open_nursery() as n:
                n.start_soon(client.call_tool, "ask_user", PLAN)
                screen = await term.wait_for("Soak test")
                header = header_row(screen)
                assert f"From {LONG_NAME}" in header
                assert "blocked" in header
                # The pane and its rule take 31 columns; tmux drops trailing blanks, so a
                # header that fits ends before the edge.
                assert len(header.rstrip()) < columns - 31
                assert "│" in screen  # the agents pane is beside the form at this width
                n.cancel_scope.cancel()


async def test_a_settings_file_fixed_on_the_desk_clears_its_load_warning(tmp_path: Path) -> None:
    """The desk's status line shows that its settings file did not load; a save from the
    overlay writes a valid file and clears the warning there and in the overlay."""
    (tmp_path / "settings.json").write_text('{"schemaVersion": "x"}')
    warning = "Config was invalid or unsupported"
    with trio.fail_after(60):
        async with pane(tmp_path, desk_command(tmp_path), 100, 30) as term:
            await term.wait_for(lambda screen: "http://127.0.0.1:" in screen and warning in screen)
            address = read_desk_file(tmp_path / "desk.json")
            assert address is not None
            async with desk_client(address, "release-bot") as client:
                await client.call_tool("ask_user", {**PLAN, "background": True})
                await term.wait_for("Soak test")
                await term.keys("?")
                await term.wait_for("Live settings")
                await term.keys("Enter")  # toggle the first setting: saved at once
                await term.wait_for(lambda text: warning not in text)
                await term.keys("Escape")
                screen = await term.wait_for(lambda text: "Live settings" not in text)
                assert "Soak test" in screen and warning not in screen
                await term.keys("?")
                screen = await term.wait_for("Live settings")
                assert warning not in screen
    assert json.loads((tmp_path / "settings.json").read_text())["schemaVersion"] == 6
