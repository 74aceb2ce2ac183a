"""The desk's terminal: real prompt_toolkit input (a pipe) and output (a pyte screen).

The person answers two agents' forms with key presses and a mouse click, one form at a time,
each labelled with its agent; Ctrl-Q leaves the desk and removes its connection file.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.desk.terminal import AGENTS_WIDTH
from pi_agent_ask.desk.testing import (
    SDK_CLIENT_WARNINGS,
    answer_displayed,
    desk_client,
    open_desk,
)
from pi_agent_ask.ui.testing import VirtualTerminal, sgr_click

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


def ask(label: str, *, background: bool = True) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"Question {label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": background,
    }


async def test_the_person_answers_two_agents_on_the_desk_by_keys_and_mouse(
    tmp_path: Path,
) -> None:
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
        ):
            await term.wait_for("pi-agent-ask desk")
            await term.wait_for(desk.address.url)
            receipt = await alpha.call_tool("ask_user", ask("Deploy"))
            await term.wait_for("Question Deploy?")
            await term.wait_for(lambda t: "\x07" in t.raw)  # the agent's runtime rang the bell
            assert "From alpha" in term.text()
            assert "background question" in term.text()

            results: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def blocked_call() -> None:
                    results.append(await beta.call_tool("ask_user", ask("Merge", background=False)))

                nursery.start_soon(blocked_call)
                await term.wait_for(lambda t: "beta" in t.text() and "1 more waiting" in t.text())
                # Alpha's form came first, so it stays on display: answer it with keys.
                pipe.send_text("1")
                await term.wait_for("Review your answers")
                pipe.send_text("1")
                await term.wait_for("again")
                pipe.send_text("1")
                # Beta's form takes its turn, marked: beta is blocked on it.
                await term.wait_for("Question Merge?")
                assert "From beta" in term.text()
                assert "blocked until you answer" in term.text()
                row, column = term.find("No")
                pipe.send_text(sgr_click(column, row))
                await term.wait_for("Review your answers")
                pipe.send_text("1")
                await term.wait_for("again")
                pipe.send_text("1")
            (merged,) = results
            assert merged.structured_content["answers"]["q"]["values"] == ["no"]
            await term.wait_for("No questions waiting")

            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["requestId"] == receipt.structured_content["requestId"]
            assert entry["result"]["answers"]["q"]["values"] == ["yes"]

            pipe.send_text("\x11")  # Ctrl-Q
            await desk.stopped.wait()
        assert not (tmp_path / "desk.json").exists()


async def test_escape_sends_a_form_to_the_back_of_the_line(tmp_path: Path) -> None:
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
        ):
            await alpha.call_tool("ask_user", ask("First"))
            await term.wait_for("Question First?")
            await beta.call_tool("ask_user", ask("Second"))
            await alpha.call_tool("ask_user", ask("Third"))
            await term.wait_for("2 more waiting")
            pipe.send_text("n")  # a note: a draft to keep
            await term.wait_for("Note:")
            pipe.send_text("keep me\r")
            await term.wait_for("Note: keep me")
            pipe.send_text("\x1b")  # Esc: later
            await term.wait_for("Question Second?")
            assert "From beta" in term.text()
            pipe.send_text("1")
            await term.wait_for("Review your answers")
            pipe.send_text("11")
            # Alpha's deferred form is back, its draft kept, still before alpha's next one.
            await term.wait_for("Question First?")
            assert "Note: keep me" in term.text()
            assert {row.key: row.pending for row in desk.board.agents()}["alpha"] == 2


async def test_settings_saved_on_the_desk_apply_to_every_agent(tmp_path: Path) -> None:
    term = VirtualTerminal(110, 32)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
        ):
            await alpha.call_tool("ask_user", ask("One"))
            await term.wait_for("Question One?")
            await beta.call_tool("ask_user", ask("Two"))
            await term.wait_for("1 more waiting")
            pipe.send_text("?")
            await term.wait_for("Live settings")
            pipe.send_text("\r")  # the first row: auto-submit when answered without notes
            await term.wait_for(
                lambda t: "[on]" in t.rows()[t.find("Auto-submit when answered")[0]]
            )
            pipe.send_text("\x1b")
            await term.wait_gone("Live settings")
            # Both agents' forms now submit on the answer itself, without Review.
            pipe.send_text("1")
            await term.wait_for("Question Two?")
            pipe.send_text("2")
            await term.wait_for("No questions waiting")
            for agent in (alpha, beta):
                (entry,) = (await agent.call_tool("wait_for_answers", {})).structured_content[
                    "results"
                ]
                assert entry["result"]["cancelled"] is False
            for key in ("alpha", "beta"):
                runtime = desk.registry.get(key).runtime  # type: ignore[union-attr]
                assert runtime.config.form_settings.auto_submit_when_answered_without_notes


async def test_the_narrow_agents_line_keeps_whole_agents_only(tmp_path: Path) -> None:
    """At 40 columns the agents line holds the agents that fit whole, the one on display
    among them: no agent's name is cut and no separator is left dangling at the edge."""
    term = VirtualTerminal(40, 12)
    long_key = "release-bot-with-a-really-long-name-for-testing"
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
            desk_client(desk.address, long_key) as long,
        ):
            await alpha.call_tool("ask_user", ask("One"))
            await beta.call_tool("ask_user", ask("Two"))
            await long.call_tool("ask_user", ask("Three"))
            await term.wait_for("Question One?")
            await term.wait_for(lambda t: "beta 1" in t.rows()[0])
            line = term.rows()[0].rstrip()
            assert line == " Agents · ▶ alpha 1 · beta 1 +1 more", line
            pipe.send_text("\x1b")  # later: beta's form
            await term.wait_for("Question Two?")
            pipe.send_text("\x1b")  # later: the long-named agent's form, on display
            await term.wait_for("Question Three?")
            line = term.rows()[0].rstrip()
            assert "▶" in line and not line.endswith("·"), line
            assert "release-bot" not in line or "…" in line, line


