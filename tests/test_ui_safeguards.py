"""Cancel safeguards as a person meets them: a dirty form is never discarded by one key, and
the warning that says so is on the screen."""

from __future__ import annotations

from pathlib import Path

from tests.test_ui_typing import GOAL, asking

ENTER = "\r"
ESC = "\x1b"
DOWN = "\x1b[B"
WARNING = "Unsaved answers will be lost."

MANY = {
    "id": "many",
    "label": "Many",
    "prompt": "Which of these should ship?",
    "type": "multi",
    "options": [{"value": f"o{i}", "label": f"Choice {i}"} for i in range(10)],
}


async def test_enter_on_review_cancel_asks_again_for_a_dirty_form(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("2")
        await ask.wait("Review your answers")
        ask.send(DOWN)  # to Cancel
        await ask.wait("› 2. Cancel")
        ask.send(ENTER)
        await ask.wait(WARNING)
        assert not ask.done.is_set()
        ask.send(ENTER)  # the same action again: cancelled
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True


async def test_two_after_the_dirty_cancel_warning_cancels_as_it_says(tmp_path: Path) -> None:
    """The warning says "Choose Cancel again (Enter, 2 or Esc)": with double-press review
    shortcuts on, ``2`` is that choice, not the first of two more presses."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("2")
        await ask.wait("Review your answers")
        ask.send(DOWN)
        await ask.wait("› 2. Cancel")
        ask.send(ENTER)
        await ask.wait("Choose Cancel again (Enter, 2 or Esc)")
        ask.send("2")
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True


async def test_enter_on_review_cancel_of_a_clean_form_cancels_at_once(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("\t")  # to Review without answering
        await ask.wait("Review your answers")
        ask.send(DOWN, ENTER)
        status, _result = await ask.finished()
    assert status == 1


async def test_the_dirty_warning_is_visible_on_a_short_screen(tmp_path: Path) -> None:
    async with asking(tmp_path, MANY, columns=60, lines=12) as ask:
        await ask.wait("Choice 0")
        ask.send(*[DOWN] * 8, " ")
        await ask.wait("[x] Choice 8")
        ask.send(ESC)
        await ask.wait(WARNING)
        assert "[x] Choice 8" in ask.term.text()  # the focused row stays too
        ask.send(ESC)
        status, _result = await ask.finished()
    assert status == 1


async def test_a_second_click_on_an_armed_review_action_hits_it_in_the_panel(
    tmp_path: Path,
) -> None:
    """The panel is anchored above the editor: arming Submit must not move it (the hint's rows
    are reserved), so the second click at the same cell submits."""
    from pi_agent_ask.ui.testing import sgr_click
    from tests.test_shell import REGION_PROMPT, demo

    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send("1")
        await sh.wait("Review your answers")
        row, column = sh.term.find("1. Submit")
        sh.send(sgr_click(column + 4, row))
        await sh.wait("Press 1 again")
        assert sh.term.find("1. Submit") == (row, column)
        sh.send(sgr_click(column + 4, row))
        await sh.wait("Deployment plan · ✓ Answers received")
