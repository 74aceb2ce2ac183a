"""The interactive host: a LocalHost in the shell (transcript, panel, status, editor).

:func:`open_shell_host` runs the shell application (``ui/shell.py``) beside a runtime whose
surface is the shell, and a LocalHost whose transcript is the shell's. Three small tasks serve
the shell while the block runs:

- commands: what the person typed or pressed, in order. Slash commands ``/ask-settings``,
  ``/ask-defer``, ``/ask-queue``, ``/ask-mode`` and ``/quit``; any other text is ordinary
  input (``LocalHost.user_says``: it releases a running wait as ``deferred`` and hides the
  panel). ``Esc`` in the panel defers all; ``Ctrl+D`` quits;
- notices: ``runtime.notices`` become transcript lines and the status line's notice;
- status: ``Questions pending: <n>`` and the panel/wait state, refreshed when something
  changed (a form shown or hidden, a transcript line, an event), never on a timer.

:func:`run_interactive_demo` is ``pi-agent-ask demo`` on a terminal: the scripted demo agent
works in this shell until it is done, then stays idle (late answers wake it, messages get a
short reply) until the person presses ``Ctrl+D`` or types ``/quit``; then the transcript is
printed on the ordinary screen, so it stays in the terminal's scrollback. Without a terminal
it runs the headless demo instead, and says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output

from pi_agent_ask import events as ev
from pi_agent_ask.actors.runtime import Runtime
from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.host.demo import run_demo, scripted_agent
from pi_agent_ask.host.local import LocalHost
from pi_agent_ask.persistence.settings import load_settings, settings_path
from pi_agent_ask.ui.runtime import open_runtime
from pi_agent_ask.ui.shell import DeferAll, EditorInput, Quit, ShellCommand, ShellSurface, run_shell

__all__ = [
    "FALLBACK_TEXT",
    "FINISHED_TEXT",
    "ShellHost",
    "ShellLocalHost",
    "open_shell_host",
    "run_interactive_demo",
]

FALLBACK_TEXT = (
    "pi-agent-ask demo: no interactive terminal here; running the headless demo "
    "(a scripted answerer plays the person)."
)
FINISHED_TEXT = "The demo agent is done. Press Ctrl+D or type /quit to exit."
COMMANDS_TEXT = "Commands: /ask-settings /ask-defer /ask-queue /ask-mode /quit."
RESUMED_TEXT = (
    "Resumed the session: {count} form(s) from the earlier run are still pending; the script "
    "is not run again. Answer them in the panel (/ask-queue shows them)."
)
BUSY_REPLY = "● I read your message; I will take it into account after this step."


def _is_command(text: str) -> bool:
    """``/word``: a slash command (a path such as ``/tmp/x`` typed as chat has a second
    slash and is chat)."""
    if not text.startswith("/") or len(text) < 2:
        return False
    name = text.split()[0]
    return "/" not in name[1:]


MODE_TEXT = {
    "standard": "Question mode: standard (ask_user with background, wait_for_answers).",
    "background-only": "Question mode: background-only (ask_user always queues; "
    "wait_for_answers is hidden).",
}


@attrs.define(eq=False)
class ShellLocalHost(LocalHost):
    """A LocalHost that tells the shell what its agent is doing: working (in a turn),
    waiting for answers (in ``wait_for_answers``) or idle. The host knows this itself, so
    the status line never has to ask the runtime at the right moment."""

    on_activity: Callable[[str], None] = lambda _activity: None
    finished: bool = False
    """The agent's script is over (the demo): the status line says how to leave."""

    async def turn(self, body: Callable[[LocalHost], Awaitable[None]]) -> None:
        self.on_activity("working")
        try:
            await super().turn(body)
        finally:
            self.on_activity("idle")

    async def call(self, name: str, arguments: Any, parent: str | None = None) -> dict[str, Any]:
        if name != "wait_for_answers":
            return await super().call(name, arguments, parent)
        self.on_activity("waiting")
        try:
            return await super().call(name, arguments, parent)
        finally:
            self.on_activity("working")


ACTIVITY_TEXT = {
    "working": "agent working",
    "waiting": "agent waiting for answers",
    "idle": "agent idle",
}