async def test_an_agent_blocked_on_the_person_keeps_its_place_on_the_narrow_line(
    tmp_path: Path,
) -> None:
    """At 40 columns an agent that waits on the person (⏸) is listed ahead of an agent with
    nothing waiting, and the line counts those left out: it listed the idle agent, the one
    that came first, and left the blocked one out without a word."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "idle-agent") as idle,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "gamma") as gamma,
        ):
            await idle.call_tool("ask_user", ask("Zero"))
            await term.wait_for("Question Zero?")
            await answer_displayed(desk)
            await alpha.call_tool("ask_user", ask("One"))
            await term.wait_for("Question One?")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    functools.partial(gamma.call_tool, "ask_user", ask("Two", background=False))
                )
                await term.wait_for(lambda t: "⏸" in t.rows()[0])
                line = term.rows()[0].rstrip()
                assert line == " Agents · ▶ alpha 1 · gamma 1 ⏸ +1 more", line
                nursery.cancel_scope.cancel()


async def test_a_wide_character_key_keeps_its_count_in_the_agents_pane(tmp_path: Path) -> None:
    """A key of CJK characters takes two cells a character: the pane clips it by cells, so
    its pending count stays in the pane's count column."""
    term = VirtualTerminal(110, 30)
    key = "bot-日本語日本語日本語日本語日本語"
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, key) as wide,
        ):
            await alpha.call_tool("ask_user", ask("One"))
            await wide.call_tool("ask_user", ask("Two"))
            await term.wait_for(lambda t: any("bot-日本" in row for row in t.rows()))
            row = next(row for row in term.rows() if "bot-日本" in row)
            pane = row.split("│", 1)[0]
            assert pane.rstrip().endswith("…   1"), row


async def test_a_long_notice_is_read_whole_on_a_narrow_desk(tmp_path: Path) -> None:
    """The notice about a damaged journal names its file: at 78 columns it wraps onto the
    rows it needs (up to three) instead of ending mid-path at the screen's edge."""
    from pi_agent_ask.mcp_common.journals import record_key

    journal = record_key(tmp_path / "state", "zz")
    journal.write_text("not a session file\n")
    term = VirtualTerminal(78, 20)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with open_desk(tmp_path, headless=False, input=pipe, output=term.output):
            await term.wait_for("cannot open the journal")
            await term.wait_for(lambda t: "not a pi-agent-ask session file" in "".join(t.rows()))
            text = "".join(row.strip() for row in term.rows())
            assert str(journal) in text


async def test_escape_on_a_one_agent_desk_says_what_it_did(tmp_path: Path) -> None:
    """With one agent, Esc ("later") has no other agent's form to put this one behind: the
    same form comes straight back, and the status line says why, until the next key. With a
    second agent's form waiting, it says which way the form went."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "solo") as solo,
        ):
            await solo.call_tool("ask_user", ask("First"))
            await solo.call_tool("ask_user", ask("Second"))
            await term.wait_for("Question First?")
            pipe.send_text("\x1b")
            await term.wait_for("Nothing else is in line: it stays.")
            assert "Question First?" in term.text()
            pipe.send_text("\x1b[B")  # Down: the next key, and the words go
            await term.wait_for("› 2. ( ) No")
            assert "Nothing else" not in term.text()
            async with desk_client(desk.address, "other") as other:
                await other.call_tool("ask_user", ask("Third"))
                await term.wait_for(lambda t: "other 1" in t.rows()[0])
                pipe.send_text("\x1b")
                await term.wait_for("Question Third?")
                await term.wait_for("Deferred: 1 other form goes first.")


async def test_an_emoji_key_keeps_its_count_in_the_agents_pane(tmp_path: Path) -> None:
    """A key with a skin tone and VS16: the pane counts its cells as the
    screen does, so the count stands in the same column as a plain key's."""
    term = VirtualTerminal(110, 30)
    key = "bot-👍🏽❤️"
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, key) as emoji,
        ):
            await alpha.call_tool("ask_user", ask("One"))
            await emoji.call_tool("ask_user", ask("Two"))
            await term.wait_for(lambda t: any("bot-👍" in row for row in t.rows()))
            rows = term.rows()
            plain = next(i for i, row in enumerate(rows) if row[2:].startswith("alpha"))
            wide = next(i for i, row in enumerate(rows) if "bot-👍" in row)
            # Cells, as the screen has them: where each row's count stands.
            counts = [
                [c for c in range(AGENTS_WIDTH) if term.style_at(row, c).data == "1"]
                for row in (plain, wide)
            ]
            assert len(counts[0]) == 1 and counts[0] == counts[1], (rows[plain], rows[wide])


