"""End to end: the installed ``pi-agent-ask ask`` in a real terminal (a tmux pane).

tmux runs the command on its own pseudo-terminal, ``send-keys`` types, ``capture-pane`` reads
the screen. Waiting is driven by the pane's output: ``pipe-pane`` copies everything the
command writes into a FIFO, and each wait re-reads the screen only when new output arrived.
The test uses a private tmux server (its own socket) and kills only that server.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

COMMAND = Path(sys.executable).parent / "pi-agent-ask"

PAYLOAD = {
    "title": "Build setup",
    "questions": [
        {
            "id": "goal",
            "label": "Goal",
            "prompt": "What should I optimize for?",
            "context": "Cold build 41s.\nWarm build 9s.",
            "options": [
                {"value": "speed", "label": "Speed", "recommended": True},
                {"value": "size", "label": "Size", "description": "Smallest output"},
            ],
        },
        {
            "id": "tone",
            "label": "Tone",
            "prompt": "Which tones fit?",
            "type": "multi",
            "options": [
                {"value": "formal", "label": "Formal"},
                {"value": "casual", "label": "Casual"},
            ],
        },
    ],
}


@attrs.define
class Pane:
    socket: Path
    target: str
    output: trio.lowlevel.FdStream

    async def tmux(self, *args: str) -> str:
        done = await trio.run_process(
            ["tmux", "-S", str(self.socket), *args], capture_stdout=True, capture_stderr=True
        )
        return done.stdout.decode("utf-8", "replace")

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", self.target)

    async def wait_for(self, condition: str | Callable[[str], bool]) -> str:
        """The screen once it contains ``condition`` (or ``condition(screen)`` holds)."""
        while True:
            text = await self.screen()
            if (condition in text) if isinstance(condition, str) else condition(text):
                return text
            await self.output.receive_some(65536)  # sleep until the command writes again

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", self.target, *keys)

    async def literal(self, text: str) -> None:
        await self.tmux("send-keys", "-t", self.target, "-l", text)

    async def finished(self) -> None:
        """Until the command signals ``wait-for -S finished`` (tmux keeps a signal sent before
        anyone waits, so this may come after it)."""
        await self.tmux("wait-for", "finished")


@asynccontextmanager
async def pane(tmp_path: Path, command: str, columns: int, lines: int) -> AsyncIterator[Pane]:
    socket = tmp_path / "tmux.sock"
    fifo = tmp_path / "pane.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    # Our own write end keeps the FIFO from reading as closed before tmux attaches its own.
    keeper = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    await trio.run_process(
        [
            "tmux",
            "-S",
            str(socket),
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "ask",
            "-x",
            str(columns),
            "-y",
            str(lines),
            command,
        ],
        env=env,
    )
    handle = Pane(socket, "ask", trio.lowlevel.FdStream(reader))
    try:
        await handle.tmux("pipe-pane", "-t", "ask", f"cat >> {fifo}")
        yield handle
    finally:
        with trio.CancelScope(shield=True):
            await trio.run_process(
                ["tmux", "-S", str(socket), "kill-server"], check=False, capture_stderr=True
            )
            await handle.output.aclose()
            os.close(keeper)


def context_beside(screen: str) -> bool:
    return any("Size" in row and "Warm build 9s." in row for row in screen.splitlines())


def context_below(screen: str) -> bool:
    rows = screen.splitlines()
    size = next((i for i, row in enumerate(rows) if "2. ( ) Size" in row), None)
    warm = next((i for i, row in enumerate(rows) if "Warm build 9s." in row), None)
    return size is not None and warm is not None and warm > size + 1


async def test_ask_in_a_real_terminal_with_a_resize(tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(PAYLOAD))
    out, status = tmp_path / "out.json", tmp_path / "status"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = (
        f"{COMMAND} ask {payload} --settings {settings} > {out}; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, 120, 30) as term:
            screen = await term.wait_for("What should I optimize for?")
            assert "Build setup" in screen
            assert "(recommended)" in screen
            assert context_beside(screen)

            # Resize mid-form: the screen re-renders for the new width.
            await term.tmux("resize-window", "-t", "ask", "-x", "60", "-y", "30")
            screen = await term.wait_for(context_below)
            assert all(len(row) <= 60 for row in screen.splitlines())

            await term.keys("Down", "n")
            await term.wait_for("Note: Add a note...")
            await term.literal("too big")
            await term.keys("Enter")
            await term.wait_for("Note: too big")
            await term.keys("1")
            await term.wait_for("Which tones fit?")
            await term.keys("Space", "Down", "Space", "Enter")
            screen = await term.wait_for("Review your answers")
            assert "→ Formal" in screen and "→ Casual" in screen
            assert "Size (not selected) note: too big" in screen

            await term.tmux("resize-window", "-t", "ask", "-x", "100", "-y", "30")
            await term.wait_for(lambda text: any(len(row) > 60 for row in text.splitlines()))
            await term.keys("1")
            await term.wait_for("Press 1 again")
            await term.keys("1")
            await term.finished()

    assert status.read_text().strip() == "0"
    result = json.loads(out.read_text())
    assert result["details"]["cancelled"] is False
    assert result["details"]["answers"]["goal"] == {
        "values": ["speed"],
        "labels": ["Speed"],
        "indices": [1],
        "optionNotes": {"size": "too big"},
    }
    assert result["details"]["answers"]["tone"]["values"] == ["formal", "casual"]
    assert result["structuredContent"]["answers"]["tone"]["labels"] == ["Formal", "Casual"]


async def test_escape_cancels_and_the_exit_status_says_so(tmp_path: Path) -> None:
    """Alt+Q first (tmux sends Esc and ``q`` in one write), which must not read as Esc."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(PAYLOAD))
    out, status = tmp_path / "out.json", tmp_path / "status"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = (
        f"{COMMAND} ask {payload} --settings {settings} > {out}; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, 100, 30) as term:
            await term.wait_for("What should I optimize for?")
            await term.keys("M-q")
            await term.wait_for("Alt+Q does nothing here")
            await term.keys("Escape")
            await term.finished()
    assert status.read_text().strip() == "1"
    assert json.loads(out.read_text())["details"]["cancelled"] is True


async def test_interactive_demo_answers_background_forms(tmp_path: Path) -> None:
    """``pi-agent-ask demo``: each queued form shows in the panel while the agent works; the
    scripted agent finishes with every answer; ``/quit`` leaves, the transcript stays."""
    status = tmp_path / "status"
    command = (
        f"{COMMAND} demo; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished; sleep 5"
    )
    with trio.fail_after(90):
        async with pane(tmp_path, command, 100, 30) as term:
            for prompt, keys in (
                ("Where should the service run first?", ["1"]),
                ("Which checks must pass before the rollout?", ["1", "3", "Enter"]),
                ("When may the rollout start?", ["2"]),
            ):
                await term.wait_for(prompt)
                await term.keys(*keys)
                await term.wait_for("Review your answers")
                await term.keys("1")
                await term.wait_for("Press 1 again")
                await term.keys("1")
            await term.wait_for("Done: every answer is in.")
            await term.literal("/quit")
            await term.keys("Enter")
            await term.finished()
            screen = await term.tmux("capture-pane", "-p", "-t", "ask", "-S", "-100")
    assert status.read_text().strip() == "0"
    assert "Done: every answer is in." in screen
    assert "Unit tests, Canary" in screen  # the multi-select answer typed above


NARROW = {
    "questions": [
        {
            "id": "goal",
            "label": "Goal",
            "prompt": "What should I optimize for?",
            "options": [{"value": "speed", "label": "Speed"}, {"value": "size", "label": "Size"}],
        }
    ]
}

LONG_ANSWER = (
    "the deployment pipeline configuration needs reconsideration because of "
    "intermittently failing integration tests"
)


async def test_at_40_columns_the_editor_wraps_at_words_and_n_notes_a_typed_answer(
    tmp_path: Path,
) -> None:
    """``ask`` at 40x12: a long typed answer wraps between words, never inside one; ``n`` on the
    ``Type your own`` row opens the question's note (a typed answer has no option to note)."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(NARROW))
    out, status = tmp_path / "out.json", tmp_path / "status"
    command = (
        f"{COMMAND} ask {payload} --settings {tmp_path / 'settings.json'} > {out}; "
        f"echo $? > {status}; tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    words = set(LONG_ANSWER.split())
    with trio.fail_after(60):
        async with pane(tmp_path, command, 40, 12) as term:
            await term.wait_for("What should I optimize for?")
            await term.keys("Down", "Down")
            await term.wait_for("Type answer")
            await term.literal(LONG_ANSWER)
            screen = await term.wait_for("integration tests")
            rows = screen.splitlines()
            first = next(i for i, row in enumerate(rows) if "> the deployment" in row)
            last = next(i for i, row in enumerate(rows) if "integration tests" in row)
            shown = [rows[first].split("> ", 1)[1], *rows[first + 1 : last + 1]]
            assert len(shown) > 1  # wrapped
            for row in shown:
                assert set(row.split()) <= words, row  # whole words only
            await term.keys("Escape")  # save and close the editor; the row stays chosen
            await term.wait_for(lambda text: "Type answer" not in text and "Esc cancel" in text)
            await term.keys("n")
            await term.wait_for("Question note: Add a note")
            await term.literal("from the nightly runs")
            await term.wait_for("from the nightly runs")
            await term.keys("Enter")
            # The note editor closes (its row may scroll out of 12 rows: the result has it).
            await term.wait_for(lambda text: "save note" not in text and "Esc cancel" in text)
            await term.keys("Tab")
            await term.wait_for("Review your answers")
            await term.keys("1")
            await term.wait_for("again")
            await term.keys("1")
            await term.finished()
    assert status.read_text().strip() == "0"
    answer = json.loads(out.read_text())["details"]["answers"]["goal"]
    assert answer["customText"] == LONG_ANSWER
    assert answer["note"] == "from the nightly runs"


async def test_a_settings_file_fixed_by_a_save_clears_its_load_warning(tmp_path: Path) -> None:
    """An invalid settings file: the form's footer warns. A save from the overlay writes a
    valid file, and the warning leaves the footer and does not come back in the overlay."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(NARROW))
    settings = tmp_path / "settings.json"
    settings.write_text('{"schemaVersion": "x"}')
    out, status = tmp_path / "out.json", tmp_path / "status"
    command = (
        f"{COMMAND} ask {payload} --settings {settings} > {out}; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    warning = "Config was invalid or unsupported"
    with trio.fail_after(60):
        async with pane(tmp_path, command, 80, 24) as term:
            screen = await term.wait_for("What should I optimize for?")
            assert warning in screen
            await term.keys("?")
            await term.wait_for("Live settings")
            await term.keys("Enter")  # toggle the first setting: saved at once
            await term.wait_for(lambda text: warning not in text and "[on]" in text)
            await term.keys("Escape")
            screen = await term.wait_for(lambda text: "Live settings" not in text)
            assert "What should I optimize for?" in screen
            assert warning not in screen
            await term.keys("?")
            screen = await term.wait_for("Live settings")
            assert warning not in screen
            await term.keys("Escape", "Escape")
            await term.finished()
    assert json.loads(settings.read_text())["schemaVersion"] == 6


async def test_ask_on_a_session_with_pending_background_forms_shows_its_own_form(
    tmp_path: Path,
) -> None:
    """``ask --session FILE`` is one call: it shows its own form, not the background forms
    waiting in the session (docs/cli.md), and those stay pending there, for the host that
    shows them, with nothing of them lost."""
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime
    from pi_agent_ask.desk.testing import yes_no_form

    session, settings = tmp_path / "agent.pias", tmp_path / "settings.json"
    async with open_runtime(session, "tui", settings, surface=NullSurface()) as runtime:
        kept = [
            (await runtime.call_tool("ask_user", yes_no_form(label, background=True)))[
                "structuredContent"
            ]["requestId"]
            for label in ("Older question", "Second older question")
        ]
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(NARROW))
    out, status = tmp_path / "out.json", tmp_path / "status"
    command = (
        f"{COMMAND} ask {payload} --session {session} --settings {settings} > {out}; "
        f"echo $? > {status}; tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, 40, 12) as term:
            screen = await term.wait_for(lambda text: "optimize" in text or "Older" in text)
            assert "Older question" not in screen, screen
            assert "What should I optimize for?" in screen
            await term.keys("1")
            await term.wait_for("Review your answers")
            await term.keys("1")
            await term.wait_for("again")
            await term.keys("1")
            await term.finished()
    assert status.read_text().strip() == "0", out.read_text()
    assert json.loads(out.read_text())["details"]["answers"]["goal"]["values"] == ["speed"]
    async with open_runtime(session, "tui", settings, surface=NullSurface()) as runtime:
        stats = await runtime.statistics()
    assert list(stats.pending) == kept
