"""``open_runtime`` with the terminal UI: the place where the runtime is assembled with its
surface. The actors never import the UI; this module hands them a factory for the terminal
surface (``TerminalSurface`` under prompt_toolkit), used in ``tui`` mode when no ``surface``
is given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs

from pi_agent_ask.actors import runtime as rt
from pi_agent_ask.actors.form import Surface
from pi_agent_ask.ui import surface as terminal_ui
from pi_agent_ask.ui.surface import TerminalSurface


@attrs.define(eq=False, repr=False)
class _Screen:
    """The runtime's ``Terminal``: a ``TerminalSurface`` and its application."""

    surface: TerminalSurface

    def attach(self, apply_settings: Callable[[Any], None], cwd: Path) -> None:
        self.surface.on_settings_saved = apply_settings
        self.surface.controller.cwd = cwd

    async def run(self, input: Any, output: Any, *, task_status: Any) -> None:
        # Looked up on the module at run time: a host (or a test) may replace the application.
        await terminal_ui.run_terminal_surface(
            self.surface, input=input, output=output, task_status=task_status
        )


def terminal_screen(loaded: Any) -> _Screen:
    """The terminal factory ``open_runtime`` passes to the actors."""
    return _Screen(TerminalSurface(loaded))


@asynccontextmanager
async def open_runtime(
    session: str | Path | None = None,
    mode: rt.Mode = "tui",
    settings: str | Path | None = None,
    input: Any = None,
    output: Any = None,
    cwd: str | Path | None = None,
    *,
    surface: Surface | None = None,
    write_terminal: Any = None,
) -> AsyncIterator[rt.Runtime]:
    """Open a runtime; see ``API.md``. Leaving the block disposes every actor.

    ``surface`` replaces the terminal UI (tests and headless hosts pass ``NullSurface()``);
    ``write_terminal`` receives notification bytes (bell, OSC) instead of the terminal.
    """
    async with rt.open_runtime(
        session,
        mode,
        settings,
        input,
        output,
        cwd,
        surface=surface,
        write_terminal=write_terminal,
        terminal=terminal_screen,
    ) as runtime:
        yield runtime


@asynccontextmanager
async def open_one_call_runtime(
    session: str | Path | None,
    settings: str | Path | None,
    cwd: str | Path | None,
    *,
    surface: Surface,
    write_terminal: Any = None,
) -> AsyncIterator[rt.Runtime]:
    """A ``tui`` runtime on ``surface`` for one foreground call (the ``ask`` command): the
    session's pending background forms are not shown and its interrupted calls not reopened;
    they stay pending, untouched, for the host that asked them."""
    async with rt.open_runtime(
        session,
        "tui",
        settings,
        cwd=cwd,
        surface=surface,
        write_terminal=write_terminal,
        one_call=True,
    ) as runtime:
        yield runtime
