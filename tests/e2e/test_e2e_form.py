"""End to end in tmux: where the cursor is, what a click hits, where focus is, small screens.

Uses the pane helpers of ``test_e2e_ask``: a private tmux server, waits driven by the pane's
output.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.e2e.test_e2e_ask import COMMAND, PAYLOAD, Pane, pane

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


async def cursor(term: Pane) -> tuple[int, int]:
    x, y = (await term.tmux("display", "-p", "-t", term.target, "#{cursor_x} #{cursor_y}")).split()
    return int(x), int(y)


async def wait_cursor(term: Pane, expected: tuple[int, int]) -> None:
    while await cursor(term) != expected:
        await term.output.receive_some(65536)


@asynccontextmanager
async def asking(
    tmp_path: Path, columns: int = 100, lines: int = 30, payload: dict | None = None
) -> AsyncIterator[Pane]:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(payload if payload is not None else PAYLOAD))
    out = tmp_path / "out.json"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = f"{COMMAND} ask {path} --settings {settings} > {out}"
    with trio.fail_after(60):
        async with pane(tmp_path, command, columns, lines) as term:
            yield term


@pytest.mark.parametrize(("typed", "cells"), [("hello", 5), ("日本語です", 10)])
async def test_the_terminal_cursor_follows_typed_text(
    tmp_path: Path, typed: str, cells: int
) -> None:
    async with asking(tmp_path) as term:
        await term.wait_for("What should I optimize for?")
        await term.keys("3")
        screen = await term.wait_for("> Type answer...")
        row = next(i for i, line in enumerate(screen.splitlines()) if "> Type answer" in line)
        col = screen.splitlines()[row].index("> Type answer")
        await wait_cursor(term, (col + 2, row))
        await term.literal(typed)
        await term.wait_for(typed)
        await wait_cursor(term, (col + 2 + cells, row))
        await term.keys("Left")
        await wait_cursor(term, (col + cells, row) if cells > 5 else (col + 1 + cells, row))
