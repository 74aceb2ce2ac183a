"""A virtual terminal for driving the UI in tests: prompt_toolkit output into a pyte screen.

The application writes real VT100 output; :class:`VirtualTerminal` feeds it to a ``pyte``
screen of a fixed size and keeps every byte written, so tests read the screen the way a person
would see it and can inspect the raw stream. Waiting is driven by output, not by a clock:
:meth:`VirtualTerminal.wait_for` sleeps until the next flush and checks again. Wrap waits in
``trio.fail_after``.

``pyte`` is a test dependency; it is imported when a terminal is created.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

__all__ = ["Asking", "VirtualTerminal", "asking", "sgr_click", "sgr_mouse"]


class VirtualTerminal:
    """A ``columns`` x ``lines`` terminal screen behind a prompt_toolkit ``Output``."""

    encoding = "utf-8"

    def __init__(self, columns: int = 100, lines: int = 30) -> None:
        import pyte

        self.screen = pyte.Screen(columns, lines)
        self._stream = pyte.Stream(self.screen)
        self.chunks: list[str] = []
        self._pending: list[str] = []
        self._flushed = trio.Event()
        self.output = Vt100_Output(self, self.size, term="xterm-256color")  # type: ignore[arg-type]

    # -- the file-like side prompt_toolkit writes to ------------------------------------------

    def write(self, data: str) -> int:
        self._pending.append(data)
        return len(data)

    def flush(self) -> None:
        if self._pending:
            data = "".join(self._pending)
            self._pending.clear()
            self.chunks.append(data)
            self._stream.feed(data)
        self._flushed.set()
        self._flushed = trio.Event()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("a virtual terminal has no file descriptor")

    # -- what tests use -----------------------------------------------------------------------

    def size(self) -> Size:
        return Size(rows=self.screen.lines, columns=self.screen.columns)

    def resize(self, columns: int, lines: int) -> None:
        """Change the screen size; the next redraw uses it."""
        self.screen.resize(lines, columns)

    @property
    def raw(self) -> str:
        """Everything written so far."""
        return "".join(self.chunks)

    def rows(self) -> list[str]:
        return [row.rstrip() for row in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.rows())

    def cursor(self) -> tuple[int, int]:
        """``(row, column)`` of the terminal cursor."""
        return self.screen.cursor.y, self.screen.cursor.x

    def find(self, needle: str) -> tuple[int, int]:
        """``(row, column)`` of the first occurrence of ``needle`` on screen; ValueError if none."""
        for y, row in enumerate(self.rows()):
            x = row.find(needle)
            if x >= 0:
                return y, x
        raise ValueError(f"{needle!r} is not on the screen:\n{self.text()}")

    def style_at(self, row: int, column: int) -> Any:
        """The pyte character (with its colours and attributes) at a cell."""
        return self.screen.buffer[row][column]

    async def wait_for(self, condition: str | Callable[[VirtualTerminal], bool]) -> None:
        """Wait until the screen contains ``condition`` (a text) or ``condition(self)`` holds."""
        while True:
            if isinstance(condition, str):
                if condition in self.text():
                    return
            elif condition(self):
                return
            await self._flushed.wait()

    async def wait_gone(self, text: str) -> None:
        """Wait until ``text`` is no longer on the screen."""
        await self.wait_for(lambda term: text not in term.text())

    async def wait_written(self, needle: str, since: int) -> None:
        """Wait until a chunk written after the first ``since`` chunks contains ``needle``
        (cheaper than reading the screen: benchmarks time redraws with it)."""
        while not any(needle in chunk for chunk in self.chunks[since:]):
            await self._flushed.wait()


def sgr_mouse(button: int, column: int, row: int, *, release: bool = False) -> str:
    """An xterm SGR mouse report for a 0-based screen cell (``button`` 0 = left, 32 = left drag,
    64/65 = wheel up/down)."""
    return f"\x1b[<{button};{column + 1};{row + 1}{'m' if release else 'M'}"


def sgr_click(column: int, row: int) -> str:
    """A complete left click (press and release) on a 0-based screen cell."""
    return sgr_mouse(0, column, row) + sgr_mouse(0, column, row, release=True)


@attrs.define(repr=False)
class Asking:
    """A running ``ask`` command on a virtual terminal (see :func:`asking`)."""

    term: VirtualTerminal
    pipe: PipeInput
    settings: Path
    status: int | None = None
    result: dict[str, Any] | None = None
    done: trio.Event = attrs.field(factory=trio.Event)

    def send(self, *keys: str) -> None:
        """Type ``keys`` (the bytes a terminal would send)."""
        for key in keys:
            self.pipe.send_text(key)

    async def wait(self, text: str) -> None:
        await self.term.wait_for(text)

    async def wait_gone(self, text: str) -> None:
        await self.term.wait_gone(text)

    async def finished(self) -> tuple[int, dict[str, Any]]:
        """Wait for the command to return; its exit status and tool result."""
        await self.done.wait()
        assert self.status is not None and self.result is not None
        return self.status, self.result


@asynccontextmanager
async def asking(
    arguments: Any,
    settings: Path,
    *,
    columns: int = 100,
    lines: int = 30,
    session: Path | None = None,
    clipboard: Any = None,
    cwd: Path | None = None,
    on_notices: Any = None,
) -> AsyncIterator[Asking]:
    """Run ``run_ask(arguments)`` on a virtual terminal fed by a pipe input; leaving the block
    waits for the command to return."""
    from pi_agent_ask.ui.commands import run_ask

    term = VirtualTerminal(columns, lines)
    with create_pipe_input() as pipe:
        handle = Asking(term, pipe, settings)
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                handle.status, handle.result = await run_ask(
                    arguments,
                    settings=settings,
                    session=session,
                    input=pipe,
                    output=term.output,
                    clipboard=clipboard,
                    cwd=cwd,
                    on_notices=on_notices,
                )
                handle.done.set()

            nursery.start_soon(run)
            yield handle
            await handle.done.wait()
