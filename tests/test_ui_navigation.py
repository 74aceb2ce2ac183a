"""Reaching everything from the keyboard: options past 9 by two digits, the progress marker
and the key to the next unanswered question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_ui_typing import ENTER, GOAL, asking

TAB = "\t"
DOWN = "\x1b[B"
UP = "\x1b[A"

TWELVE = {
    "id": "pick",
    "label": "Pick",
    "prompt": "Which of the twelve?",
    "options": [{"value": f"v{i}", "label": f"Choice {i}"} for i in range(1, 13)],
}
TONE = {
    "id": "tone",
    "label": "Tone",
    "prompt": "Which tone?",
    "options": [{"value": "dry", "label": "Dry"}, {"value": "warm", "label": "Warm"}],
}


async def test_two_digits_pick_an_option_past_nine(tmp_path: Path) -> None:
    async with asking(tmp_path, TWELVE, lines=40) as ask:
        await ask.wait("Which of the twelve?")
        ask.send("1", "2")
        await ask.wait("Review your answers")
        assert "→ Choice 12" in ask.term.text()
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["pick"]["values"] == ["v12"]


async def test_a_single_digit_still_picks_on_a_long_question(tmp_path: Path) -> None:
    async with asking(tmp_path, TWELVE, lines=40) as ask:
        await ask.wait("Which of the twelve?")
        ask.send("3")  # no second digit follows: after the pause, option 3
        await ask.wait("Review your answers")
        assert "→ Choice 3" in ask.term.text()
        ask.send("1", "1")
        await ask.finished()


async def test_two_digits_past_the_last_row_pick_nothing(tmp_path: Path) -> None:
    """``1`` ``5`` on thirteen rows is no row: the form says so and changes nothing. It is not
    ``1`` (which answers and moves on) and then ``5`` on the next question."""
    async with asking(tmp_path, TWELVE, TONE, lines=40) as ask:
        await ask.wait("Which of the twelve?")
        ask.send("1", "5")
        await ask.wait("No row 15: this question's rows are 1-13.")
        screen = ask.term.text()
        assert "0/2 answered" in screen and "Which of the twelve?" in screen
        ask.send("1")  # the next digit held: that notice was of the key before
        await ask.wait("1 typed")
        assert "No row 15" not in ask.term.text()
        ask.send("\x1b", "\x03")
        status, _result = await ask.finished()
    assert status != 0


async def test_a_held_digit_is_shown_and_enter_or_esc_decides_it(tmp_path: Path) -> None:
    """A ``1`` waiting for a second digit says in the hints what the next key does; Esc
    clears it (nothing picked), Enter picks row 1 at once and is not also the next
    question's Enter."""
    async with asking(tmp_path, TWELVE, TONE, lines=40) as ask:
        await ask.wait("Which of the twelve?")
        ask.send("1")
        await ask.wait("1 typed · 0-3 rows 10-13 · Enter row 1 · Esc clear")
        ask.send("\x1b")
        await ask.wait("1-13 select")
        assert "0/2 answered" in ask.term.text()
        for columns, lines in ((80, 24), (40, 12)):
            ask.term.resize(columns, lines)
            ask.send(DOWN, UP)  # keys: drawn again at the new size, the marker on row 1
            await ask.term.wait_for(
                lambda term: "Pick" in term.rows()[0] and "›  1. ( ) Choice 1" in term.text()
            )
            await held_digit_leaves_the_marker(ask)
        ask.term.resize(100, 40)
        ask.send("1", ENTER, TAB)
        await ask.wait("Review your answers")
        assert "1/2 answered" in ask.term.text()
        ask.send("1", "1")  # Submit with a question unanswered: twice
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["pick"]["values"] == ["v1"]
    assert "tone" not in result["details"]["answers"]


