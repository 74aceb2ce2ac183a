"""The runtime: wires the actors and offers the tool calls and host hooks of ``API.md``.

Actors (each owns its state, all talk through memory channels):

- persistence — the session file; every write is acknowledged only once it reached the OS;
- queue — the input surface, the background FIFO, deliveries, waits, Herdr (``queue.py``);
- form — one per visible form, in the tool call's task (foreground) or the queue's nursery
  (background) (``form.py``);
- waiter — the task of a ``wait_for_answers`` call, talking to the queue (``wait.py``);
- notifications — one notification per opened form, never blocking a form.

This module is the facade: ``Runtime`` offers the methods of ``API.md`` over the runtime's state
(``core.RuntimeCore``), each implemented by the module that owns it: host hooks (``hooks``),
tool dispatch (``dispatch``), the three ``ask_user`` paths (``ask``), the wait (``wait``),
remote answers (``remote``), session changes and recovery (``recovery``), settings and the
question mode (``config``). ``open_runtime`` assembles the actors.

The names other modules import from here (texts, ``BranchWriter``, ``RuntimeConfig``, ...) are
re-exported from their owners.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import ask, dispatch, hooks, recovery, remote
from pi_agent_ask.actors import config as cfg
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.config import config_from_settings
from pi_agent_ask.actors.core import (
    MODES,
    TEARDOWN_TIMEOUT,
    BranchWriter,
    Mode,
    RuntimeConfig,
    RuntimeCore,
    now_iso,
    tool_error,
)
from pi_agent_ask.actors.dispatch import CALL_FAILURES, CALL_INTERRUPTED_TEXT, INTERRUPTED_TEXTS
from pi_agent_ask.actors.errors import ToolError, ToolFailed, ToolInterrupted
from pi_agent_ask.actors.form import (
    FormInput,
    NullSurface,
    Surface,
    Terminal,
    TerminalFactory,
    failure_text,
)
from pi_agent_ask.actors.notifications import Notify, discard_terminal, run_notifications
from pi_agent_ask.actors.outcomes import FORM_INTERRUPTED_TEXT
from pi_agent_ask.actors.owner import Owner
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.actors.recovery import RESUME_REASONS, SESSION_REASONS, resume_answer_message
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.text import (
    WAIT_BUSY_TEXT,
    WAIT_HIDDEN_TEXT,
    WAIT_INTERRUPTED_TEXT,
    WAIT_NON_TUI_TEXT,
)

T = TypeVar("T")

__all__ = [
    "CALL_FAILURES",
    "CALL_INTERRUPTED_TEXT",
    "FORM_INTERRUPTED_TEXT",
    "INTERRUPTED_TEXTS",
    "MODES",
    "RESUME_REASONS",
    "SESSION_REASONS",
    "TEARDOWN_TIMEOUT",
    "WAIT_BUSY_TEXT",
    "WAIT_HIDDEN_TEXT",
    "WAIT_INTERRUPTED_TEXT",
    "WAIT_NON_TUI_TEXT",
    "BranchWriter",
    "Mode",
    "Runtime",
    "RuntimeConfig",
    "ToolError",
    "ToolFailed",
    "ToolInterrupted",
    "config_from_settings",
    "now_iso",
    "open_runtime",
    "resume_answer_message",
    "tool_error",
]


class Runtime(RuntimeCore):
    """A running pi-agent-ask runtime. Created by ``open_runtime``; see ``API.md``.

    Inherited from ``RuntimeCore``: ``notice``, ``statistics``, ``defer_queue``, ``quiesce``,
    ``tell_queue``."""

    # Methods only: the fields and their ``__init__`` are ``RuntimeCore``'s (a plain subclass,
    # so attrs does not compile a second ``__init__`` of thirty fields for it at import).
    __slots__ = ()

    # -- host hooks ----------------------------------------------------------------------

    def agent_started(self) -> None:
        """An agent turn started: idle wakes stop until the agent settles again."""
        hooks.agent_started(self)

    def agent_settled(self) -> None:
        """The agent is idle: a ready answer may now wake it (``wakeups``)."""
        hooks.agent_settled(self)

    async def turn_boundary(self, *, text_only: bool = False) -> list[dict[str, Any]]:
        """The background-answer messages to add to the context now (each exactly once, ever).

        ``text_only``: hand out only messages without image blocks (for a caller that can
        pass on text only); the others wait for a later boundary.

        Once the request is with the queue, the reply is taken even if this call is cancelled:
        the queue journals the messages as delivered before replying, and a reply dropped on
        the floor would be an answer marked delivered that the agent never saw. (Shielded but
        not stuck: the queue replies to every request it takes, or its channel closes.)"""
        return await hooks.turn_boundary(self, text_only=text_only)

    async def give_back(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Messages ``turn_boundary`` handed out that never reached the agent (the call that
        took them was cut, a connection broke): they are journaled as given back and go out
        again, first, at the next boundary (or wake), also after a restart. ``ValueError``
        for a message no boundary hands out; a failed write raises, and then nothing was
        given back."""
        await hooks.give_back(self, messages)

    async def user_message(self, text: str) -> None:
        """Ordinary input: releases an active wait as ``deferred`` and hides the panel."""
        await hooks.user_message(self, text)

    async def show_queue(self) -> None:
        """Reopen the panel on the pending questionnaire (``/ask-queue``)."""
        await hooks.show_queue(self)

    async def send_command(self, flow_id: str, command: fs.Command) -> bool:
        """Send a form command (what a key press or click means) to a visible flow."""
        return await hooks.send_command(self, flow_id, command)

    async def surface_failed(self, message: str) -> None:
        """The terminal surface broke: the visible form and every later one end with an error.

        Nothing the person entered is turned into an answer; queued forms keep their drafts
        until they are shown (and then fail too), so a host can restart with a new surface.
        """
        await hooks.surface_failed(self, message)

    # -- tools -----------------------------------------------------------------------------

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The tools this runtime exposes now (they change with the question mode)."""
        return cfg.tool_definitions(self.config)

    def tool_names(self) -> tuple[str, ...]:
        return cfg.tool_names(self.config)

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        tool_call_id: str | None = None,
        parent_tool_call_id: str | None = None,
    ) -> dict[str, Any]:
        """Run one tool call and return its result dict (see ``API.md``).

        Every call ends as a result or a tool error (``isError: true``): arguments that are not
        bounded, valid JSON text (``form/untrusted.py``) are refused before anything is
        journaled; a refused write, a disk failure or a bad path is a tool error. Only
        cancellation and bugs propagate (``docs/errors.md``)."""
        return await dispatch.call_tool(self, name, arguments, tool_call_id, parent_tool_call_id)

    async def read_journal(self, read: Callable[[Any], T]) -> T:
        """``read(session_file)`` run where the journal is (the persistence actor's worker
        thread), for readers outside the tools: the web desk's history and export."""
        result: T = await self._writer.read(read)
        return result

    async def run_background_form(
        self,
        request: AskRequest,
        form: fs.FormState,
        epoch: int,
        scope: trio.CancelScope,
        commands: trio.MemorySendChannel[FormInput],
        inbox: trio.MemoryReceiveChannel[FormInput],
    ) -> None:
        """The body of a visible background form, run in the queue's nursery."""
        await ask.run_background_form(self, request, form, epoch, scope, commands, inbox)

    # -- settings ---------------------------------------------------------------------------

    def apply_settings(self, loaded: Any) -> None:
        """Settings changed (the overlay saved them, a reset, a reload): apply them live.

        Behaviour and notification settings reach the visible form at once and every later
        form; ``presentSingleAsMulti`` applies to forms created from now on. The question mode
        and the history tools keep their values: the mode changes only through
        ``set_question_mode``, the history tools on the next start (000).
        """
        cfg.apply_settings(self, loaded)

    async def set_question_mode(
        self,
        mode: str,
        *,
        confirm: Callable[[str], Awaitable[bool]] | None = None,
    ) -> bool:
        """Switch between ``standard`` and ``background-only`` (what ``/ask-mode`` does).

        Saves ``behaviour.questionMode`` in the global settings file, then applies it. Once the
        agent has made its first model request (``agent_started`` was called), a change of the
        effective tool interface needs ``await confirm(message)`` to return true first (the
        host's cache-impact confirmation); without ``confirm``, or on refusal, nothing changes
        and this returns false. A failed save changes nothing either (the error is a notice).
        Queued questions and answers are kept; enabling background-only releases a running
        ``wait_for_answers`` as ``deferred`` (reason ``mode_changed``) without cancelling forms.
        """
        return await cfg.set_question_mode(self, mode, confirm=confirm)

    # -- session lifecycle ----------------------------------------------------------------

    async def change_session(self, reason: str, session: Any = None) -> None:
        """Dispose what belongs to the old branch and rebuild from the new one.

        ``reason`` is ``startup``, ``resume``, ``fork``, ``new``, ``reload`` or ``tree``.
        ``session`` is the session file to continue with (``resume``, ``fork``: the file the
        branch was forked into, ``new``), or the entry id to move the leaf to (``tree``).
        """
        await recovery.change_session(self, reason, session)

    def _on_submit(self, payload: Any) -> None:
        remote.on_submit(self, payload)


