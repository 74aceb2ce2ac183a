"""The ``ask`` and ``settings`` commands on a terminal, for the command line to call.

``run_ask`` opens a runtime in TUI mode with a :class:`TerminalSurface` running beside it,
makes one ``ask_user`` call, and returns the exit status with the tool result. ``run_settings``
shows the settings overlay alone until it is closed. Neither prints anything: the caller owns
standard output (and decides where the JSON goes) and the choice of terminal.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output

from pi_agent_ask.persistence.settings import load_settings, settings_path
from pi_agent_ask.ui.runtime import open_one_call_runtime
from pi_agent_ask.ui.surface import TerminalSurface, run_terminal_surface

if TYPE_CHECKING:  # the clipboard module is imported on the first paste
    from pi_agent_ask.clipboard import ClipboardResult

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_INVALID",
    "EXIT_SUBMITTED",
    "exit_status",
    "run_ask",
    "run_settings",
]

EXIT_SUBMITTED = 0
EXIT_CANCELLED = 1
EXIT_INVALID = 2


def exit_status(result: Mapping[str, Any]) -> int:
    """``0`` submitted, ``1`` cancelled or dismissed, ``2`` invalid input (a schema error
    result, or ``details.error``)."""
    if result.get("isError"):
        return EXIT_INVALID
    details = result.get("details")
    if not isinstance(details, Mapping):
        return EXIT_INVALID
    if details.get("error") is not None:
        return EXIT_INVALID
    return EXIT_CANCELLED if details.get("cancelled") else EXIT_SUBMITTED


def _settings_file(settings: Path | None) -> Path:
    return Path(settings) if settings is not None else settings_path(os.environ)


def _terminal_writer(output: Output | None) -> Any:
    """Notification bytes (bell, OSC) go to the form's terminal, never to standard output."""
    if output is None:
        return None

    def write(text: str) -> None:
        output.write_raw(text)
        output.flush()

    return write


async def run_ask(
    arguments: object,
    *,
    settings: Path | None,
    session: Path | None,
    input: Input | None = None,
    output: Output | None = None,
    cwd: Path | None = None,
    clipboard: Callable[[], Awaitable[ClipboardResult]] | None = None,
    on_notices: Callable[[tuple[str, ...]], None] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Ask one ``ask_user`` call on the terminal; return ``(exit status, tool result)``.

    ``input``/``output`` are the terminal's prompt_toolkit objects (``None``: the process's
    own terminal). ``session`` journals the call into that session file (its pending
    background forms are not shown, and stay pending); a ``background: true``
    call, and any call in the background-only question mode, is asked in the foreground
    (shown and answered). The form appears only
    once the call is valid; an invalid call returns at once with status ``2``. ``clipboard``
    replaces the system clipboard for the editors' paste-image key. ``on_notices`` receives the
    settings file's problems, if any, before the form opens: its ``details`` (which file was
    invalid, and why), then its notices (the command prints them on standard error; the form
    shows the notices too).
    """
    path = _settings_file(settings)
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    loaded = await trio.to_thread.run_sync(
        functools.partial(load_settings, path, project_dir=work_dir)
    )
    if (loaded.details or loaded.notices) and on_notices is not None:
        on_notices((*loaded.details, *loaded.notices))
    surface = TerminalSurface(loaded, clipboard=clipboard)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(run_terminal_surface, surface, input=input, output=output)
        )
        async with open_one_call_runtime(
            session, path, work_dir, surface=surface, write_terminal=_terminal_writer(output)
        ) as runtime:
            # Settings saved in the overlay apply to the runtime too (notifications, the open
            # form's behaviour, forms created later).
            surface.on_settings_saved = runtime.apply_settings
            surface.controller.cwd = work_dir  # relative ``@`` paths start here
            # One call, so no background queue outlives it: the background-only question mode
            # would queue the form and end with it unseen. The settings file keeps its mode.
            runtime.config = attrs.evolve(runtime.config, background_only=False)
            result = await runtime.call_tool("ask_user", _in_the_foreground(arguments))
        nursery.cancel_scope.cancel()
    return exit_status(result), result


def _in_the_foreground(arguments: object) -> object:
    """``background: true`` asked as a foreground call: the command is one call that prints
    its answer, and a background queue ends with the command (its form never shown)."""
    if isinstance(arguments, dict) and arguments.get("background") is True:
        return {**arguments, "background": False}
    return arguments


async def run_settings(
    settings: Path | None,
    input: Input | None = None,
    output: Output | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Show the settings overlay alone until it is closed; returns ``0``. ``clock`` times the
    reset confirmation window."""
    path = _settings_file(settings)
    loaded = await trio.to_thread.run_sync(
        functools.partial(load_settings, path, project_dir=Path.cwd())
    )
    surface = TerminalSurface(loaded, clock=clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(run_terminal_surface, surface, input=input, output=output)
        )
        surface.open_settings()
        await surface.settings_closed.wait()
        nursery.cancel_scope.cancel()
    return 0
