"""Alt+<key> in the form, typed as a terminal sends it: Esc followed by the key, in one write.

Before, the form read those two bytes as Esc (cancel the questions, close the editor, close
the settings overlay) and then the key (select an option, ...). Every test types through a
pipe input into the real ``ask`` application, as ``tests/test_ui_keys.py`` does.
"""

from __future__ import annotations

from pathlib import Path

from pi_agent_ask.persistence.keys import from_prompt_toolkit
from pi_agent_ask.persistence.settings import Config, Keymaps, MainKeymap
from tests.test_ui_keys import CTRL_C, ENTER, ESC, GOAL, TONE, answers, asking

ALT_Q = "\x1bq"
ALT_2 = "\x1b2"
ALT_X = "\x1bx"
ALT_UP = "\x1b[1;3A"


async def test_alt_q_on_a_clean_form_does_not_cancel_it(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send(ALT_Q)  # read as Esc, it cancelled the clean form at once
        await ask.wait("Alt+Q does nothing here: the form has the keys.")
        assert not ask.done.is_set()
        ask.send("1")  # the next command clears the notice
        await ask.wait("Which tones fit?")
        assert "Alt+Q does nothing here" not in ask.term.text()
        ask.send(ALT_UP)  # xterm's Alt+Up: Esc then Up
        await ask.wait("Alt+Up does nothing here.")
        assert "Press Esc again" not in ask.term.text()
        ask.send("1", ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["cancelled"] is False
    assert answers(result)["goal"]["values"] == ["speed"]
    assert answers(result)["tone"]["values"] == ["formal"]


async def test_alt_with_a_digit_neither_cancels_nor_selects(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("1")
        await ask.wait("Which tones fit?")
        ask.send(ALT_2)  # read as Esc then 2: the dirty warning armed, then Casual toggled
        await ask.wait("Alt+2 does nothing here.")
        text = ask.term.text()
        assert "Press Esc again" not in text
        assert "[ ] Casual" in text
        ask.send(ESC)  # a lone Esc still means Esc, at once
        await ask.wait("Unsaved answers will be lost. Press Esc again to cancel the questions.")
        ask.send(ESC)
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True


async def test_alt_in_an_editor_keeps_it_open(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send("Wr")
        await ask.wait("> Wr")
        ask.send(ALT_X)  # read as Esc then x: the editor saved and closed, the x lost
        await ask.wait("Alt+X does nothing here.")
        ask.send("y")
        await ask.wait("> Wry")
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "Wry"


async def test_alt_in_the_settings_overlay_neither_closes_it_nor_reaches_the_form(
    tmp_path: Path,
) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("?")
        await ask.wait("Live settings")
        ask.send(ALT_2)  # read as Esc then 2: the overlay closed and Size was selected
        ask.send(ESC)
        await ask.wait_gone("Live settings")
        assert "( ) Size" in ask.term.text()
        ask.send(CTRL_C)
        status, result = await ask.finished()
    assert status == 1
    assert answers(result) == {}


async def test_a_configured_alt_key_still_acts(tmp_path: Path) -> None:
    config = Config(keymaps=Keymaps(main=MainKeymap(option_note=("alt+n",))))
    async with asking(tmp_path, GOAL, config=config) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("\x1bn")
        await ask.wait("Note: Add a note...")
        ask.send("fast", ENTER)
        await ask.wait("Note: fast")
        ask.send(CTRL_C)
        await ask.wait("Press Ctrl+C again")
        ask.send(CTRL_C)
        await ask.finished()


def test_prompt_toolkit_key_names_read_back_as_key_ids() -> None:
    assert from_prompt_toolkit("q") == "q"
    assert from_prompt_toolkit("Q") == "shift+q"
    assert from_prompt_toolkit("up") == "up"
    assert from_prompt_toolkit("c-m") == "enter"
    assert from_prompt_toolkit("c-x") == "ctrl+x"
    assert from_prompt_toolkit("s-tab") == "shift+tab"
    assert from_prompt_toolkit("c-s-left") == "ctrl+shift+left"
    assert from_prompt_toolkit(" ") == "space"
    assert from_prompt_toolkit("é") == "é"
    assert from_prompt_toolkit("<sigint>") is None


async def test_a_paste_right_after_esc_is_kept(tmp_path: Path) -> None:
    """Esc and a paste in one read are no Alt key: the paste is processed as a paste (it
    stays in the editor), not taken as the key after Alt and lost."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send(ESC + "\x1b[200~pasted text\x1b[201~")
        await ask.wait("> pasted text")
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "pasted text"