async def _open_runtime(
    session: str | Path | None = None,
    mode: Mode = "tui",
    settings: str | Path | None = None,
    input: Any = None,
    output: Any = None,
    cwd: str | Path | None = None,
    *,
    surface: Surface | None = None,
    write_terminal: Any = None,
    agent_idle: bool = True,
    one_call: bool = False,
    terminal: TerminalFactory | None = None,
    check_actors: bool = False,
    notify_link: Callable[[str], str | None] | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime; see ``API.md``. Leaving the block disposes every actor.

    ``surface`` replaces the terminal UI (tests and headless hosts pass ``NullSurface()``);
    ``write_terminal`` receives notification bytes (bell, OSC) instead of the terminal.
    ``agent_idle=False`` opens with the agent busy: a host that never reads ``wakeups`` (an
    MCP server) passes it, so an answer recovered at open is not handed to an idle wake.
    ``one_call=True`` (the ``ask`` command: one foreground call, then the end) shows only the
    forms of its own calls: no background form of the session and no interrupted call
    reopened; they stay pending, untouched, for the host that asked them.
    ``terminal`` makes the terminal surface of a ``tui`` runtime without ``surface`` (the UI
    layer passes it: ``pi_agent_ask.open_runtime``; ``pi_agent_ask.aio`` passes one whose
    application runs on the host loop); without it such a runtime is headless. The runtime
    attaches it (settings saves, working directory), sends notification bytes to ``output``
    and supervises it: a failure ends the forms with an error. ``check_actors`` (a test
    mode): every change of the queue's and the persistence actors' state checks that it runs
    in the actor's own task, and raises ``owner.NotOwner`` when it does not.
    ``notify_link`` gives a form's page by flow id (the web desk), passed to notification
    commands as ``ASK_NOTIFY_URL``.
    """
    import os

    from pi_agent_ask.actors.session import SessionJournal, open_session_file
    from pi_agent_ask.persistence.settings import load_settings, settings_path

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    settings_file = Path(settings) if settings is not None else settings_path(os.environ)
    loaded = load_settings(settings_file, project_dir=work_dir)
    config = config_from_settings(loaded)
    events = ev.EventBus()
    screen: Terminal | None = None
    if surface is None and mode == "tui" and terminal is not None:
        screen = terminal(loaded)
        surface = screen.surface
    elif surface is None:
        surface = NullSurface()
    if write_terminal is None and screen is not None and output is not None:
        write_terminal = _terminal_writer(output)
    if write_terminal is None:
        write_terminal = discard_terminal

    # Opened before any task starts, off the event loop (it reads and checks the whole file):
    # a file that is not a session file fails here, plainly, and is left untouched.
    session_file = await trio.to_thread.run_sync(open_session_file, session)
    async with trio.open_nursery() as nursery:
        journal = await SessionJournal.start(nursery, session_file, checked=check_actors)
        runtime: Runtime | None = None
        # The queue and notification actors (and the background forms in the queue's nursery)
        # run shielded from outer cancellation until disposal has quiesced: a host that cancels
        # the block still gets its drafts saved (bounded by the teardown timeout).
        actors = (trio.CancelScope(shield=True), trio.CancelScope(shield=True))
        try:
            writer = BranchWriter(journal)
            opened = trio.Event()
            wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
            abort_tx, abort_rx = trio.open_memory_channel[str](float("inf"))
            # Unbounded: notices are few, and a host that never reads them must not stall anything.
            notice_tx, notice_rx = trio.open_memory_channel[str](float("inf"))
            # Unbounded: the hooks are plain calls that must not block; one task forwards them.
            activity_tx, activity_rx = trio.open_memory_channel[q.AgentActivity](float("inf"))
            hook_calls = q.HookCalls()
            notify_tx, notify_rx = trio.open_memory_channel[Notify](0)
            queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)
            await _start_shielded(
                nursery,
                actors[0],
                functools.partial(run_notifications, notify_rx, write_terminal=write_terminal),
            )
            runtime = Runtime(
                mode=mode,
                events=events,
                config=config,
                cwd=work_dir,
                settings=loaded,
                wakeups=wake_rx,
                nursery=nursery,
                queue_tx=queue_tx,
                writer=writer,
                journal=journal,
                surface=surface,
                notify_tx=notify_tx,
                opened=opened,
                aborts_tx=abort_tx,
                aborts=abort_rx,
                notices_tx=notice_tx,
                notices=notice_rx,
                activity_tx=activity_tx,
                hook_calls=hook_calls,
                write_terminal=write_terminal,
                notify_link=notify_link,
                one_call=one_call,
            )
            actor = q.QueueActor(
                journal=writer,
                events=events,
                wakeups=wake_tx,
                run_background_form=functools.partial(ask.run_background_form, runtime),
                tui=mode == "tui",
                surface_ready=False,
                idle=agent_idle,
                background_shown=not one_call,
                notice=runtime.notice,
                hook_calls=hook_calls,
                owner=Owner("queue", checked=check_actors),
            )
            await _start_shielded(
                nursery, actors[1], functools.partial(actor.run, queue_rx, queue_tx.clone())
            )
            runtime._flow_commands = actor.flow_commands
            nursery.start_soon(_forward_activity, activity_rx, queue_tx.clone())
            events.on(ev.SUBMIT, runtime._on_submit)
            if screen is not None:
                screen.attach(runtime.apply_settings, work_dir)
                await nursery.start(_supervise_terminal, runtime, screen, input, output)
            # The details first: a host showing the latest notice alone shows the notice.
            for text in (*loaded.details, *loaded.notices):
                runtime.notice(text)
            for report in journal.reports:
                runtime.notice(report.describe())
            await recovery.rebuild(runtime, "startup")
            # Shown forms wait for this: nothing is emitted before the first checkpoint
            nursery.start_soon(_open_surface, opened, queue_tx.clone())
            yield runtime
        finally:
            # Orderly disposal: drafts reach the session file before the actors go (the queue
            # is shielded until here, so also under an outer cancellation), and the
            # persistence actor (shielded from outer cancellation, so cleanups of cancelled
            # calls can still record their outcomes) is closed last: also when starting up
            # failed, so a failed open never leaves it running.
            if runtime is not None:
                await runtime.quiesce()
                runtime._disposed = True
            for scope in actors:
                scope.cancel()
            nursery.cancel_scope.cancel()
            journal.close()


# The body is a plain async generator, wrapped here rather than decorated: mutmut (3.8.1) makes
# no mutants inside a decorated function, and its trampoline forwards an async generator's
# whole protocol (asend, athrow, aclose), so this keeps the behaviour and lets it in.
open_runtime = asynccontextmanager(_open_runtime)
open_runtime.__name__ = open_runtime.__qualname__ = "open_runtime"


async def _start_shielded(
    nursery: trio.Nursery, scope: trio.CancelScope, run: Callable[..., Awaitable[None]]
) -> None:
    """Start an actor inside ``scope`` (shielded; disposal cancels it).

    The start itself is shielded too: under a cancelled caller, ``nursery.start`` would leave
    the started task in its temporary nursery and wait for it to end, which a shielded actor
    never does. The actors start at once (they only open a nursery), so this is bounded."""
    with trio.CancelScope(shield=True):
        await nursery.start(_shielded, scope, run)


async def _shielded(
    scope: trio.CancelScope,
    run: Callable[..., Awaitable[None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run an actor inside ``scope``."""
    with scope:
        await run(task_status=task_status)


async def _supervise_terminal(
    runtime: Runtime,
    terminal: Terminal,
    input: Any,
    output: Any,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the terminal surface; if it breaks, its forms end with an error (never an answer)."""
    status = _StartOnce(task_status)
    try:
        await terminal.run(input, output, task_status=status)
    except Exception as error:  # any UI failure: reported, and the runtime goes on
        status.started()
        await runtime.surface_failed(failure_text(error))


@attrs.define(eq=False, repr=False)
class _StartOnce:
    """A task status that may be marked started more than once (only the first counts)."""

    status: trio.TaskStatus[None]
    done: bool = False

    def started(self, value: None = None) -> None:
        if not self.done:
            self.done = True
            self.status.started(value)


async def _forward_activity(
    activity: trio.MemoryReceiveChannel[q.AgentActivity],
    queue: trio.MemorySendChannel[q.QueueMessage],
) -> None:
    async with activity, queue:
        async for message in activity:
            await queue.send(message)


def _terminal_writer(output: Any) -> Callable[[str], None]:
    """Notification bytes (bell, OSC) go to the form's terminal output (a prompt_toolkit
    ``Output``)."""

    def write(text: str) -> None:
        output.write_raw(text)
        output.flush()

    return write


async def _open_surface(opened: trio.Event, queue: trio.MemorySendChannel[q.QueueMessage]) -> None:
    """Runs once the ``async with`` body reached its first checkpoint: only now may forms
    (recovered ones first) be shown and take Herdr, so handlers registered at the top of the
    body see every event."""
    opened.set()
    async with queue:
        await queue.send(q.SurfaceReady())