async def held_digit_leaves_the_marker(ask: Any) -> None:
    """A ``1`` held for a second digit changes the hints' rows only: prompt_toolkit draws a
    held key in the cursor's cell, which was the focus row's first, over the ``›`` marker; the
    cursor stands on the hints' own ``1`` then, and goes back once the digit is decided."""
    before = ask.term.rows()
    cursor = ask.term.cursor()
    assert before[cursor[0]].startswith("›  1. ( ) Choice 1"), (cursor, before)
    ask.send("1")
    await ask.wait("1 typed")
    held = ask.term.rows()
    row = next(i for i, text in enumerate(held) if text.startswith("1 typed"))
    changed = [i for i, (old, new) in enumerate(zip(before, held, strict=True)) if old != new]
    assert changed and min(changed) >= row - 1, (before, held)  # the hint rows (and a blank)
    assert ask.term.cursor() == (row, 0)
    ask.send("\x1b")  # cleared
    await ask.wait_gone("1 typed")
    assert ask.term.rows() == before and ask.term.cursor() == cursor


async def test_with_the_hints_off_a_held_digit_shows_its_hints_over_no_marker(
    tmp_path: Path,
) -> None:
    """``showFooterHints: false``: the held ``1`` had no hints to stand on, so the cursor
    stayed on the focus row and prompt_toolkit drew the digit over the ``›`` marker, the one
    sign a digit waited. Held, it shows its own hints (only while it waits), the cursor on
    their digit, and every other row drawn as before, at a tall and a short size."""
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"showFooterHints": False}}))
    async with asking(tmp_path, TWELVE, TONE, columns=80, lines=24) as ask:
        await ask.wait("Which of the twelve?")
        for columns, lines in ((80, 24), (40, 12)):
            ask.term.resize(columns, lines)
            ask.send(DOWN, UP)  # keys: drawn again at the new size, the marker on row 1
            await ask.term.wait_for(
                lambda term: "Pick" in term.rows()[0] and "›  1. ( ) Choice 1" in term.text()
            )
            before, cursor = ask.term.rows(), ask.term.cursor()
            assert "select" not in ask.term.text()  # no hints
            ask.send("1")
            await ask.wait("1 typed · 0-3 rows 10-13 · Enter row 1")
            held = ask.term.rows()
            row = next(i for i, text in enumerate(held) if text.startswith("1 typed"))
            assert ask.term.cursor() == (row, 0)
            assert held[cursor[0]] == before[cursor[0]]  # the marker's row, marker and all
            if lines > 18:  # tall: the hints take blank rows; short, the body gives up one
                assert held[: row - 1] == before[: row - 1]
            ask.send("\x1b")  # cleared: the hints go with it
            await ask.wait_gone("1 typed")
            assert ask.term.rows() == before and ask.term.cursor() == cursor
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_progress_marker_and_next_unanswered_key(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE, TWELVE, lines=40) as ask:
        await ask.wait("0/3 answered · U next unanswered")
        ask.send("U")  # from Goal: the next unanswered is Tone
        await ask.wait("Which tone?")
        ask.send("1")  # answers Tone and moves on to the third question
        await ask.wait("1/3 answered")
        await ask.wait("Which of the twelve?")
        ask.send("U")  # from there it wraps round to Goal, skipping the answered Tone
        await ask.wait("What should I optimize for?")
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_progress_shows_when_the_tabs_fill_the_row(tmp_path: Path) -> None:
    """Forty questions and no title: the tab bar takes the whole row, and the progress (the
    one count of what is left) gets a row of its own rather than vanishing."""
    questions = [{**TONE, "id": f"q{i}", "label": f"Q{i}"} for i in range(40)]
    async with asking(tmp_path, *questions, columns=80, lines=30) as ask:
        await ask.wait("Which tone?")
        await ask.wait("0/40 answered · U next unanswered")
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_at_completion_is_a_list_to_move_through(tmp_path: Path) -> None:
    import trio

    from pi_agent_ask.ui.testing import asking as run_asking

    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    for name in ("alpha.md", "beta.md", "gamma.md"):
        (project / "docs" / name).write_text("")
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with run_asking({"questions": [GOAL]}, settings, cwd=project) as ask:
            await ask.wait("What should I optimize for?")
            ask.send("3")
            await ask.wait("> Type answer...")
            assert "Tab complete @path" in ask.term.text()  # the footer says it exists
            ask.send("see @docs/", "\t")
            await ask.wait("3 matches")
            ask.send("\t")  # the first candidate goes into the text and is highlighted
            await ask.wait("> see @docs/alpha.md")
            assert "› alpha.md" in ask.term.text()
            ask.send("\x1b[B", "\x1b[B")  # Down twice: gamma
            await ask.wait("> see @docs/gamma.md")
            ask.send("\x1b[A")  # Up: beta
            await ask.wait("> see @docs/beta.md")
            assert "› beta.md" in ask.term.text()
            ask.send(" ok")  # typing closes the list
            await ask.wait_gone("3 matches")
            ask.send("\r")
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["customText"] == "see @docs/beta.md ok"


