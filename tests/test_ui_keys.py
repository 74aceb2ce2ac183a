"""The form driven by keys through a pipe input, with the real bindings and the real runtime.

Every test runs ``run_ask`` (the ``ask`` command's body) against a virtual VT100 terminal: keys
go in as the bytes a terminal sends, the screen is read from the output the application wrote.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.clipboard import ClipboardEmpty, ClipboardImage, ClipboardResult
from pi_agent_ask.persistence import settings_list
from pi_agent_ask.persistence.settings import (
    Behaviour,
    Config,
    EditorKeymap,
    Keymaps,
    load_settings,
    save_settings,
)
from pi_agent_ask.ui.commands import run_settings
from pi_agent_ask.ui.testing import Asking, VirtualTerminal
from pi_agent_ask.ui.testing import asking as run_asking

ESC = "\x1b"
ENTER = "\r"
TAB = "\t"
DOWN = "\x1b[B"
UP = "\x1b[A"
CTRL_C = "\x03"
CTRL_K = "\x0b"
CTRL_V = "\x16"
CTRL_ALT_D = "\x1b\x04"
BACKSPACE = "\x7f"

GOAL = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "options": [
        {"value": "speed", "label": "Speed", "description": "Fastest builds", "recommended": True},
        {"value": "size", "label": "Size"},
    ],
}
TONE = {
    "id": "tone",
    "label": "Tone",
    "prompt": "Which tones fit?",
    "type": "multi",
    "options": [
        {"value": "formal", "label": "Formal"},
        {"value": "casual", "label": "Casual"},
        {"value": "dry", "label": "Dry"},
    ],
}


@asynccontextmanager
async def asking(
    tmp_path: Path,
    *questions: dict[str, Any],
    config: Config | None = None,
    columns: int = 100,
    lines: int = 30,
    clipboard: Any = None,
    **extra: Any,
) -> AsyncIterator[Asking]:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    if config is not None:
        save_settings(settings, config)
    arguments = {"questions": list(questions), **extra}
    with trio.fail_after(20):
        async with run_asking(
            arguments, settings, columns=columns, lines=lines, clipboard=clipboard
        ) as handle:
            yield handle


def overlay_text(term: VirtualTerminal) -> str:
    """The overlay's rows (inside its border) joined without separators, so text the overlay
    wrapped (a long path) reads as one string."""
    inner = []
    for row in term.rows():
        if row.count("│") >= 2:
            inner.append(row[row.index("│") + 1 : row.rindex("│")].strip())
    return "".join(inner)


def answers(result: dict[str, Any]) -> dict[str, Any]:
    return result["details"]["answers"]


async def test_single_select_with_a_number_then_double_press_submit(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        assert "› 1. ( ) Speed (recommended) | Fastest builds" in ask.term.text()
        ask.send("2")
        await ask.wait("Review your answers")
        assert "→ Size" in ask.term.text()
        ask.send("1")
        await ask.wait("Press 1 again (or click Submit again) to submit the answers.")
        assert ask.done.is_set() is False
        ask.send("1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["cancelled"] is False
    assert answers(result)["goal"] == {"values": ["size"], "labels": ["Size"], "indices": [2]}
    # The full-screen buffer was left: the terminal is back to normal.
    assert ask.term.raw.endswith("\x1b[?1049l") or "\x1b[?1049l" in ask.term.chunks[-1]


async def test_digits_are_hinted_as_far_as_the_rows_go_and_one_past_them_says_so(
    tmp_path: Path,
) -> None:
    """The hint names the digits this question has (its options and ``Type your own``); a
    digit past them selects nothing and says which rows there are, as any other key that does
    nothing on a question says what it would take."""
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("1-3 select · ")
        assert "1-9" not in ask.term.text()
        ask.send("7")
        await ask.wait("No row 7: this question's rows are 1-3.")
        assert "( ) Speed" in ask.term.text() and "( ) Size" in ask.term.text()
        ask.send("2")  # the next key clears the notice; Size, and on to the next question
        await ask.wait("1-4 toggle · ")
        assert "No row" not in ask.term.text()
        ask.send("3", ENTER)
        await ask.wait("Review your answers")
        ask.send(ENTER)
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["values"] == ["size"]
    assert answers(result)["tone"]["values"] == ["dry"]


async def test_multi_select_with_space_and_enter(tmp_path: Path) -> None:
    async with asking(tmp_path, TONE) as ask:
        await ask.wait("Which tones fit?")
        ask.send(" ")
        await ask.wait("[x] Formal")
        ask.send(DOWN, DOWN, " ")
        await ask.wait("[x] Dry")
        assert "[ ] Casual" in ask.term.text()
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send(ENTER)  # Enter fires the highlighted Submit at once
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["tone"]["values"] == ["formal", "dry"]


async def test_custom_answer_typed_in_the_inline_editor(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        # The cursor is in the editor, right after its prompt.
        row, col = ask.term.find("> Type answer...")
        assert ask.term.cursor() == (row, col + 2)
        ask.send("Something elsx", BACKSPACE, "e")
        await ask.wait("> Something else")
        ask.send(ENTER)  # single-select: saves, selects and advances
        await ask.wait("Which tones fit?")
        ask.send("4")
        await ask.wait("> Type answer...")
        ask.send("Wry", ENTER)  # multi-select: stays on the tab, keeps other choices
        await ask.wait("[x] Type your own")
        ask.send("1", ENTER)
        await ask.wait("Review your answers")
        assert "→ (wrote) Something else" in ask.term.text()
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "Something else"
    assert answers(result)["goal"]["values"] == ["Something else"]
    assert answers(result)["tone"]["values"] == ["formal", "Wry"]


async def test_option_and_question_notes(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send(DOWN, "n")
        await ask.wait("Note: Add a note...")
        ask.send("too big", ENTER)
        await ask.wait("Note: too big")
        ask.send("N")
        await ask.wait("Question note: Add a note...")
        ask.send("ask ops", ENTER)
        await ask.wait("Question note: ask ops")
        ask.send("1")
        await ask.wait("Review your answers")
        text = ask.term.text()
        assert "note: ask ops" in text
        assert "Size (not selected) note: too big" in text
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["note"] == "ask ops"
    assert answers(result)["goal"]["optionNotes"] == {"size": "too big"}


async def test_keys_typed_before_the_editor_appears_land_in_it(tmp_path: Path) -> None:
    """``n`` and the note text in one burst: the text waits for the editor's snapshot."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("nquick note" + ENTER + "2")
        await ask.wait("Review your answers")
        assert "Speed (not selected) note: quick note" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["optionNotes"] == {"speed": "quick note"}