@attrs.define(eq=False)
class ShellHost:
    """A LocalHost whose transcript, panel and input are the shell.

    ``quit`` is set when the person asks to leave (``Ctrl+D``, ``/quit``). ``on_message``, when
    set, receives ordinary input after it reached the runtime (an agent loop that reacts to it).
    """

    runtime: Runtime
    host: ShellLocalHost
    view: ShellSurface
    quit: trio.Event = attrs.field(factory=trio.Event)
    on_message: Callable[[str], Awaitable[None]] | None = None
    _refresh_tx: trio.MemorySendChannel[None] | None = None

    # -- commands ---------------------------------------------------------------------------

    async def serve_commands(self) -> None:
        """Handle the shell's commands, one at a time, in the order they were given."""
        async for command in self.view.commands:
            await self.handle(command)

    async def handle(self, command: ShellCommand) -> None:
        match command:
            case EditorInput(text=text):
                await self.dispatch(text)
            case DeferAll():
                await self.defer()
            case Quit():
                self.quit.set()

    async def dispatch(self, text: str) -> None:
        """One line from the editor: a slash command, or ordinary input for the agent."""
        match text.strip():
            case "/ask-settings":
                self.view.open_settings()
            case "/ask-defer":
                await self.defer()
            case "/ask-queue":
                await self.show_queue()
            case "/ask-mode":
                await self.toggle_mode()
            case "/quit" | "/exit":
                self.quit.set()
            case command if _is_command(command):
                # Not chat: a mistyped command must not reach the agent or hide the panel.
                name = command.split()[0]
                self.view.notice(f"Unknown command {name}. {COMMANDS_TEXT}")
            case _:
                await self.host.user_says(text)
                if self.on_message is not None:
                    await self.on_message(text)
        self.refresh()

    async def defer(self) -> None:
        """``Esc`` in the panel, ``/ask-defer``: hide the panel, defer every question."""
        await self.runtime.defer_queue()
        stats = await self.runtime.statistics()
        if stats.pending:
            self.view.set_notice("Questions deferred; /ask-queue shows them again.")
        self.refresh()

    async def show_queue(self) -> None:
        """``/ask-queue``: reopen the panel on the pending questionnaire and focus it."""
        stats = await self.runtime.statistics()
        if not stats.pending:
            self.view.set_notice("No questions pending.")
            return
        await self.runtime.show_queue()
        self.view.focus_panel()
        self.refresh()

    async def toggle_mode(self) -> None:
        """``/ask-mode``: switch between standard and background-only question mode.

        After the first model request the runtime asks (through the shell's yes/no line)
        before a change of the agent's tools; a refusal changes nothing.
        """
        wanted = "standard" if self.runtime.config.background_only else "background-only"
        changed = await self.runtime.set_question_mode(wanted, confirm=self.view.confirm)
        if changed:
            self.view.notice(MODE_TEXT[wanted])
        else:
            current = "background-only" if self.runtime.config.background_only else "standard"
            self.view.notice(f"Question mode unchanged: {current}.")

    # -- notices and status -----------------------------------------------------------------

    async def serve_notices(self) -> None:
        async for text in self.runtime.notices:
            self.view.notice(text)

    def refresh(self) -> None:
        """Ask for a status refresh; requests made before it runs are one refresh."""
        if self._refresh_tx is None:
            return
        # WouldBlock: a refresh is already due; closed: the shell is closing.
        with suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self._refresh_tx.send_nowait(None)

    async def serve_status(self) -> None:
        # Buffer 1: one outstanding refresh request covers any number of changes before it.
        self._refresh_tx, requests = trio.open_memory_channel[None](1)
        async with requests:
            self.refresh()
            async for _ in requests:
                stats = await self.runtime.statistics()
                parts = [f"Questions pending: {len(stats.pending)}"]
                if stats.pending and not stats.panel_visible:
                    parts.append("hidden (/ask-queue)")
                self.view.set_status(" · ".join(parts))


