"""Small screens, down to 40x12: prompt, options and the focused row stay visible, the body
scrolls from the keyboard with a marker saying where it is, the settings overlay fits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.ui.commands import run_settings
from pi_agent_ask.ui.testing import VirtualTerminal
from tests.test_ui_typing import asking

PAGE_DOWN = "\x1b[6~"
PAGE_UP = "\x1b[5~"
HOME = "\x1b[H"
END = "\x1b[F"
DOWN = "\x1b[B"

LONG = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "context": "\n".join(f"- Fact {i}: the cold build takes {i * 7} seconds" for i in range(10)),
    "options": [
        {"value": f"o{i}", "label": f"Option {i}", "description": "what this option means"}
        for i in range(4)
    ],
}


async def test_a_40x12_form_keeps_prompt_and_options_and_scrolls_by_keys(tmp_path: Path) -> None:
    async with asking(tmp_path, LONG, columns=40, lines=12) as ask:
        await ask.wait("Option 0")
        text = ask.term.text()
        assert "What should I optimize for?" in text
        assert "› 1. ( ) Option 0" in text and "Option 1" in text
        assert "PgUp/PgDn" in text and "↓" in text  # the scroll marker
        assert all(len(row) <= 40 for row in ask.term.rows())
        ask.send(END)
        await ask.wait("Fact 9")
        assert "↑" in ask.term.text()
        assert "What should I optimize for?" in ask.term.text()  # the prompt stays
        ask.send(HOME)
        await ask.wait_gone("Fact 9")
        await ask.wait("rows 1-")
        ask.send(PAGE_DOWN)
        await ask.wait("↑")
        assert "› 1." not in ask.term.text()
        ask.send(PAGE_UP)
        await ask.wait("› 1. ( ) Option 0")
        # A key that moves the focus brings the focused row back into view.
        ask.send(END, DOWN, DOWN, DOWN)
        await ask.wait("› 4. ( ) Option 3")
        ask.send("\x03", "\x03")
        status, _result = await ask.finished()
    assert status == 1


async def test_the_demo_panel_at_60x16_shows_the_prompt_and_options(tmp_path: Path) -> None:
    from tests.test_shell import REGION_PROMPT, demo

    async with demo(tmp_path, columns=60, lines=16) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait("EU West")
        text = sh.term.text()
        assert "US East" in text  # two options at least
        assert sh.term.rows()[-1].startswith("> ")


async def test_the_demo_panel_at_40x12_keeps_a_two_row_prompt_with_the_focus(
    tmp_path: Path,
) -> None:
    """Three body rows: the multi-choice question's prompt (two rows at 40 columns) stays
    with the focused option, before the type hint and the row of context below the focus
    (which had scrolled the prompt away, leaving "Select any number of options." and two
    options under "↑2"); moving down keeps it."""
    from tests.test_shell import demo

    def prompt_and(focus: str) -> Callable[[VirtualTerminal], bool]:
        def shown(term: VirtualTerminal) -> bool:
            rows = term.rows()
            return (
                "Which checks must pass before the" in rows
                and "rollout?" in rows
                and any(row.startswith(focus) for row in rows)
            )

        return shown

    async with demo(tmp_path, columns=40, lines=12) as sh:
        await sh.wait("Where should the service run first?")
        sh.send("1")
        await sh.wait("Review your answers")
        sh.send("1", "1")
        await sh.wait(prompt_and("› 1. [ ] Unit tests"))
        sh.send(DOWN)
        await sh.wait(prompt_and("› 2. [ ] Soak test"))


async def test_a_prompt_too_tall_to_stay_keeps_what_the_focus_leaves_room_for(
    tmp_path: Path,
) -> None:
    """A five-row prompt cannot stay with the header in the 40x12 demo's panel: the body
    scrolls to the focused option, and the row of context below it gives way to the rows of
    the prompt the focus leaves room for (it had scrolled one more away)."""
    from pi_agent_ask.host.local import LocalHost
    from tests.test_shell import shell

    prompt = (
        "Which of these checks must pass before the rollout of the billing service starts in "
        "the first region of the plan, and which may wait until the canary has run?"
    )
    ask = {
        "background": True,
        "questions": [
            {
                "id": "checks",
                "prompt": prompt,
                "type": "multi",
                "options": [{"value": f"c{n}", "label": f"Check {n}"} for n in range(1, 5)],
            }
        ],
    }

    async def body(host: LocalHost) -> None:
        await host.call("ask_user", ask)

    async with shell(tmp_path, columns=40, lines=12) as sh, trio.open_nursery() as nursery:
        nursery.start_soon(sh.local.turn, body)
        await sh.wait("› 1. [ ] Check 1")
        rows = sh.term.rows()
        focus = next(i for i, row in enumerate(rows) if row.startswith("› 1."))
        assert rows[focus - 3 : focus] == [
            "and which may wait until the canary has",
            "run?",
            "Select any number of options.",
        ], rows
        nursery.cancel_scope.cancel()


async def test_the_settings_overlay_fits_40_columns_and_follows_the_selection(
    tmp_path: Path,
) -> None:
    term = VirtualTerminal(40, 12)
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20), create_pipe_input() as pipe:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_settings, settings, pipe, term.output)
            await term.wait_for("Live settings")
            rows = term.rows()
            top = next(i for i, row in enumerate(rows) if "┌" in row)
            assert rows[top].startswith("┌") and rows[top].endswith("┐")
            assert len(rows[top]) == 40
            # How to close it stays in view, below the rows that scroll.
            assert any("Esc / Ctrl+C / ? to close" in row for row in rows), rows
            pipe.send_text(DOWN * 6)  # to the reset action at the bottom
            await term.wait_for(lambda t: any("› Reset config" in row for row in t.rows()))
            assert any("Esc / Ctrl+C / ? to close" in row for row in term.rows()), term.rows()
            pipe.send_text("\x1b")
            await term.wait_gone("Live settings")
            nursery.cancel_scope.cancel()


async def test_at_40x12_the_overlay_shows_why_the_settings_file_was_not_read(
    tmp_path: Path,
) -> None:
    """The notice of a settings file that could not be read stood below the rows that scroll
    with the selection, where a 40x12 screen never showed it: it stands with how to close
    the overlay, under them."""
    settings = tmp_path / "pi-agent-ask.json"
    settings.write_text('{"schemaVersion": 6, "behaviour": {"historyTools": tru')
    term = VirtualTerminal(40, 12)
    with trio.fail_after(20), create_pipe_input() as pipe:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_settings, settings, pipe, term.output)
            await term.wait_for("? to close")
            text = " ".join(row.strip("│ ") for row in term.rows())
            assert "Config was invalid or unsupported." in text, term.rows()
            assert "reads it again at its next start." in text, term.rows()
            assert "Esc / Ctrl+C / ? to close" in text, term.rows()
            assert any("› Auto-submit" in row for row in term.rows()), term.rows()
            pipe.send_text("\x1b")
            await term.wait_gone("? to close")
            nursery.cancel_scope.cancel()


async def test_a_screen_shrunk_below_the_editor_and_grown_again_draws_from_the_left(
    tmp_path: Path,
) -> None:
    """A pane made narrower than the editor's indent (a tmux split) scrolled the form's window
    sideways to keep the cursor in view, and it stayed scrolled at 40x12 again: every row
    lost its first cells, the cursor stood off the text."""
    async with asking(tmp_path, LONG, columns=40, lines=12) as ask:
        await ask.wait("Option 0")
        ask.send("5")
        await ask.wait("> Type answer...")
        ask.send("hello")
        await ask.wait("> hello")
        ask.term.resize(5, 3)
        ask.send("x")
        await ask.term.wait_for(lambda term: term.screen.columns == 5 and bool(term.chunks))
        await ask.term.wait_for(lambda term: "x" in term.text())
        ask.term.resize(40, 12)
        ask.send("y")
        await ask.wait("> helloxy")
        row, col = ask.term.find("> helloxy")
        assert ask.term.rows()[row - 1].startswith("› 5. ( ) Type your own")
        assert col == 9 and ask.term.cursor() == (row, col + 9)
        ask.send("\x03", "\x03")
        status, _result = await ask.finished()
    assert status == 1


@pytest.mark.parametrize("columns", [40, 100])
async def test_the_chosen_path_candidate_stays_in_view_at_40x12(
    tmp_path: Path, columns: int
) -> None:
    """Down/Tab through the ``@`` candidates under the editor: on a short screen the chosen
    one is on screen, not below the last row while the text above it changes; also at 100
    columns, where the context stands beside the options (that layout lost the rows that
    must stay in view)."""
    from pi_agent_ask.ui.testing import asking as run_asking

    project = tmp_path / "project"
    project.mkdir()
    for i in range(12):
        (project / f"o{i:02d}.json").write_text("")
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    question = {**LONG, "context": "Cold build 41s."}
    with trio.fail_after(30):
        async with run_asking(
            {"questions": [question]}, settings, columns=columns, lines=12, cwd=project
        ) as ask:
            await ask.wait("Option 0")
            ask.send("5")
            await ask.wait("> Type answer...")
            ask.send("see @o", "\t")
            await ask.wait("o00.json")  # the list opened under the editor
            for chosen in ("o00.json", "o01.json", "o02.json"):
                ask.send(DOWN)
                await ask.wait(f"> see @{chosen}")
                await ask.term.wait_for(
                    lambda term, name=chosen: any(
                        row.split("│")[0].strip() == f"› {name}" for row in term.rows()
                    )
                )
            ask.send("\x03", "\x03")
            status, _result = await ask.finished()
    assert status == 1


async def test_a_new_tab_starts_at_its_top_not_where_the_last_one_was_scrolled(
    tmp_path: Path,
) -> None:
    """The Review tab reached from an option far down a long question at 40x12 showed its
    actions under rows left blank (the body kept the question's scroll, clamped to the
    review's end), the answers above them out of view though there was room for them."""
    many = {
        "id": "many",
        "label": "Many",
        "type": "multi",
        "prompt": "Which ones?",
        "options": [
            {"value": f"o{i}", "label": f"Option {i}", "description": "what it means " * 3}
            for i in range(1, 13)
        ],
    }
    async with asking(tmp_path, many, columns=40, lines=12) as ask:
        await ask.wait("Option 1")
        ask.send("1", "1")  # far down the question
        await ask.wait("› 11. [x] Option 11")
        ask.send("\r")  # next: the Review tab
        await ask.wait("› 1. Submit")
        rows = ask.term.rows()
        assert any(row.startswith("✓ Many: Which ones?") for row in rows), rows
        assert any("→ Option 11" in row for row in rows), rows
        ask.send("\x03", "\x03")
        status, _result = await ask.finished()
    assert status == 1
