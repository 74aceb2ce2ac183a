"""End to end in tmux: where the cursor is, what a click hits, where focus is, small screens.

Uses the pane helpers of ``test_e2e_ask``: a private tmux server, waits driven by the pane's
output.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.test_e2e_ask import COMMAND, PAYLOAD, Pane, pane

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


async def cursor(term: Pane) -> tuple[int, int]:
    x, y = (await term.tmux("display", "-p", "-t", term.target, "#{cursor_x} #{cursor_y}")).split()
    return int(x), int(y)


async def wait_cursor(term: Pane, expected: tuple[int, int]) -> None:
    while await cursor(term) != expected:
        await term.output.receive_some(65536)


@asynccontextmanager
async def asking(
    tmp_path: Path, columns: int = 100, lines: int = 30, payload: dict | None = None
) -> AsyncIterator[Pane]:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(payload if payload is not None else PAYLOAD))
    out = tmp_path / "out.json"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = (
        f"{COMMAND} ask {path} --settings {settings} --no-session > {out}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished; sleep 60"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, columns, lines) as term:
            yield term


@pytest.mark.parametrize(("typed", "cells"), [("hello", 5), ("日本語です", 10)])
async def test_the_terminal_cursor_follows_typed_text(
    tmp_path: Path, typed: str, cells: int
) -> None:
    async with asking(tmp_path) as term:
        await term.wait_for("What should I optimize for?")
        await term.keys("3")
        screen = await term.wait_for("> Type answer...")
        row = next(i for i, line in enumerate(screen.splitlines()) if "> Type answer" in line)
        col = screen.splitlines()[row].index("> Type answer")
        await wait_cursor(term, (col + 2, row))
        await term.literal(typed)
        await term.wait_for(typed)
        await wait_cursor(term, (col + 2 + cells, row))
        await term.keys("Left")
        await wait_cursor(term, (col + cells, row) if cells > 5 else (col + 1 + cells, row))


EMOJI = {
    "questions": [
        {
            "id": "mood",
            "label": "Mood",
            "prompt": "How is it going? ❤️ 👍🏽 👩‍💻 ok",
            "options": [
                {"value": "great", "label": "Great ❤️❤️❤️❤️ and 👍🏽👍🏽 and 👩‍💻👩‍💻 yes"},
                {"value": "fine", "label": "Fine"},
            ],
        }
    ]
}


@pytest.mark.parametrize(
    ("typed", "cells", "rows_down"),
    [
        # Drawn as "ab❤👍👩💻cd": 2 + 1 + 2 + 4 + 2 cells (the text keeps the joiners).
        ("ab❤️👍🏽👩‍💻cd", 11, 0),
        # 28 hearts fill the editor's first row at 40 columns (one cell each), 12 and x follow.
        ("❤️" * 40 + "x", 13, 1),
    ],
)
async def test_emoji_keep_the_cursor_where_the_terminal_draws_at_40x12(
    tmp_path: Path, typed: str, cells: int, rows_down: int
) -> None:
    """VS16, skin tones and joined emoji: the layout, prompt_toolkit and tmux agree on every
    cell, so the cursor stands right after the last character typed and the rows fit."""
    async with asking(tmp_path, 40, 12, payload=EMOJI) as term:
        await term.wait_for("How is it going?")
        await term.keys("3")
        screen = await term.wait_for("> Type answer...")
        row, col = row_of(screen, "> Type answer")
        await wait_cursor(term, (col + 2, row))
        await term.literal(typed)
        await wait_cursor(term, (col + 2 + cells, row + rows_down))
        await term.keys("Enter")
        await term.wait_for("Review your answers")
        await term.keys("1", "1")
        await term.tmux("wait-for", "finished")
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["details"]["answers"]["mood"]["customText"] == typed


def click(column: int, row: int) -> str:
    return f"\x1b[<0;{column + 1};{row + 1}M\x1b[<0;{column + 1};{row + 1}m"


def row_of(screen: str, needle: str) -> tuple[int, int]:
    for y, line in enumerate(screen.splitlines()):
        if needle in line:
            return y, line.index(needle)
    raise AssertionError(f"{needle!r} not on screen:\n{screen}")


async def test_a_second_click_on_review_submit_lands_on_it(tmp_path: Path) -> None:
    async with asking(tmp_path) as term:
        await term.wait_for("What should I optimize for?")
        await term.keys("1")
        await term.wait_for("Which tones fit?")
        await term.keys("Space", "Enter")
        screen = await term.wait_for("Review your answers")
        row, col = row_of(screen, "1. Submit")
        await term.literal(click(col + 4, row))
        screen = await term.wait_for("Press 1 again")
        assert row_of(screen, "1. Submit") == (row, col)
        await term.literal(click(col + 4, row))
        await term.tmux("wait-for", "finished")  # the command has returned
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["details"]["cancelled"] is False


async def test_a_40x12_screen_keeps_prompt_options_and_scrolls(tmp_path: Path) -> None:
    payload = {
        "questions": [
            {
                "id": "goal",
                "prompt": "What should I optimize for?",
                "context": "\n".join(f"- Fact {i}: the build takes {i * 7} s" for i in range(12)),
                "options": [
                    {"value": f"o{i}", "label": f"Option {i}", "description": "what it means"}
                    for i in range(4)
                ],
            }
        ]
    }
    async with asking(tmp_path, 40, 12, payload) as term:
        screen = await term.wait_for("Option 0")
        assert "What should I optimize for?" in screen
        assert "› 1. ( ) Option 0" in screen and "PgUp/PgDn" in screen
        assert all(len(line) <= 40 for line in screen.splitlines())
        await term.keys("End")
        await term.wait_for("Fact 11")
        await term.keys("PageUp")
        await term.wait_for(lambda text: "Fact 11" not in text)
        await term.keys("Home")
        screen = await term.wait_for("rows 1-")
        assert "What should I optimize for?" in screen
        await term.keys("C-c", "C-c")
        await term.wait_for(lambda text: "Option 0" not in text)


async def test_focus_is_shown_in_the_demo(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = f"{COMMAND} demo --settings {settings}"
    with trio.fail_after(60):
        async with pane(tmp_path, command, 100, 30) as term:
            screen = await term.wait_for("keys answer here")
            assert "keys: questions" in screen
            await term.keys("M-q")
            screen = await term.wait_for("Alt+Q to answer")
            assert "keys: editor" in screen
            await term.literal("2")  # goes to the editor, not to the questions
            screen = await term.wait_for("> 2")
            assert "Review your answers" not in screen
            await term.keys("C-u", "C-d")


async def test_the_demo_editor_draws_text_after_emoji_where_it_belongs_at_40x12(
    tmp_path: Path,
) -> None:
    """The host's own input editor (a prompt_toolkit buffer) draws emoji as the form does.
    Typed ``ab👩‍💻cd``, then ``XYZ``: tmux drew the joined picture in two cells where
    prompt_toolkit counted four, so ``XYZ`` landed two cells away from ``cd``."""
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = f"{COMMAND} demo --settings {settings}"
    with trio.fail_after(60):
        async with pane(tmp_path, command, 40, 12) as term:
            await term.wait_for("keys answer here")
            await term.keys("M-q")
            screen = await term.wait_for("Alt+Q to answer")
            row = next(i for i, line in enumerate(screen.splitlines()) if line.startswith("> "))
            await term.literal("ab👩‍💻cd")
            await wait_cursor(term, (2 + 2 + 4 + 2, row))
            await term.literal("XYZ")
            await wait_cursor(term, (2 + 2 + 4 + 2 + 3, row))
            assert (await term.screen()).splitlines()[row].rstrip() == "> ab👩💻cdXYZ"
            await term.keys("C-u", "C-d")


async def test_a_resize_after_end_keeps_the_highlighted_row_in_view(tmp_path: Path) -> None:
    """``End`` at 100x20 shows the last rows (the highlighted one among them); the window then
    shrinks to 40x12: the highlighted row is still on screen, not left above a stale scroll."""
    options = [
        {"value": f"o{i}", "label": f"Choice {i}", "description": "why " * i} for i in range(11)
    ]
    payload = {"questions": [{"id": "many", "prompt": "Which one?", "options": options}]}
    async with asking(tmp_path, lines=20, payload=payload) as term:
        await term.wait_for("Which one?")
        await term.keys(*["Down"] * 9)
        await term.wait_for("› 10. ( ) Choice 9")
        await term.keys("End")
        # The last row on screen proves ``End`` was taken at 100x20 (``↑`` is there before it
        # already): a resize that overtook it would test ``End`` at 40x12 instead.
        await term.wait_for("12. ( ) Type your own")
        await term.tmux("resize-window", "-t", "ask", "-x", "40", "-y", "12")
        await term.wait_for(lambda text: "↓" in text)  # the 40x12 layout
        with trio.fail_after(5):
            await term.wait_for("› 10. ( ) Choice 9")


async def answer_goal_and_first_tone(
    tmp_path: Path, goal: str, payload: dict | None = None
) -> dict[str, Any]:
    """Run ``ask`` on ``payload`` (default ``PAYLOAD``): the goal option ``goal``, the first
    tone, submit on the review; the printed result."""
    async with asking(tmp_path, payload=payload) as term:
        await term.wait_for("What should I optimize for?")
        await term.keys(goal)
        await term.wait_for("Which tones fit?")
        await term.keys("Space", "Enter")
        await term.wait_for("Review your answers")
        await term.keys("1", "1")
        await term.finished()
    result: dict[str, Any] = json.loads((tmp_path / "out.json").read_text())
    return result


async def test_a_background_payload_is_still_shown_and_answered(tmp_path: Path) -> None:
    """``ask`` is one call on a terminal: ``background: true`` still opens the form, and the
    answer (not a queued receipt for a queue that ends with the command) is printed."""
    payload = {**PAYLOAD, "background": True}
    result = await answer_goal_and_first_tone(tmp_path, "2", payload)
    assert result["details"]["answers"]["goal"]["values"] == ["size"]
    assert result["details"]["answers"]["tone"]["values"] == ["formal"]


async def test_the_background_only_mode_still_shows_the_form(tmp_path: Path) -> None:
    """A settings file in the background-only question mode (``/ask-mode`` in the demo saves
    it) does not turn ``ask``'s one call into a receipt: the form is shown and answered, and
    the file keeps its mode."""
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps({"schemaVersion": 6, "behaviour": {"questionMode": "background-only"}})
    )
    result = await answer_goal_and_first_tone(tmp_path, "1")
    assert result["details"]["answers"]["goal"]["values"] == ["speed"]
    assert json.loads(settings.read_text())["behaviour"]["questionMode"] == "background-only"


async def test_down_in_the_empty_editor_on_the_last_row_keeps_what_is_typed(
    tmp_path: Path,
) -> None:
    """In a real terminal at 30x10: Down in the empty ``Type your own`` editor (the last row)
    leaves the editor open with the cursor in it, and the letters typed next are the answer."""
    async with asking(tmp_path, columns=30, lines=10) as term:
        await term.wait_for("What should I")
        await term.keys("3")
        screen = await term.wait_for("> Type answer")
        row = next(i for i, line in enumerate(screen.splitlines()) if "> Type answer" in line)
        col = screen.splitlines()[row].index("> Type answer")
        await wait_cursor(term, (col + 2, row))
        await term.keys("Down")
        await term.literal("tiny")
        await term.wait_for("> tiny")
        await wait_cursor(term, (col + 6, row))
        await term.keys("Enter")
        await term.wait_for("Which tones")
        await term.keys("Space", "Enter")
        await term.wait_for("Review")
        await term.keys("1", "1")
        await term.finished()
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["details"]["answers"]["goal"]["customText"] == "tiny"