async def test_the_agent_on_display_stays_in_a_full_agents_pane(tmp_path: Path) -> None:
    """More agents than the pane has rows: the one whose form is on display is still listed
    (it was below the pane's last row, out of sight), and a row counts the agents left out."""
    term = VirtualTerminal(100, 12)
    keys = [f"agent-{i:02d}" for i in range(10)]
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk:
            for key in keys:  # a background question stays on the desk when its client goes
                async with desk_client(desk.address, key) as client:
                    await client.call_tool("ask_user", ask(key))
            await term.wait_for("Question agent-00?")
            for key in keys[1:]:
                pipe.send_text("\x1b")  # later: the next agent's form
                await term.wait_for(f"Question {key}?")
            pane = [row.split("│", 1)[0] for row in term.rows()[2:-1]]
            assert any(row.startswith("▶ agent-09") for row in pane), "\n".join(pane)
            assert any("more" in row for row in pane), "\n".join(pane)
            assert all("agent-" in row or "more" in row for row in pane[1:]), "\n".join(pane)


async def test_agents_with_nothing_waiting_give_way_in_a_full_agents_pane(tmp_path: Path) -> None:
    """A desk that has run a while knows every agent it ever served. More of them than the
    pane has rows: the agents with forms waiting are listed, those with nothing waiting give
    way (they were listed first, in the order they came, and pushed the others out of sight
    behind the row counting the agents left out)."""
    term = VirtualTerminal(100, 12)
    idle = [f"done-{i:02d}" for i in range(8)]
    busy = [f"busy-{i}" for i in range(3)]
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk:
            for key in idle:  # each asked once and was answered: nothing waits for them
                async with desk_client(desk.address, key) as client:
                    await client.call_tool("ask_user", ask(key))
                await answer_displayed(desk)
            for key in busy:
                async with desk_client(desk.address, key) as client:
                    await client.call_tool("ask_user", ask(key))
            await term.wait_for("Question busy-0?")
            await term.wait_for(lambda t: any("more" in row for row in t.rows()))
            pane = [row.split("│", 1)[0] for row in term.rows()[2:-1]]
            for key in busy:
                assert any(key in row for row in pane), "\n".join(pane)
            assert any(row.startswith("▶ busy-0") for row in pane), "\n".join(pane)
            assert any("+" in row and "more" in row for row in pane), "\n".join(pane)


async def test_saving_for_later_stands_above_the_notice_that_the_store_is_away(
    tmp_path: Path,
) -> None:
    """A team desk's Esc waits for the store to take the put-back, saying "Saving for
    later…", for up to a store call's retries when the store is away: the notice that it is
    away stays readable under it at 80x24 and at 40x12 (it stood in its place), and takes the
    whole line again once the key is done."""
    from pi_agent_ask.desk.terminal import Brief
    from pi_agent_ask.store.terminal import SAVING_FOR_LATER, STORE_AWAY, STORE_AWAY_SHORT

    term = VirtualTerminal(80, 24)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await alpha.call_tool("ask_user", ask("Deploy"))
            await term.wait_for("Question Deploy?")
            display = desk.board.display
            display.notice(Brief(STORE_AWAY, STORE_AWAY_SHORT))
            await term.wait_for("cannot be reached")
            display.busy(SAVING_FOR_LATER)
            await term.wait_for(SAVING_FOR_LATER)
            rows = term.rows()
            assert rows[-3:] == [
                " Saving for later…",
                " The team's store cannot be reached (PostgreSQL is away or restarting): what you",
                " type is kept here and saved once it is back; the forms waiting show again then.",
            ], rows
            term.resize(40, 12)  # a short screen: the notice's short form, on a row of its own
            display.invalidate()
            await term.wait_for(STORE_AWAY_SHORT)
            assert term.rows()[-2:] == [" " + SAVING_FOR_LATER, " " + STORE_AWAY_SHORT]
            assert "Question Deploy?" in term.text(), term.rows()
            display.busy(None)
            await term.wait_for(lambda t: SAVING_FOR_LATER not in t.text())
            assert term.rows()[-1] == " " + STORE_AWAY_SHORT, term.rows()
