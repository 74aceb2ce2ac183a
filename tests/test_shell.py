"""The host shell driven by keys and clicks, with the real runtime, bindings and LocalHost.

Keys go in through a pipe input as the bytes a terminal sends; the screen is read from the
VT100 output through pyte (``ui/testing.py``). The demo agent runs at a fast pace, or the
tests drive the ``LocalHost`` themselves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from prompt_toolkit.input import PipeInput, create_pipe_input

from pi_agent_ask.form.sanitize import MARKER
from pi_agent_ask.host.demo import REGION
from pi_agent_ask.host.local import LocalHost
from pi_agent_ask.host.shell import (
    FALLBACK_TEXT,
    FINISHED_TEXT,
    ShellHost,
    open_shell_host,
    run_demo_agent,
    run_interactive_demo,
)
from pi_agent_ask.ui.shell_editor import EDITOR_PLACEHOLDER
from pi_agent_ask.ui.testing import VirtualTerminal, sgr_click
from pi_agent_ask.ui.transcript import Transcript

ESC = "\x1b"
ENTER = "\r"
ALT_Q = "\x1bq"
CTRL_D = "\x04"
UP = "\x1b[A"
DOWN = "\x1b[B"
REGION_PROMPT = "Where should the service run first?"
CHECKS_PROMPT = "Which checks must pass before the rollout?"
CONFIRM_TEXT = "Switching to background-only mode changes the agent's tools"
PAUSE = 0.01
"""The demo agent's pace: its pauses take a hundredth of their interactive length."""


@attrs.define
class Shell:
    term: VirtualTerminal
    pipe: PipeInput
    host: ShellHost
    settings: Path

    def send(self, *keys: str) -> None:
        for key in keys:
            self.pipe.send_text(key)

    async def wait(self, condition: str | Callable[[VirtualTerminal], bool]) -> None:
        await self.term.wait_for(condition)

    async def wait_gone(self, text: str) -> None:
        await self.term.wait_gone(text)

    async def type_line(self, text: str) -> None:
        """Type ``text`` into the focused editor and send it."""
        self.send(text)
        await self.wait(f"> {text}")
        self.send(ENTER)

    def row_of(self, needle: str) -> int:
        return self.term.find(needle)[0]

    def editor_row(self) -> int:
        return self.term.rows().index(
            next(row for row in reversed(self.term.rows()) if row.startswith("> "))
        )

    @property
    def local(self) -> LocalHost:
        return self.host.host


