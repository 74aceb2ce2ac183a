"""End to end: the installed ``pi-agent-ask demo`` in a real terminal (a tmux pane).

The shell runs on tmux's pseudo-terminal; ``send-keys`` types and ``capture-pane`` reads the
screen. Waits are driven by the pane's output (``pipe-pane`` into a FIFO): the screen is read
again only after the command wrote something. A private tmux server (its own socket) is used
and only that server is killed.
"""

from __future__ import annotations

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
REGION_PROMPT = "Where should the service run first?"
CHECKS_PROMPT = "Which checks must pass before the rollout?"


@attrs.define
class Pane:
    socket: Path
    output: trio.lowlevel.FdStream

    async def tmux(self, *args: str) -> str:
        done = await trio.run_process(
            ["tmux", "-S", str(self.socket), *args], capture_stdout=True, capture_stderr=True
        )
        return done.stdout.decode("utf-8", "replace")

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", "demo")

    async def wait_for(self, condition: str | Callable[[str], bool]) -> str:
        """The screen once it contains ``condition`` (or ``condition(screen)`` holds)."""
        while True:
            text = await self.screen()
            if (condition in text) if isinstance(condition, str) else condition(text):
                return text
            await self.output.receive_some(65536)  # until the command writes again

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "demo", *keys)

    async def literal(self, text: str) -> None:
        await self.tmux("send-keys", "-t", "demo", "-l", text)


@asynccontextmanager
async def pane(tmp_path: Path, command: str, columns: int, lines: int) -> AsyncIterator[Pane]:
    socket = tmp_path / "tmux.sock"
    fifo = tmp_path / "pane.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    keeper = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # the FIFO never reads as closed
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    tmux = ["tmux", "-S", str(socket), "-f", "/dev/null"]
    size = ["-x", str(columns), "-y", str(lines)]
    await trio.run_process([*tmux, "new-session", "-d", "-s", "demo", *size, command], env=env)
    handle = Pane(socket, trio.lowlevel.FdStream(reader))
    try:
        await handle.tmux("pipe-pane", "-t", "demo", f"cat >> {fifo}")
        yield handle
    finally:
        with trio.CancelScope(shield=True):
            await trio.run_process(
                ["tmux", "-S", str(socket), "kill-server"], check=False, capture_stderr=True
            )
            await handle.output.aclose()
            os.close(keeper)


def fits(columns: int) -> Callable[[str], bool]:
    def check(screen: str) -> bool:
        rows = screen.splitlines()
        return all(len(row) <= columns for row in rows) and any(
            row.startswith("─ Questions pending") and len(row) == columns for row in rows
        )

    return check


async def test_demo_shell_in_a_real_terminal(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    session = tmp_path / "demo.session"
    status = tmp_path / "status"
    command = (
        f"{COMMAND} demo --settings {settings} --session {session}; echo $? > {status}; "
        f"tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished; sleep 30"
    )
    with trio.fail_after(30):
        async with pane(tmp_path, command, 100, 32) as term, trio.open_nursery() as nursery:
            finished = trio.Event()

            async def wait_finished() -> None:
                await term.tmux("wait-for", "finished")
                finished.set()

            nursery.start_soon(wait_finished)
            screen = await term.wait_for(REGION_PROMPT)
            rows = screen.splitlines()
            editor = max(i for i, row in enumerate(rows) if row.startswith("> "))
            assert rows.index(REGION_PROMPT) < editor  # the panel sits above the editor

            # The panel has the focus: answer with keys, Review needs its key twice.
            await term.keys("1")
            await term.wait_for("Review your answers")
            await term.keys("1")
            await term.wait_for("Press 1 again")
            await term.keys("1")
            await term.wait_for("Deployment plan · ✓ Answers received")
            await term.wait_for(CHECKS_PROMPT)  # the next queued form takes the panel

            # Resize mid-way: everything is laid out again for the new width.
            await term.tmux("resize-window", "-t", "demo", "-x", "70", "-y", "32")
            screen = await term.wait_for(fits(70))
            assert CHECKS_PROMPT in screen

            # Leave from the editor: Alt+Q moves the focus there, /quit exits.
            await term.keys("M-q")
            await term.wait_for("Alt+Q: questions")
            await term.literal("/quit")
            await term.wait_for("> /quit")
            await term.keys("Enter")
            await finished.wait()
            scrollback = await term.tmux("capture-pane", "-p", "-t", "demo", "-S", "-200")
    assert status.read_text().strip() == "0"
    # The transcript stays in the terminal's scrollback after the full-screen shell closed.
    assert "Deployment plan · ✓ Answers received" in scrollback
    assert "→ EU West" in scrollback
    assert session.stat().st_size > 0
