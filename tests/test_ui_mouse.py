"""Mouse input as xterm SGR reports through the pipe input, mapped through the visible rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.ui.testing import Asking, sgr_click, sgr_mouse
from pi_agent_ask.ui.testing import asking as run_asking

DOWN = "\x1b[B"
WHEEL_UP, WHEEL_DOWN = 64, 65
LEFT_DRAG = 32

GOAL = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "context": "Cold build 41s.\nWarm build 9s.",
    "options": [
        {"value": "speed", "label": "Speed", "recommended": True},
        {"value": "size", "label": "Size"},
    ],
}
TONE = {
    "id": "tone",
    "label": "Tone",
    "prompt": "Which tones fit?",
    "type": "multi",
    "options": [{"value": "formal", "label": "Formal"}, {"value": "casual", "label": "Casual"}],
}


@asynccontextmanager
async def asking(
    tmp_path: Path, *questions: dict[str, Any], columns: int = 120, lines: int = 30
) -> AsyncIterator[Asking]:
    settings = tmp_path / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with run_asking(
            {"questions": list(questions)}, settings, columns=columns, lines=lines
        ) as handle:
            yield handle


def click_on(ask: Asking, text: str, offset: int = 0) -> None:
    row, col = ask.term.find(text)
    ask.send(sgr_click(col + offset, row))


async def test_clicking_an_option_is_its_number_key(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("2. ( ) Size")
        click_on(ask, "Size")
        await ask.wait("Which tones fit?")  # single-select: selected and advanced, like "2"
        click_on(ask, "Casual")
        await ask.wait("[x] Casual")  # multi-select: toggled in place
        click_on(ask, "Casual")
        await ask.wait("[ ] Casual")
        click_on(ask, "Type your own")  # the custom row opens its editor
        await ask.wait("> Type answer...")
        ask.send("\x1b")
        await ask.wait_gone("> Type answer...")
        click_on(ask, "Formal")
        await ask.wait("[x] Formal")
        click_on(ask, "Review")  # a tab
        await ask.wait("Review your answers")
        assert "→ Size" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["values"] == ["size"]
    assert result["details"]["answers"]["tone"]["values"] == ["formal"]


async def test_press_release_or_drag_alone_never_acts(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("2. ( ) Size")
        size_row, size_col = ask.term.find("Size")
        speed_row, speed_col = ask.term.find("Speed")
        # A press alone.
        ask.send(sgr_mouse(0, size_col, size_row))
        # A release alone (the press above was never completed on this target: a drag away).
        ask.send(sgr_mouse(LEFT_DRAG, speed_col, speed_row))
        ask.send(sgr_mouse(0, speed_col, speed_row, release=True))
        ask.send(sgr_mouse(0, size_col, size_row, release=True))
        # Keys are handled in order: once Down shows, every mouse report above was handled.
        ask.send(DOWN)
        await ask.wait("› 2. ( ) Size")
        text = ask.term.text()
        assert "(•)" not in text
        assert "Review your answers" not in text
        # A press on one option and a release on another do nothing either.
        ask.send(sgr_mouse(0, speed_col, speed_row), sgr_mouse(0, size_col, size_row, release=True))
        ask.send(DOWN)
        await ask.wait("› 3. ( ) Type your own")
        assert "(•)" not in ask.term.text()
        ask.send("\x03")
        status, _ = await ask.finished()
    assert status == 1


async def test_context_beside_an_option_is_not_its_click_target(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, columns=120) as ask:
        await ask.wait("Cold build 41s.")
        row, col = ask.term.find("Cold build 41s.")
        assert row == ask.term.find("Speed")[0]  # beside option 1, on its row
        ask.send(sgr_click(col + 2, row))
        ask.send(DOWN)
        await ask.wait("› 2. ( ) Size")
        assert "(•)" not in ask.term.text()
        click_on(ask, "Speed")
        await ask.wait("Review your answers")
        ask.send("\x03\x03")
        await ask.finished()


async def test_clicks_on_the_form_do_nothing_while_settings_are_open(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, columns=100) as ask:
        await ask.wait("2. ( ) Size")
        row, col = ask.term.find("2. ( ) Size")
        ask.send("?")
        await ask.wait("Live settings")
        assert ask.term.rows()[row].startswith("  2. ( )")  # still visible beside the overlay
        ask.send(sgr_click(col + 1, row), "\x1b")
        await ask.wait_gone("Live settings")
        assert "› 1. ( ) Speed" in ask.term.text()
        assert "(•)" not in ask.term.text()
        click_on(ask, "Size")  # with the overlay closed, clicks act again
        await ask.wait("Review your answers")
        ask.send("\x03\x03")
        await ask.finished()


async def test_review_click_keeps_the_double_press(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("Speed")
        click_on(ask, "Speed")
        await ask.wait("1. Submit")
        click_on(ask, "Submit")
        await ask.wait("Press 1 again (or click Submit again) to submit the answers.")
        assert not ask.done.is_set()
        # The first click on Cancel re-arms with Cancel; it does not cancel.
        click_on(ask, "Cancel")
        await ask.wait("Press 2 again (or click Cancel again) to cancel the questions.")
        click_on(ask, "Submit")
        await ask.wait("Press 1 again")
        click_on(ask, "Submit")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["values"] == ["speed"]


async def test_wheel_scrolls_and_clicks_use_the_visible_rows(tmp_path: Path) -> None:
    many = {
        "id": "many",
        "label": "Many",
        "prompt": "Pick one of many",
        "options": [{"value": f"v{i}", "label": f"Choice {i:02d}"} for i in range(1, 31)],
    }
    async with asking(tmp_path, many, columns=80, lines=16) as ask:
        await ask.wait("Choice 01")
        assert "Choice 20" not in ask.term.text()
        row, col = ask.term.find("Choice 01")
        for _ in range(5):
            ask.send(sgr_mouse(WHEEL_DOWN, col, row))
        await ask.wait("Choice 20")
        assert "Choice 01" not in ask.term.text()
        # The header (tabs) stays while the options scroll.
        assert "Review" in ask.term.rows()[0]
        click_on(ask, "Choice 20")
        await ask.wait("Review your answers")
        assert "→ Choice 20" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["many"]["values"] == ["v20"]


def below(term: Any, lower: str, upper: str) -> bool:
    try:
        return term.find(lower)[0] > term.find(upper)[0]
    except ValueError:
        return False


async def test_clicks_after_a_resize_use_the_new_layout(tmp_path: Path) -> None:
    async with asking(tmp_path, GOAL, columns=120) as ask:
        await ask.wait("Warm build 9s.")
        assert ask.term.find("Warm build 9s.")[0] == ask.term.find("Size")[0]  # beside
        ask.term.resize(60, 30)
        ask.send(DOWN)  # any redraw picks up the new size
        await ask.term.wait_for(lambda term: below(term, "Warm build 9s.", "Type your own"))
        # Size is still on the same row, but the context moved under the options: a click
        # where the context's first line now is selects nothing.
        row, col = ask.term.find("Cold build 41s.")
        ask.send(sgr_click(col, row), DOWN)
        await ask.wait("› 3. ( ) Type your own")
        ask.send("\x1b")
        await ask.wait_gone("> Type answer...")
        assert "(•)" not in ask.term.text()
        click_on(ask, "Size")
        await ask.wait("Review your answers")
        assert "→ Size" in ask.term.text()
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["values"] == ["size"]


async def test_first_click_into_an_unfocused_panel_only_takes_focus() -> None:
    """The form embedded as a panel above another input: while that input has the focus, a
    click on an option only moves the focus; the next click acts."""
    import trio_asyncio
    from prompt_toolkit.application import Application
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.layout import HSplit, Layout, Window
    from prompt_toolkit.layout.controls import BufferControl

    from pi_agent_ask.actors.form import FormInput, UserCommand
    from pi_agent_ask.form import state as fs
    from pi_agent_ask.form.validate import validate_ask_params
    from pi_agent_ask.persistence.settings import Keymaps
    from pi_agent_ask.ui import rebind_event_loop_lookup
    from pi_agent_ask.ui.form_view import FormControl, FormController, form_container
    from pi_agent_ask.ui.testing import VirtualTerminal

    params = validate_ask_params({"questions": [GOAL]}).params
    assert params is not None
    commands, inbox = trio.open_memory_channel[FormInput](8)
    term = VirtualTerminal(100, 20)
    controller = FormController(keymaps=Keymaps, show_footer_hints=lambda: False)
    control = FormControl(controller)
    editor = Window(BufferControl(Buffer()), height=1)
    rebind_event_loop_lookup()
    with create_pipe_input() as pipe, trio.fail_after(10):
        app: Application[None] = Application(
            layout=Layout(
                HSplit([form_container(controller, control), editor]), focused_element=editor
            ),
            input=pipe,
            output=term.output,
            full_screen=True,
            mouse_support=True,
        )
        controller.invalidate = app.invalidate
        controller.attach("panel", fs.new_form(params), commands)
        async with trio_asyncio.open_loop(), trio.open_nursery() as nursery:
            nursery.start_soon(trio_asyncio.aio_as_trio(app.run_async))
            await term.wait_for("2. ( ) Size")
            row, col = term.find("Size")
            pipe.send_text(sgr_click(col, row))
            await term.wait_for(lambda _term: app.layout.has_focus(control))
            with pytest.raises(trio.WouldBlock):
                inbox.receive_nowait()  # the focusing click sent nothing
            pipe.send_text(sgr_click(col, row))
            assert await inbox.receive() == UserCommand(fs.Number(2))
            nursery.cancel_scope.cancel()


async def test_a_click_on_a_blank_row_selects_nothing(tmp_path: Path) -> None:
    # No title: the tab bar is the first row. A click on a row with no text used to reach the
    # control as a click on cell (0, 0), the first tab, and jumped back to the first question.
    async with asking(tmp_path, GOAL, TONE) as ask:
        await ask.wait("2. ( ) Size")
        click_on(ask, "Tone")
        await ask.wait("Which tones fit?")
        rows = ask.term.rows()
        blank = rows.index("", rows.index("Which tones fit?"))
        ask.send(sgr_click(3, blank), DOWN)
        await ask.wait("› 2. [ ] Casual")
        assert "Which tones fit?" in ask.term.text()
        assert "What should I optimize for?" not in ask.term.text()
        click_on(ask, "Review")
        await ask.wait("Review your answers")
        ask.send("11")
        status, _result = await ask.finished()
    assert status == 0


async def test_a_click_is_mapped_by_cells_after_wide_characters(tmp_path: Path) -> None:
    wide = {
        "id": "wide",
        "label": "Wide",
        "prompt": "Which one?",
        "options": [{"value": "a", "label": "日本語 A"}, {"value": "b", "label": "日本語 B"}],
    }
    async with asking(tmp_path, wide, TONE) as ask:
        await ask.wait("2. ( ) 日本語 B")
        row, col = ask.term.find("( ) 日本語 B")
        ask.send(sgr_click(col + 9, row))  # on "B", after three wide characters
        await ask.wait("Which tones fit?")
        click_on(ask, "Review")
        await ask.wait("Review your answers")
        ask.send("11")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["wide"]["values"] == ["b"]


async def test_a_click_right_of_a_review_action_does_nothing(tmp_path: Path) -> None:
    # A Review action's target ends with its label; the cells after it on the same row are
    # nobody's target, though the window maps clicks to the character under them.
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("Speed")
        click_on(ask, "Speed")
        await ask.wait("1. Submit")
        click_on(ask, "Submit", len("Submit") + 5)
        click_on(ask, "Submit", len("Submit") + 5)  # on the label, twice, this would submit
        click_on(ask, "Cancel")
        await ask.wait("Press 2 again (or click Cancel again) to cancel the questions.")
        assert not ask.done.is_set()
        click_on(ask, "Submit")
        await ask.wait("Press 1 again")
        click_on(ask, "Submit")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["values"] == ["speed"]


async def test_a_click_on_a_count_of_hidden_tabs_shows_the_nearest_one(tmp_path: Path) -> None:
    """At 24 columns the tab bar shows a window of tabs with ``‹ +k`` / ``+k ›`` counting
    those hidden on each side; the counts read as arrows, and a click on one shows the nearest
    hidden tab (it did nothing)."""
    async with asking(tmp_path, GOAL, TONE, columns=24, lines=12) as ask:
        await ask.wait("+1 ›")
        click_on(ask, "+1 ›")  # Review, hidden to the right of Goal and Tone
        await ask.wait("Review your answers")
        await ask.wait("‹ +1")
        click_on(ask, "‹ +1")  # Goal, hidden to the left now
        await ask.wait("What should I optimize")
        ask.send("\x03", "\x03")
        await ask.finished()