async def test_new_line_key_and_external_editor(tmp_path: Path, monkeypatch: object) -> None:
    import os
    import stat

    import trio

    from pi_agent_ask.ui.testing import asking as run_asking

    script = tmp_path / "fake-editor"
    # The "editor": appends a line to the file it is given, as a person would type it.
    script.write_text('#!/bin/sh\nprintf "%s\\nfrom the editor\\n" "$(cat "$1")" > "$1"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VISUAL", str(script))  # type: ignore[attr-defined]
    monkeypatch.setenv("EDITOR", str(script))  # type: ignore[attr-defined]
    assert os.environ["VISUAL"] == str(script)
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with run_asking({"questions": [GOAL]}, settings, lines=40) as ask:
            await ask.wait("What should I optimize for?")
            ask.send("3")
            await ask.wait("> Type answer...")
            assert "Alt+Enter new line" in ask.term.text()
            ask.send("first", "\x1b\r", "second")  # Alt+Enter breaks the line
            await ask.wait("second")
            ask.send("\x07")  # Ctrl+G: the external editor
            await ask.wait("from the editor")
            ask.send("\r")
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["customText"] == "first\nsecond\nfrom the editor"


async def test_an_external_editor_that_fails_is_named_and_the_text_stays(
    tmp_path: Path, monkeypatch: object
) -> None:
    """``$EDITOR`` set but not runnable, or exiting with an error: the notice says which and
    why (it said "No external editor: set $VISUAL or $EDITOR.", set as it was)."""
    import stat

    import trio

    from pi_agent_ask.ui.testing import asking as run_asking

    failing = tmp_path / "failing-editor"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    missing = tmp_path / "no-such-editor"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    for editor, said in (
        (missing, f"Could not run {missing}: No such file or directory; the text is unchanged."),
        (failing, f"{failing} exited with status 3; the text is unchanged."),
    ):
        monkeypatch.setenv("VISUAL", str(editor))  # type: ignore[attr-defined]
        with trio.fail_after(20):
            async with run_asking({"questions": [GOAL]}, settings, lines=40) as ask:
                await ask.wait("What should I optimize for?")
                ask.send("3")
                await ask.wait("> Type answer...")
                ask.send("keep me")
                await ask.wait("> keep me")
                ask.send("\x07")  # Ctrl+G
                # The notice wraps between words under the editor: read its rows as one text.
                await ask.term.wait_for(
                    lambda term, said=said: said in " ".join(row.strip() for row in term.rows())
                )
                ask.send("\r")
                await ask.wait("Review your answers")
                ask.send("1", "1")
                status, result = await ask.finished()
        assert status == 0
        assert result["details"]["answers"]["goal"]["customText"] == "keep me"


async def test_down_on_the_last_row_keeps_the_empty_editor_for_what_is_typed(
    tmp_path: Path,
) -> None:
    """Down in the empty ``Type your own`` editor on the last row has nowhere to go: the
    editor stays open, and the letters typed right after it land in it (they were dropped in
    navigation, where some of them are commands)."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")  # Type your own, the last row: its editor opens
        await ask.wait("> Type answer...")
        ask.send("\x1b[B", "fast enough")  # Down, then text
        await ask.wait("> fast enough")
        ask.send("\r")
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["customText"] == "fast enough"


async def test_up_on_the_first_row_keeps_the_empty_note_editor(tmp_path: Path) -> None:
    """The same at the top: Up in an empty option note on the first row keeps the note open,
    and what is typed next is the note (``t`` and ``n`` there are no commands)."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("n")  # a note on Speed, the first row
        await ask.wait("Note: Add a note...")
        ask.send("\x1b[A", "tested on ci")
        await ask.wait("Note: tested on ci")
        ask.send("\r")  # save the note
        await ask.wait("Enter select")  # the note is saved and closed
        ask.send("1")
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    goal = result["details"]["answers"]["goal"]
    assert goal["values"] == ["speed"]
    assert "tested on ci" in json.dumps(goal)