def settings_file(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "extensions" / "pi-agent-ask.json"


@asynccontextmanager
async def shell(tmp_path: Path, *, columns: int = 100, lines: int = 34) -> AsyncIterator[Shell]:
    term = VirtualTerminal(columns, lines)
    settings = settings_file(tmp_path)
    with trio.fail_after(20), create_pipe_input() as pipe:
        async with open_shell_host(
            settings=settings, input=pipe, output=term.output, cwd=tmp_path
        ) as host:
            handle = Shell(term, pipe, host, settings)
            await handle.wait(EDITOR_PLACEHOLDER[:14])
            yield handle


@asynccontextmanager
async def demo(tmp_path: Path, **size: int) -> AsyncIterator[Shell]:
    """The shell with the scripted demo agent running at a fast pace."""
    async with shell(tmp_path, **size) as handle, trio.open_nursery() as nursery:
        nursery.start_soon(run_demo_agent, handle.host, PAUSE)
        yield handle
        nursery.cancel_scope.cancel()


def status_row(term: VirtualTerminal) -> str:
    """The panel's status row; empty while the screen shows none (between two frames), so a
    wait on it goes on waiting instead of raising ``StopIteration`` into the coroutine."""
    return next((row for row in term.rows() if row.startswith("─ Questions pending")), "")


async def test_panel_appears_above_the_editor_and_takes_focus(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait(lambda term: "Questions pending: 2" in term.text())
        transcript_row = sh.row_of("● Planning the deployment of the billing service.")
        panel_row = sh.row_of(REGION_PROMPT)
        assert transcript_row < sh.row_of("Deployment plan") < panel_row < sh.editor_row()
        assert "Alt+Q: editor" in status_row(sh.term)  # the panel has the focus
        # A digit goes to the form, not to the editor.
        sh.send("2")
        await sh.wait("Review your answers")
        assert "→ US East" in sh.term.text()
        assert EDITOR_PLACEHOLDER in sh.term.text()


async def test_a_tall_form_scrolls_inside_the_panel_on_a_short_screen(tmp_path: Path) -> None:
    async with demo(tmp_path, lines=16) as sh:
        await sh.wait("EU West")
        rows = sh.term.rows()
        rule = next(i for i, row in enumerate(rows) if row.startswith("━━ Questions"))
        assert rule >= 3  # the transcript keeps its rows
        assert any(row.startswith("› 1. ( ) EU West") for row in rows)  # the focus row shows
        assert rows[-1].startswith("> ")  # the editor stays at the bottom
        sh.send("\x1b[B", "\x1b[B", "\x1b[B")  # down to "Type your own": the body scrolls
        await sh.wait(lambda term: any(row.startswith("› 4.") for row in term.rows()))
        assert sh.term.rows()[-1].startswith("> ")


async def test_editor_text_survives_focus_changes_and_new_forms(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        sh.send("half a thought")
        await sh.wait("> half a thought")
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: editor" in status_row(term))
        sh.send("1")
        await sh.wait("Review your answers")
        sh.send("1", "1")
        # The next form takes the focus; the editor's draft is untouched throughout.
        await sh.wait(CHECKS_PROMPT)
        await sh.wait(lambda term: "Alt+Q: editor" in status_row(term))
        assert "> half a thought" in sh.term.text()
        sh.send("1")
        await sh.wait("[x] Unit tests")
        assert "> half a thought" in sh.term.text()


async def test_escape_defers_and_ask_queue_reopens_with_the_draft(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send("n")
        await sh.wait("Add a note...")
        sh.send("near our users")
        await sh.wait("near our users")
        sh.send(ENTER)
        await sh.wait("Note: near our users")
        sh.send(ESC)
        await sh.wait_gone(REGION_PROMPT)
        stats = await sh.host.runtime.statistics()
        assert stats.panel_visible is False
        assert len(stats.pending) == 2  # deferred, not cancelled
        await sh.wait(lambda term: "hidden (/ask-queue)" in status_row(term))
        # Focus is back in the editor.
        await sh.type_line("/ask-queue")
        await sh.wait(REGION_PROMPT)
        assert "Note: near our users" in sh.term.text()
        assert (await sh.host.runtime.statistics()).panel_visible is True
        sh.send("1")  # the reopened form has the focus
        await sh.wait("Review your answers")


async def test_a_recovered_form_reopens_in_the_panel_with_its_draft(tmp_path: Path) -> None:
    session = tmp_path / "work.session"
    term = VirtualTerminal(100, 34)
    with trio.fail_after(20), create_pipe_input() as pipe:
        async with open_shell_host(
            session=session, settings=settings_file(tmp_path), input=pipe, output=term.output
        ) as first:
            await first.host.call("ask_user", REGION)
            await term.wait_for(REGION_PROMPT)
            pipe.send_text("n")
            await term.wait_for("Add a note...")
            pipe.send_text("keep it close" + ENTER)
            await term.wait_for("Note: keep it close")
    term = VirtualTerminal(100, 34)
    with trio.fail_after(20), create_pipe_input() as pipe:
        async with open_shell_host(
            session=session, settings=settings_file(tmp_path), input=pipe, output=term.output
        ) as second:
            await term.wait_for(REGION_PROMPT)
            assert "Note: keep it close" in term.text()
            assert any(row.startswith("> ") for row in term.rows())  # beside the editor
            pipe.send_text(ESC)  # still a background form: Esc defers, never cancels
            await term.wait_gone(REGION_PROMPT)
            stats = await second.runtime.statistics()
            assert stats.panel_visible is False and len(stats.pending) == 1


async def test_ask_defer_hides_the_panel_from_the_editor(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        await sh.type_line("/ask-defer")
        await sh.wait_gone(REGION_PROMPT)
        assert (await sh.host.runtime.statistics()).panel_visible is False
        assert "> /ask-defer" not in sh.term.text()  # a command, not a message to the agent


async def test_escape_on_a_foreground_form_cancels_it(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh, trio.open_nursery() as nursery:
        results: list[dict[str, Any]] = []
        answered = trio.Event()

        async def ask() -> None:
            foreground = {key: value for key, value in REGION.items() if key != "background"}
            results.append(await sh.local.call("ask_user", foreground))
            answered.set()

        nursery.start_soon(ask)
        await sh.wait(REGION_PROMPT)
        sh.send(ESC)
        await answered.wait()
        await sh.wait_gone(REGION_PROMPT)
        assert results[0]["details"]["cancelled"] is True


async def test_ordinary_input_during_a_wait_releases_it(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh, trio.open_nursery() as nursery:
        waited: list[dict[str, Any]] = []

        async def body(h: LocalHost) -> None:
            await h.call("ask_user", REGION)
            waited.append(await h.call("wait_for_answers", {}))

        nursery.start_soon(sh.local.turn, body)
        await sh.wait(REGION_PROMPT)
        await sh.wait(lambda term: "agent waiting for answers" in status_row(term))
        await trio.testing.wait_all_tasks_blocked()  # the wait is registered with the queue
        assert (await sh.host.runtime.statistics()).waiting
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        await sh.type_line("go on without me")
        await sh.wait("Wait released (user message) · 1 form still pending")
        await sh.wait_gone(REGION_PROMPT)
        assert waited[0]["details"]["status"] == "deferred"
        assert waited[0]["details"]["reason"] == "user_message"
        stats = await sh.host.runtime.statistics()
        assert stats.panel_visible is False and len(stats.pending) == 1
        assert "> go on without me" in sh.term.text()


async def test_answer_in_the_panel_becomes_a_review_style_card(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send("1")
        await sh.wait("Review your answers")
        sh.send("1")
        await sh.wait("Press 1 again")
        sh.send("1")
        # At the turn boundary or by idle wake, whichever comes first: the same card.
        await sh.wait("Deployment plan · ✓ Answers received")
        rows = sh.term.rows()
        top = rows.index("Deployment plan · ✓ Answers received")
        assert rows[top - 1] == "─" * 100  # accent rules around the card
        assert rows[top + 1 : top + 4] == ["", REGION_PROMPT, "→ EU West"]
        assert rows[top + 4] == "─" * 100
        card = "\n".join(rows[top - 1 : top + 5])
        assert "region" not in card and "ask:" not in card  # no ids, no message types


async def test_an_answer_while_idle_wakes_the_agent(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh, trio.open_nursery() as nursery:
        woke = trio.Event()

        async def ask(h: LocalHost) -> None:
            await h.call("ask_user", REGION)

        async def agent() -> None:
            await sh.local.turn(ask)
            await sh.local.next_wakeup()
            woke.set()

        nursery.start_soon(agent)
        await sh.wait(REGION_PROMPT)
        await trio.testing.wait_all_tasks_blocked()
        assert not woke.is_set()
        sh.send("1", "1", "1")
        await woke.wait()
        await sh.wait("Deployment plan · ✓ Answers received")
        assert len(sh.local.context) == 2  # the receipt, then the background answer
        assert sh.local.context[1]["customType"] == "ask:background-answer"


async def test_an_answer_given_during_a_turn_arrives_at_its_boundary(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh, trio.open_nursery() as nursery:
        answered = trio.Event()

        async def body(h: LocalHost) -> None:
            await h.call("ask_user", REGION)
            await answered.wait()
            h.say("● last step of the turn")

        from pi_agent_ask import events as ev

        completed = trio.Event()
        off = sh.host.runtime.events.on(ev.COMPLETED, lambda _payload: completed.set())
        nursery.start_soon(sh.local.turn, body)
        await sh.wait(REGION_PROMPT)
        sh.send("1", "1", "1")
        await sh.wait_gone(REGION_PROMPT)
        # The panel closes as soon as the form has its outcome; the turn goes on until the
        # runtime has recorded it (the screen alone can get there first).
        await completed.wait()
        off()
        assert "Answers received" not in sh.term.text()  # not before the boundary
        answered.set()
        await sh.wait("Deployment plan · ✓ Answers received")
        assert sh.row_of("● last step of the turn") < sh.row_of("✓ Answers received")


async def test_ask_mode_asks_for_confirmation_after_the_first_model_request(
    tmp_path: Path,
) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        await sh.type_line("/ask-mode")
        await sh.wait(CONFIRM_TEXT)
        sh.send("n")
        await sh.wait("Question mode unchanged: standard.")
        assert sh.host.runtime.config.background_only is False

        await sh.type_line("/ask-mode")
        await sh.wait(CONFIRM_TEXT)
        sh.send("y")
        await sh.wait("Question mode: background-only")
        assert sh.host.runtime.config.background_only is True
        saved = json.loads(sh.settings.read_text())
        assert saved["behaviour"]["questionMode"] == "background-only"
        assert [tool["name"] for tool in sh.host.runtime.tool_definitions()] == ["ask_user"]
        assert (await sh.host.runtime.statistics()).pending  # queued questions are kept


async def test_ask_mode_before_any_model_request_switches_at_once(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh:
        await sh.type_line("/ask-mode")
        await sh.wait("Question mode: background-only")
        assert CONFIRM_TEXT not in sh.term.text()
        await sh.type_line("/ask-mode")
        await sh.wait("Question mode: standard")
        assert json.loads(sh.settings.read_text())["behaviour"]["questionMode"] == "standard"


async def test_first_click_into_the_unfocused_panel_only_focuses_it(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        row, column = sh.term.find("US East")
        sh.send(sgr_click(column, row))
        await sh.wait(lambda term: "Alt+Q: editor" in status_row(term))
        assert "( ) US East" in sh.term.text()
        assert "Review your answers" not in sh.term.text()
        sh.send(sgr_click(column, row))  # now a click acts
        await sh.wait("Review your answers")
        assert "→ US East" in sh.term.text()


async def test_a_click_on_the_panel_rule_only_focuses(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        rule = sh.row_of("Deployment plan") - 1
        sh.send(sgr_click(5, rule))
        await sh.wait(lambda term: "Alt+Q: editor" in status_row(term))
        sh.send("3")
        await sh.wait("→ AP South")


async def test_clicking_the_editor_releases_panel_focus(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(sgr_click(10, sh.editor_row()))
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        sh.send("2")
        await sh.wait("> 2")
        assert REGION_PROMPT in sh.term.text()  # neither closed nor answered
        assert "Review your answers" not in sh.term.text()
        stats = await sh.host.runtime.statistics()
        assert stats.panel_visible is True and len(stats.pending) == 2


async def test_ask_settings_opens_the_overlay_and_keeps_focus(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: "Alt+Q: questions" in status_row(term))
        await sh.type_line("/ask-settings")
        await sh.wait("Auto-submit when answered without notes")
        sh.send("x")  # the overlay takes every key while open
        sh.send(ESC)
        await sh.wait_gone("Auto-submit when answered without notes")
        assert "> x" not in sh.term.text()
        sh.send("typed after")
        await sh.wait("> typed after")  # the editor kept the focus


async def test_notices_reach_the_transcript_and_the_status_line(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh:
        sh.host.runtime.notice("Session file was cut after a torn frame.")
        await sh.wait("! Session file was cut after a torn frame.")
        # The status line's own text arrives from the host a moment later; the notice is in it.
        await sh.wait(
            lambda term: any(
                row.startswith("─ Questions pending") and "Session file was cut" in row
                for row in term.rows()
            )
        )


async def test_enter_sends_alt_enter_breaks_the_line(tmp_path: Path) -> None:
    async with shell(tmp_path) as sh:
        sh.send("first", ESC + ENTER, "second")
        await sh.wait("  second")
        assert "> first" in sh.term.text()
        sh.send(ENTER)
        await sh.wait(lambda term: EDITOR_PLACEHOLDER in term.text())
        rows = sh.term.rows()
        first = rows.index("> first")
        assert rows[first + 1] == "second"  # the message keeps its line break


async def test_up_and_down_move_by_the_rows_a_long_message_wraps_into(tmp_path: Path) -> None:
    """At 40 columns a one-line message wraps at words, as the form's editor wraps (it was
    cut where a row was full, in the middle of a word), a word longer than a row where it is
    full: Up and Down move between those rows at the column of the run (they moved between
    lines only, so nothing moved), and on the first or last row move nothing."""
    text = "please hold the rollout until the database migration has finished"
    async with shell(tmp_path, columns=40, lines=12) as sh:
        sh.send(text)
        await sh.wait("  database migration has finished")
        assert sh.term.rows()[-2:] == [
            "> please hold the rollout until the",
            "  database migration has finished",
        ]
        sh.send(UP, UP, "^", DOWN, DOWN, "$")
        await sh.wait("  database migration has finished$")
        # The cursor stood at the second row's end (31 cells into it), went up to 31 cells
        # into the first, then, one cell on after "^", down to the second row's end.
        assert sh.term.rows()[-2:] == [
            "> please hold the rollout until t^he",
            "  database migration has finished$",
        ]
        word = "x" * 40  # longer than a row: cut where it is full
        sh.send(" " + word)
        await sh.wait("  " + word[37:])
        assert sh.term.rows()[-3:-1] == ["  database migration has finished$", "  " + word[:37]]


async def test_at_40_columns_the_status_line_keeps_the_alt_q_hint(tmp_path: Path) -> None:
    """The status line over a form says how to move the keys at every width, in fewer words
    on a narrow screen (at 40 columns it said only "Questions pending: 2")."""
    async with demo(tmp_path, columns=40, lines=12) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait(lambda term: status_row(term).endswith(" Alt+Q: editor ─"))
        sh.send(ALT_Q)
        await sh.wait(lambda term: status_row(term).endswith(" Alt+Q ─"))
        assert len(status_row(sh.term)) == 40
    async with demo(tmp_path, columns=80, lines=24) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait(lambda term: status_row(term).endswith(" keys: editor · Alt+Q: questions ─"))


async def test_quit_and_the_finished_demo(tmp_path: Path) -> None:
    term = VirtualTerminal(100, 34)
    with trio.fail_after(20), create_pipe_input() as pipe:
        status: list[int] = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                status.append(
                    await run_interactive_demo(
                        session=tmp_path / "demo.session",
                        settings=settings_file(tmp_path),
                        input=pipe,
                        output=term.output,
                        pace=PAUSE,
                    )
                )

            nursery.start_soon(run)
            for prompt, keys in (
                (REGION_PROMPT, "1"),
                (CHECKS_PROMPT, "1" + ENTER),
                ("When may the rollout start?", "2"),
            ):
                await term.wait_for(prompt)
                pipe.send_text(keys)
                await term.wait_for("Review your answers")
                pipe.send_text("11")
            await term.wait_for("Received answers for")
            await term.wait_for(FINISHED_TEXT)
            await term.wait_for("demo agent finished")
            # It stays until the person leaves.
            await trio.testing.wait_all_tasks_blocked()
            assert not status
            pipe.send_text("/quit" + ENTER)
    assert status == [0]
    assert (tmp_path / "demo.session").stat().st_size > 0


async def test_ctrl_d_in_the_empty_editor_quits(tmp_path: Path) -> None:
    term = VirtualTerminal(100, 30)
    with trio.fail_after(20), create_pipe_input() as pipe:
        status: list[int] = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                status.append(
                    await run_interactive_demo(
                        session=None,
                        settings=settings_file(tmp_path),
                        input=pipe,
                        output=term.output,
                        pace=PAUSE,
                    )
                )

            nursery.start_soon(run)
            await term.wait_for(REGION_PROMPT)
            pipe.send_text(ALT_Q + "x")
            await term.wait_for("> x")
            pipe.send_text(CTRL_D)  # not empty: stays
            await trio.testing.wait_all_tasks_blocked()
            assert not status
            pipe.send_text("\x7f")
            await term.wait_for(EDITOR_PLACEHOLDER)
            pipe.send_text(CTRL_D)
    assert status == [0]


async def test_without_a_terminal_the_headless_demo_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with trio.fail_after(20):
        status = await run_interactive_demo(
            session=None, settings=settings_file(tmp_path), pace=PAUSE
        )
    out = capsys.readouterr().out
    assert status == 0
    assert out.splitlines()[0] == FALLBACK_TEXT
    assert "● Done: every answer is in." in out


def test_transcript_rows_wrap_rules_span_and_text_is_neutralised() -> None:
    transcript = Transcript()
    transcript.append((("accent", "─" * 80),))
    transcript.append((("text", "  two words\nsecond \x1b[31mline"),))
    assert transcript.rows(10) == [
        (("accent", "─" * 10),),
        (("text", "  two"),),
        (("text", "  words"),),
        (("text", "second"),),
        (("text", f"{MARKER}line"),),
    ]
    assert transcript.rows(40)[0] == (("accent", "─" * 40),)


def test_transcript_rows_are_drawn_without_emoji_joiners() -> None:
    """As the form draws them (``form.transcript.drawn``): a joined picture, a skin tone and
    VS16 take the cells the wrapping counted, in every terminal."""
    transcript = Transcript()
    transcript.append((("text", "You: 👩\u200d💻 👍\U0001f3fd ❤\ufe0f done"),))
    assert transcript.rows(40) == [(("text", "You: 👩💻 👍 ❤ done"),)]


@pytest.mark.parametrize("lines", [24, 30, 40])
async def test_the_panel_is_as_tall_as_the_form_it_shows(tmp_path: Path, lines: int) -> None:
    """The panel's height is the form's drawn at that height: a form that drops its blank rows
    on a short panel (18 rows or fewer) leaves no blank rows under its key hints either."""
    async with demo(tmp_path, lines=lines) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait(lambda term: bool(status_row(term)))
        rows = sh.term.rows()
        status = rows.index(status_row(sh.term))
        assert rows[status - 1].strip(), "\n".join(rows)  # the hints, not blank rows