async def test_shift_d_skips_in_navigation_but_is_text_in_editors(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("N")
        await ask.wait("Question note: Add a note...")
        ask.send("D", ENTER)
        await ask.wait("Question note: D")
        ask.send("D")
        await ask.wait("Which tones fit?")
        ask.send("D")
        await ask.wait("Review your answers")
        text = ask.term.text()
        assert "– Goal: What should I optimize for?" in text
        assert text.count("→ (skipped)") == 2
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["skippedQuestionIds"] == ["goal", "tone"]
    assert answers(result) == {}


async def test_t_changes_the_question_type(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("( ) Speed")
        ask.send("t")
        await ask.wait("[ ] Speed")
        assert "Question type changed: single-select → multi-select." in ask.term.text()
        ask.send("1", "2", ENTER)
        await ask.wait("Review your answers")
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["values"] == ["speed", "size"]
    assert result["details"]["questions"][0]["presentedType"] == "multi"


async def test_escape_cancel_needs_confirmation_when_dirty(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("1")
        await ask.wait("Which tones fit?")
        ask.send(ESC)
        await ask.wait("Unsaved answers will be lost. Press Esc again to cancel the questions.")
        assert not ask.done.is_set()
        ask.send(ESC)
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True


async def test_escape_closes_an_editor_without_cancelling(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send("draft")
        await ask.wait("> draft")
        ask.send(ESC)
        await ask.wait("(•) Type your own")
        assert "> draft" not in ask.term.text()
        assert "draft" in ask.term.text()  # saved, under its row
        ask.send(CTRL_C)
        await ask.wait("Press Ctrl+C again to dismiss the questions.")
        ask.send(CTRL_C)
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True


async def test_ctrl_c_dismisses_a_clean_form_at_once(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send(CTRL_C)
        status, result = await ask.finished()
    assert status == 1
    assert result["details"]["cancelled"] is True
    assert answers(result) == {}


async def test_question_mark_opens_settings_and_they_apply_live(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send(DOWN)  # the form keeps this cursor while settings are open
        await ask.wait("› 2. ( ) Size")
        assert "Ctrl+C dismiss" in ask.term.text()
        ask.send("?")
        await ask.wait("Live settings")
        text = ask.term.text()
        assert "pi-agent-ask" in text
        assert "Defaults for future asks" in text
        assert "Edit this config file to customize keymaps and notifications:" in text
        assert str(ask.settings.absolute()) in overlay_text(ask.term)
        assert "Esc / Ctrl+C / ? to close" in text
        # Move to "Show footer hints" and turn it off: saved at once, applied to the form.
        ask.send(DOWN, DOWN, DOWN, DOWN)
        await ask.term.wait_for(lambda term: "› Show footer hints" in term.text())
        ask.send(ENTER)
        await ask.term.wait_for(
            lambda term: "[off]" in term.rows()[term.find("Show footer hints")[0]]
        )
        ask.send(ESC)
        await ask.wait_gone("Live settings")
        assert "› 2. ( ) Size" in ask.term.text()
        assert "Ctrl+C dismiss" not in ask.term.text()
        ask.send(CTRL_C)
        await ask.finished()
    saved = json.loads(ask.settings.read_text())
    assert saved["behaviour"]["showFooterHints"] is False
    assert load_settings(ask.settings).config.behaviour.show_footer_hints is False


async def test_settings_save_failure_reverts_and_shows_the_error(tmp_path: Path) -> None:
    # A settings path whose parent is a regular file: every save fails.
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "extensions").write_text("not a directory")
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("?")
        await ask.wait("Live settings")
        row = ask.term.find("Auto-submit when answered without notes")[0]
        assert "[off]" in ask.term.rows()[row]
        ask.send(ENTER)
        # The load notice already says the file cannot be written; the failed save says it again.
        await ask.term.wait_for(lambda term: term.text().count("Unable to save ask config at") == 2)
        assert "[off]" in ask.term.rows()[ask.term.find("Auto-submit when answered")[0]]
        ask.send("?")  # ? closes the overlay too
        await ask.wait_gone("Live settings")
        ask.send(CTRL_C)
        await ask.finished()


async def turn_off_double_press_on_review(ask: Asking) -> None:
    """Answer GOAL, then on Review open the settings and turn double-press off (the overlay
    shows ``[off]``; it stays open)."""
    await ask.wait("What should I optimize for?")
    ask.send("1")
    await ask.wait("Review your answers")
    ask.send("?")
    await ask.wait("Live settings")
    ask.send(DOWN, DOWN)
    await ask.term.wait_for(lambda term: "› Double-press review shortcuts" in term.text())
    ask.send(" ")
    await ask.term.wait_for(
        lambda term: "[off]" in term.rows()[term.find("Double-press review")[0]]
    )


async def test_live_double_press_setting_applies_to_the_open_form(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await turn_off_double_press_on_review(ask)
        ask.send(ESC)
        await ask.wait_gone("Live settings")
        ask.send("1")  # one press is enough now
        status, _result = await ask.finished()
    assert status == 0


async def test_custom_keymap_binds_editor_submit_to_ctrl_k(tmp_path: Path) -> None:
    config = Config(
        behaviour=Behaviour(show_footer_hints=True),
        keymaps=Keymaps(editor=EditorKeymap(submit=("ctrl+k",))),
    )
    async with asking(tmp_path, GOAL, config=config) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        assert "Ctrl+K submit" in ask.term.text()
        ask.send("first", ENTER, "second")
        await ask.wait("second")  # Enter no longer submits: it is a line break
        assert "Review your answers" not in ask.term.text()
        ask.send(CTRL_K)
        await ask.wait("Review your answers")
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "first\nsecond"


async def test_invalid_input_returns_status_2_without_showing_anything(tmp_path: Path) -> None:
    async with asking(tmp_path, {**GOAL, "options": []}) as ask:
        status, result = await ask.finished()
    assert status == 2
    assert result["details"]["error"]["kind"] == "invalid_input"
    assert ask.term.raw == ""
    async with asking(tmp_path, {"id": "x"}) as ask:
        status, result = await ask.finished()
    assert status == 2
    assert result["isError"] is True


async def test_empty_editor_arrows_navigate_and_a_non_empty_one_keeps_them(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("What should I optimize for?")
        ask.send(DOWN, DOWN)  # landing on the empty custom row opens its editor
        await ask.wait("> Type answer...")
        ask.send(UP)  # empty editor: Up closes it and moves
        await ask.wait("› 2. ( ) Size")
        assert "> Type answer..." not in ask.term.text()
        ask.send(DOWN)
        await ask.wait("> Type answer...")
        ask.send("ab")
        await ask.wait("> ab")
        ask.send("\x1b[D", "X", "?", TAB, UP)  # Left moves the cursor; ?, Tab and Up stay
        await ask.wait("> aX?b")
        assert "Live settings" not in ask.term.text()
        ask.send(ENTER)
        await ask.wait("Which tones fit?")
        ask.send(TAB)  # navigation: next tab
        await ask.wait("Review your answers")
        assert "→ (wrote) aX?b" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "aX?b"


async def test_up_and_down_move_by_the_rows_a_long_answer_wraps_into(tmp_path: Path) -> None:
    """At 40 columns a one-line answer wraps into three rows: Up and Down move between those
    rows (they moved between lines only, so nothing moved), keep the column a run of them
    started from, and on the first or last row move nothing, as on a line's."""
    text = "the deployment pipeline configuration needs a careful review first"
    async with asking(tmp_path, GOAL, columns=40, lines=12) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send(text)
        await ask.wait("careful review first")
        ask.send(UP, UP, UP, "^")  # three rows: the third Up stays on the first row
        await ask.wait(lambda term: "^" in term.text())
        ask.send(DOWN, "_")  # the column of the run, on the row below
        await ask.wait(lambda term: "_" in term.text())
        ask.send(DOWN, DOWN, DOWN, "$", ENTER)  # the last row is the last: Down stays there
        await ask.wait("Review your answers")
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    rows = ["the deployment pipeline", "configuration needs a", "careful review first"]
    assert " ".join(rows) == text
    # The cursor stood 20 cells into the last row (its end) and went up to 20 cells into
    # the first; "_" went 21 cells into the second (the column after "^": its last letter),
    # "$" 22 into the third (its end: the column reaches past it).
    assert answers(result)["goal"]["customText"] == (
        "the deployment pipel^ine configuration needs a_ careful review first$"
    )


async def run_settings_command(
    settings: Path, steps: list[tuple[str | Callable[[VirtualTerminal], bool], str]]
) -> tuple[int, VirtualTerminal]:
    """Run `pi-agent-ask settings`, sending each step's keys once its condition holds. Time
    stands still for the overlay: a slow machine never outlasts the reset confirmation."""
    term = VirtualTerminal(100, 40)
    with create_pipe_input() as pipe, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            outcome: list[int] = []

            async def run() -> None:
                outcome.append(
                    await run_settings(settings, input=pipe, output=term.output, clock=lambda: 0.0)
                )

            nursery.start_soon(run)
            for condition, keys in steps:
                await term.wait_for(condition)
                pipe.send_text(keys)
    return outcome[0], term


def row_says(label: str, value: str) -> Callable[[VirtualTerminal], bool]:
    def check(term: VirtualTerminal) -> bool:
        rows = [row for row in term.rows() if label in row]
        return bool(rows) and value in rows[0]

    return check


async def test_the_settings_command_toggles_and_closes(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    status, term = await run_settings_command(
        settings,
        [
            ("Live settings", DOWN * 3),
            (lambda term: "› Notifications" in term.text(), " "),
            (row_says("Notifications", "[off]"), ESC),
        ],
    )
    assert status == 0
    assert load_settings(settings).config.notifications.enabled is False
    assert "\x1b[?1049l" in term.raw  # the full-screen buffer was left


async def test_reset_needs_a_second_press(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    save_settings(settings, Config(behaviour=Behaviour(show_footer_hints=False)))
    status, _term = await run_settings_command(
        settings,
        [
            (row_says("Show footer hints", "[off]"), UP),  # wraps to the reset action
            (lambda term: "› Reset config to defaults" in term.text(), ENTER),
            (row_says("Reset config to defaults", "[confirm reset]"), ENTER),
            (row_says("Show footer hints", "[on]"), "?"),
        ],
    )
    assert status == 0
    assert load_settings(settings).config.behaviour.show_footer_hints is True


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(16))


async def test_clipboard_images_attach_to_the_open_editor(tmp_path: Path) -> None:
    reads: list[ClipboardResult] = [
        ClipboardImage("image/png", PNG),
        ClipboardImage("image/png", PNG),
        ClipboardEmpty(),
    ]

    async def clipboard() -> ClipboardResult:
        return reads.pop(0)

    async with asking(tmp_path, GOAL, clipboard=clipboard) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        # The editor shows the active paste shortcut; removal is offered once there are images.
        assert "Ctrl+V attach image" in ask.term.text()
        assert "remove last image" not in ask.term.text()
        ask.send(CTRL_V)
        await ask.wait("[1 image]")
        await ask.wait("remove last image")
        assert "Ctrl+Alt+D" in ask.term.text()
        ask.send(CTRL_V)
        await ask.wait("[2 images]")
        ask.send(CTRL_ALT_D)  # removes the last image
        await ask.wait_gone("[2 images]")
        assert "[1 image]" in ask.term.text()
        ask.send(CTRL_V)
        await ask.wait("No image in the clipboard.")
        assert "[1 image]" in ask.term.text()  # a failed read keeps what is there
        ask.send("caption")
        await ask.wait("> caption")
        assert "No image in the clipboard." not in ask.term.text()
        ask.send(ENTER)
        await ask.wait("Review your answers")
        assert "→ (wrote) caption [1 image]" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    answer = answers(result)["goal"]
    assert answer["customText"] == "caption"
    [image] = answer["customImages"]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == PNG


async def test_tab_completes_an_at_file_path_in_the_editor(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "design.md").write_text("")
    (project / "data.csv").write_text("")
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    arguments = {"questions": [GOAL]}
    with trio.fail_after(20):
        async with run_asking(arguments, settings, cwd=project) as ask:
            await ask.wait("What should I optimize for?")
            ask.send("3")
            await ask.wait("> Type answer...")
            ask.send("see @d", TAB)
            await ask.wait("2 matches")  # two candidates, listed under the editor
            assert "data.csv" in ask.term.text() and "docs/" in ask.term.text()
            ask.send("o", TAB)
            await ask.wait("> see @docs/")
            ask.send(TAB)
            await ask.wait("> see @docs/design.md")
            ask.send(ENTER)
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "see @docs/design.md"


async def test_closing_settings_waits_for_the_save_so_the_form_follows_what_it_showed(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # The overlay shows a toggled value at once and saves it in a worker thread. Closed while
    # that save was still on its way to the disk, it let the form go on with the old value:
    # one press of 1 on Review only armed the submit the person had just made single-press.
    disk = threading.Event()
    real_save = settings_list.save_command

    def slow_save(*args: Any) -> Any:
        disk.wait(10)  # a worker thread: this is the slow disk
        return real_save(*args)

    monkeypatch.setattr(settings_list, "save_command", slow_save)
    async with asking(tmp_path, GOAL) as ask:
        await turn_off_double_press_on_review(ask)
        ask.send("?")  # close (no escape-key delay), while the save waits for the disk
        await trio.testing.wait_all_tasks_blocked()
        assert "Live settings" in ask.term.text()  # still open: the save is not done
        disk.set()
        await ask.wait_gone("Live settings")
        ask.send("1")  # one press is enough now
        status, _result = await ask.finished()
    assert status == 0


async def test_typed_text_keeps_joiners_and_wide_spaces(tmp_path: Path) -> None:
    """A key is text when the terminal may show it as typed (``is_safe``), not only when
    Python calls it printable: the ZWJ of 👩‍💻 and an ideographic space (what a Japanese
    input method types for a space) were dropped from the answer."""
    typed = "👩\u200d💻\u3000ok\u00a0!"
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        for char in typed:
            ask.send(char)
        await ask.wait("ok")
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == typed


async def test_word_jumps_and_word_deletion_in_the_editor(tmp_path: Path) -> None:
    """Ctrl+Left/Right and Alt+B/F move by words, Alt+Backspace and Alt+D delete one, as in the
    host's own editor and a shell (they were Alt keys that did nothing, or nothing at all)."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send("alpha beta gamma")
        await ask.wait("> alpha beta gamma")
        row, col = ask.term.find("> alpha")
        ask.send("\x1b[1;5D")  # Ctrl+Left: to "gamma"
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + 11))
        ask.send("\x1bb")  # Alt+B: to "beta"
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + 6))
        ask.send("new ")
        await ask.wait("> alpha new beta gamma")
        ask.send("\x1b[1;5C")  # Ctrl+Right: to the end of "beta"
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + 14))
        ask.send("s")
        await ask.wait("> alpha new betas gamma")
        ask.send("\x1bb", "\x1bb")  # back to "new"
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + 6))
        ask.send("\x1bd")  # Alt+D: "new" goes
        await ask.wait("> alpha  betas gamma")
        ask.send("\x1bf", "\x1bf")  # Alt+F twice: to the end of "gamma"
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + 18))
        ask.send("\x1b\x7f")  # Alt+Backspace: "gamma" goes
        await ask.wait("> alpha  betas ")
        assert "does nothing here" not in ask.term.text()
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "alpha  betas"


async def test_a_paste_with_no_editor_open_says_where_pasted_text_goes(tmp_path: Path) -> None:
    """Pasted text in question navigation has nowhere to go: it is not taken as keys (it
    would select, skip, switch types), and it is not dropped without a word either."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("\x1b[200~D2 pasted\x1b[201~")
        await ask.wait("Pasted text goes into an editor: open Type your own, or a note (n).")
        assert "( ) Size" in ask.term.text() and "Review your answers" not in ask.term.text()
        ask.send("3")  # the next key clears the notice and opens the editor, where it goes
        await ask.wait("> Type answer...")
        assert "Pasted text goes" not in ask.term.text()
        ask.send("\x1b[200~D2 pasted\x1b[201~")
        await ask.wait("> D2 pasted")
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "D2 pasted"


async def test_text_typed_with_no_editor_open_says_where_typed_text_goes(tmp_path: Path) -> None:
    """Letters typed right after an editor closed (Esc) reach no editor; they are not dropped
    without a word: the form says where typed text goes, and acts on none of them."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send(ESC)
        await ask.wait_gone("> Type answer...")
        ask.send("zip")  # no key of navigation
        await ask.wait("Typed text goes into an editor: open Type your own, or a note (n).")
        assert "( ) Speed" in ask.term.text() and "( ) Size" in ask.term.text()
        ask.send("3")  # the next key clears the notice and opens the editor
        await ask.wait("> Type answer...")
        assert "Typed text goes" not in ask.term.text()
        ask.send("fast", ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "fast"


async def test_ctrl_l_draws_the_screen_again(tmp_path: Path) -> None:
    """Another program's output over the form (a background job writing to the terminal) is
    gone after Ctrl+L, as in other terminal programs; in an editor too, where it is no text."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.term.write("\x1b[1;1HJUNK FROM ANOTHER PROGRAM")  # not through the form
        ask.term.flush()
        assert "JUNK" in ask.term.text()
        ask.send("\x0c")
        await ask.wait_gone("JUNK")
        await ask.wait("What should I optimize for?")  # drawn again
        ask.send("3")
        await ask.wait("> Type answer...")
        ask.send("ok")
        await ask.wait("> ok")
        ask.term.write("\x1b[1;1HJUNK AGAIN")
        ask.term.flush()
        ask.send("\x0c")
        await ask.wait_gone("JUNK")
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert answers(result)["goal"]["customText"] == "ok"