@asynccontextmanager
async def open_shell_host(
    *,
    session: Path | None = None,
    settings: Path | None = None,
    input: Input | None = None,
    output: Output | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[ShellHost]:
    """Run the shell and a TUI runtime with it; yields the :class:`ShellHost`.

    ``input``/``output`` are prompt_toolkit objects (``None``: the process's terminal).
    Leaving the block closes the runtime first (drafts are saved), then the shell.
    """
    path = Path(settings) if settings is not None else settings_path(os.environ)
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    loaded = await trio.to_thread.run_sync(
        functools.partial(load_settings, path, project_dir=work_dir)
    )
    view = ShellSurface(loaded)
    columns = output.get_size().columns if output is not None else _terminal_columns()
    async with trio.open_nursery() as outer:
        await outer.start(functools.partial(run_shell, view, input=input, output=output))
        async with open_runtime(
            session=session,
            mode="tui",
            settings=path,
            input=input,
            output=output,
            cwd=work_dir,
            surface=view,
        ) as runtime:
            view.on_settings_saved = runtime.apply_settings
            host = ShellLocalHost(runtime, view.append, width=columns)
            shell = ShellHost(runtime, host, view)

            def activity(what: str) -> None:
                note = ACTIVITY_TEXT.get(what, what)
                if host.finished:
                    note = "demo agent finished · Ctrl+D or /quit exits"
                view.set_agent_note(note)

            def line(item: Any) -> None:
                view.append(item)
                shell.refresh()

            def started(payload: Any) -> None:
                if payload.get("source") == "background":
                    view.mark_background(payload["flowId"])
                shell.refresh()

            def width(columns: int) -> None:
                host.width = columns

            host.emit = line
            host.mark = view.mark
            host.place = view.insert
            host.on_activity = activity
            view.on_change = shell.refresh
            view.on_width = width
            unsubscribe = [
                runtime.events.on(ev.STARTED, started),
                runtime.events.on(ev.COMPLETED, lambda _payload: shell.refresh()),
            ]
            try:
                async with trio.open_nursery() as tasks:
                    tasks.start_soon(shell.serve_commands)
                    tasks.start_soon(shell.serve_notices)
                    tasks.start_soon(shell.serve_status)
                    try:
                        yield shell
                    finally:
                        tasks.cancel_scope.cancel()
            finally:
                for off in unsubscribe:
                    off()
        outer.cancel_scope.cancel()


def _terminal_columns() -> int:
    return shutil.get_terminal_size().columns


async def run_demo_agent(shell: ShellHost, pace: float = 1.0) -> None:
    """The scripted demo agent, then an idle agent until cancelled.

    Idle, a late answer wakes the agent (its card enters the transcript, the agent notes it),
    and a message from the person gets a short reply; each in its own turn, one at a time.
    """
    host = shell.host

    async def busy_reply(_text: str) -> None:
        # A message while the script runs: the agent says it read it (it is in its context
        # through ``user_says`` already); the script goes on.
        host.say(BUSY_REPLY, "accent")

    stats = await shell.runtime.statistics()
    if stats.pending:
        host.say(RESUMED_TEXT.format(count=len(stats.pending)), "accent")
    else:
        shell.on_message = busy_reply
        try:
            await scripted_agent(host, pace)
        finally:
            shell.on_message = None
    host.say(FINISHED_TEXT, "muted")
    shell.host.finished = True
    shell.host.on_activity("idle")
    inbox_tx, inbox_rx = trio.open_memory_channel[tuple[str, Any]](0)

    async def forward_wakeups() -> None:
        async for message in shell.runtime.wakeups:
            await inbox_tx.send(("wake", message))

    async def forward_message(text: str) -> None:
        await inbox_tx.send(("message", text))

    async def noted(h: LocalHost) -> None:
        h.say("● Thanks, that answer is noted.", "accent")

    async def replied(h: LocalHost) -> None:
        h.say("● The demo script is over, so I only note your message.", "accent")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward_wakeups)
        shell.on_message = forward_message
        try:
            async for kind, item in inbox_rx:
                if kind == "wake":
                    host.deliver(item)
                    await host.turn(noted)
                else:
                    await host.turn(replied)
        finally:
            shell.on_message = None


async def run_interactive_demo(
    *,
    session: Path | None,
    settings: Path | None,
    input: Input | None = None,
    output: Output | None = None,
    pace: float = 1.0,
) -> int:
    """``pi-agent-ask demo``: the scripted agent in the shell; returns the exit status ``0``.

    The shell stays after the agent is done, until the person presses ``Ctrl+D`` or types
    ``/quit``. Without a terminal (and without ``input``/``output``), the headless demo runs
    instead, after a one-line explanation. ``pace`` scales the agent's pauses (tests).
    """
    if input is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(FALLBACK_TEXT, flush=True)
        return await run_demo(session=session, settings=settings, headless=True, pace=pace)
    async with (
        open_shell_host(session=session, settings=settings, input=input, output=output) as shell,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(run_demo_agent, shell, pace)
        await shell.quit.wait()
        nursery.cancel_scope.cancel()
    if output is None:
        # The full-screen shell is gone; its transcript stays in the terminal's scrollback.
        for line in shell.view.transcript.lines:
            print(line_text(line), flush=True)
    return 0
