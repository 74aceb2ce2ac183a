"""The notifications actor: one best-effort "question waiting" notification per form.

The pure part builds the message and the bytes of each terminal channel; the actor sends a
:class:`Notify` through its channels and reports what happened as :class:`Attempt` records.

Rules (contract §Notifications, catalog §7.2):

- one notification per :class:`Notify` message; its channels run sequentially, in configured
  order; a failing channel never stops the next one;
- disabled notifications yield exactly one ``skipped`` attempt for channel ``notifications``;
- a command runs through the shell, with ``ASK_NOTIFY_EVENT``, ``ASK_NOTIFY_TITLE`` and
  ``ASK_NOTIFY_MESSAGE`` added to the inherited environment, no standard streams, and a timeout
  (5 s by default) after which its whole process group is killed;
- nothing raises out of the actor, and nothing a channel does delays whoever sent the message:
  every notification runs in its own task, so a slow command holds up neither the sender nor
  later notifications.

The message is agent text; :func:`notification_message` passes it through
:func:`~pi_agent_ask.form.sanitize.sanitize_line`, so neither the terminal channels nor a command
that echoes ``$ASK_NOTIFY_MESSAGE`` can receive escape sequences from the agent.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal

import attrs
import trio

from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.form.sanitize import sanitize_line

__all__ = [
    "COMMAND_TIMEOUT",
    "EVENT",
    "MESSAGE_LIMIT",
    "TITLE",
    "Attempt",
    "AttemptStatus",
    "Bell",
    "Channel",
    "Command",
    "Notified",
    "Notify",
    "Osc9",
    "Osc777",
    "bell_payload",
    "channels_from_json",
    "channels_to_json",
    "command_environment",
    "notification_message",
    "osc9_payload",
    "osc777_payload",
    "run_notifications",
    "terminal_payload",
]

TITLE = "pi-agent-ask"
EVENT = "question.waiting"
MESSAGE_LIMIT = 120
"""Longest message, in characters; longer ones keep 119 and end with ``…``."""
COMMAND_TIMEOUT = 5.0
"""Seconds a command channel may run before it is killed and reported ``failed``."""

_BEL = "\x07"
_OSC = "\x1b]"
_WHITESPACE = re.compile(r"\s+")
# What the OSC builders strip from their fields: C0, DEL and C1. With ESC, BEL and ST gone, a
# field can neither end the OSC early nor start another sequence.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------------------------
# Channels
# --------------------------------------------------------------------------------------------


class Bell(Fieldless):
    """Write BEL to the terminal."""

    name: ClassVar[str] = "bell"


class Osc9(Fieldless):
    """Write an OSC 9 desktop notification (iTerm2, WezTerm, kitty, ...) to the terminal."""

    name: ClassVar[str] = "osc9"


class Osc777(Fieldless):
    """Write an OSC 777 ``notify`` sequence (urxvt, foot, Ghostty, ...) to the terminal."""

    name: ClassVar[str] = "osc777"


@attrs.frozen(repr=False)
class Command:
    """Run ``command`` through the shell with the notification in its environment."""

    command: str
    name: ClassVar[str] = "command"


Channel = Bell | Osc9 | Osc777 | Command
"""One configured notification channel."""

_NAMED_CHANNELS: Mapping[str, Channel] = {"bell": Bell(), "osc9": Osc9(), "osc777": Osc777()}
DEFAULT_CHANNELS: tuple[Channel, ...] = (Bell(),)


def channels_from_json(items: Any) -> tuple[Channel, ...]:
    """Convert the settings' ``notifications.channels`` value into channels.

    Accepts ``"bell"``, ``"osc9"``, ``"osc777"`` and ``{"type": "command", "command": <non-blank
    string>}``, in order. As in the original: a value that is not a list means ``("bell",)``;
    invalid entries are dropped; when none is left the result is ``(Bell(),)``.
    """
    if not isinstance(items, list | tuple):
        return DEFAULT_CHANNELS
    channels: list[Channel] = []
    for item in items:
        if isinstance(item, str) and item in _NAMED_CHANNELS:
            channels.append(_NAMED_CHANNELS[item])
        elif (
            isinstance(item, Mapping)
            and item.get("type") == "command"
            and isinstance(item.get("command"), str)
            and item["command"].strip()
        ):
            channels.append(Command(item["command"]))
    return tuple(channels) or DEFAULT_CHANNELS


def channels_to_json(channels: Iterable[Channel]) -> list[str | dict[str, str]]:
    """The settings-file form of ``channels`` (inverse of :func:`channels_from_json`)."""
    out: list[str | dict[str, str]] = []
    for channel in channels:
        match channel:
            case Command(command=command):
                out.append({"type": "command", "command": command})
            case _:
                out.append(channel.name)
    return out


# --------------------------------------------------------------------------------------------
# Pure payloads
# --------------------------------------------------------------------------------------------


def notification_message(label: str, prompt: str) -> str:
    """``Question waiting: <label or prompt>``, one line of at most :data:`MESSAGE_LIMIT` chars.

    The label is used unless it is blank. Whitespace runs collapse to one space, the message is
    trimmed, and a longer one is cut to 119 characters plus ``…``. Escape sequences and control
    characters are neutralised (``sanitize_line``), since the text comes from the agent.
    """
    subject = label if label.strip() else prompt
    message = _WHITESPACE.sub(" ", f"Question waiting: {subject}").strip()
    message = sanitize_line(message)
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "\u2026"
    return message


def bell_payload() -> str:
    """What the bell channel writes: BEL."""
    return _BEL


def osc9_payload(message: str) -> str:
    """``ESC ] 9 ; <message> BEL`` with control characters stripped from the message."""
    return f"{_OSC}9;{_CONTROL.sub('', message)}{_BEL}"


def osc777_payload(title: str, message: str) -> str:
    """``ESC ] 777 ; notify ; <title> ; <message> BEL``.

    In both fields ``;`` becomes ``:`` (it separates the fields) and control characters are
    stripped.
    """

    def field(text: str) -> str:
        return _CONTROL.sub("", text).replace(";", ":")

    return f"{_OSC}777;notify;{field(title)};{field(message)}{_BEL}"


def terminal_payload(channel: Channel, *, title: str, message: str) -> str | None:
    """What ``channel`` writes to the terminal, or ``None`` for a command channel."""
    match channel:
        case Bell():
            return bell_payload()
        case Osc9():
            return osc9_payload(message)
        case Osc777():
            return osc777_payload(title, message)
        case Command():
            return None


def command_environment(*, title: str, message: str, url: str | None = None) -> dict[str, str]:
    """The variables a command channel receives in addition to the inherited environment
    (``ASK_NOTIFY_URL``: the form's page, when the desk serves one)."""
    env = {"ASK_NOTIFY_EVENT": EVENT, "ASK_NOTIFY_TITLE": title, "ASK_NOTIFY_MESSAGE": message}
    if url is not None:
        env["ASK_NOTIFY_URL"] = url
    return env


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


AttemptStatus = Literal["attempted", "failed", "skipped"]


def _channels(items: Iterable[Channel]) -> tuple[Channel, ...]:
    return tuple(items)  # a Python converter: attrs inspects a built-in's signature slowly


@attrs.frozen(repr=False)
class Notify:
    """Send one "question waiting" notification for the form ``flow_id``.

    ``enabled`` and ``channels`` are the settings at the moment the form opened.
    """

    flow_id: str
    label: str
    prompt: str
    enabled: bool
    channels: tuple[Channel, ...] = attrs.field(converter=_channels)
    url: str | None = None
    """Where the form can be answered (the web desk's page), for command channels."""


@attrs.frozen(repr=False)
class Attempt:
    """What one channel did: ``attempted`` (written / exited 0), ``failed`` or ``skipped``."""

    channel: str
    status: AttemptStatus
    detail: str | None = None


def _attempts(items: Iterable[Attempt]) -> tuple[Attempt, ...]:
    return tuple(items)


@attrs.frozen(repr=False)
class Notified:
    """The outcome of one :class:`Notify`: its message and one attempt per channel, in order."""

    flow_id: str
    message: str
    attempts: tuple[Attempt, ...] = attrs.field(converter=_attempts)


# --------------------------------------------------------------------------------------------
# The actor
# --------------------------------------------------------------------------------------------


async def run_notifications(
    rx: trio.MemoryReceiveChannel[Notify],
    *,
    write_terminal: Callable[[str], None],
    report: Callable[[Notified], None] | None = None,
    command_timeout: float = COMMAND_TIMEOUT,
    title: str = TITLE,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Send every :class:`Notify` received on ``rx``; return when ``rx`` is closed and drained.

    Start it with ``await nursery.start(functools.partial(run_notifications, rx,
    write_terminal=...))``.
    ``write_terminal`` receives the bell/OSC strings; the runtime decides where they go (the
    terminal's output, never a pipe). It must not block; if it raises, that channel is
    ``failed``. ``report`` (optional, must not raise) is called once per notification with its
    :class:`Notified` record, after all its channels ran.

    Buffering: the channel can (and should) be unbuffered. This loop does nothing between two
    ``receive`` calls except start a task, so a sender waits only for the actor to be scheduled,
    never for a channel to run. Each notification runs in its own task in the actor's nursery,
    so a hanging command (bounded by ``command_timeout``) delays only the later channels of the
    same notification. After ``rx`` closes, notifications in flight finish (each is bounded by
    its timeouts); cancelling the actor cancels them and kills their commands. A notification
    without a command channel (disabled, or terminal writes only: they never block) is sent
    by the actor itself, without a task of its own.
    """
    async with trio.open_nursery() as nursery:
        task_status.started()
        async with rx:
            async for notify in rx:
                if notify.enabled and any(isinstance(c, Command) for c in notify.channels):
                    nursery.start_soon(
                        _notify_once, notify, write_terminal, report, command_timeout, title
                    )
                elif write_terminal is not discard_terminal or report is not None:
                    # Without a terminal and a report, nothing would see the message.
                    _notify_now(notify, write_terminal, report, title)


def unheard(
    enabled: bool, channels: Iterable[Channel], write_terminal: Callable[[str], None]
) -> bool:
    """Whether a notification with these settings would reach nobody: it has no command to
    run and no terminal to write to, and nobody reports it.
    Its owner then makes no ``Notify`` at all."""
    if write_terminal is not discard_terminal:
        return False
    return not enabled or not any(isinstance(c, Command) for c in channels)


def discard_terminal(_text: str) -> None:
    """The terminal writer of a runtime without a terminal: notification bytes go nowhere
    (the actor does not even make them)."""


def _notify_now(
    notify: Notify,
    write_terminal: Callable[[str], None],
    report: Callable[[Notified], None] | None,
    title: str,
) -> None:
    """``_notify_once`` for a notification without a command channel: nothing to await."""
    message = notification_message(notify.label, notify.prompt)
    attempts: list[Attempt] = []
    if not notify.enabled:
        attempts.append(Attempt("notifications", "skipped"))
    else:
        for channel in notify.channels:
            attempts.append(_write(channel, title, message, write_terminal))
    if report is not None:
        report(Notified(notify.flow_id, message, attempts))


async def _notify_once(
    notify: Notify,
    write_terminal: Callable[[str], None],
    report: Callable[[Notified], None] | None,
    command_timeout: float,
    title: str,
) -> None:
    """Send an enabled notification with a command channel (the others go through
    ``_notify_now``), each channel in turn."""
    message = notification_message(notify.label, notify.prompt)
    attempts: list[Attempt] = []
    for channel in notify.channels:
        attempts.append(
            await _send(channel, title, message, write_terminal, command_timeout, notify.url)
        )
    if report is not None:
        report(Notified(notify.flow_id, message, attempts))


async def _send(
    channel: Channel,
    title: str,
    message: str,
    write_terminal: Callable[[str], None],
    command_timeout: float,
    url: str | None = None,
) -> Attempt:
    if not isinstance(channel, Command):
        return _write(channel, title, message, write_terminal)
    return await _run_command(channel.command, title, message, command_timeout, url)


def _write(
    channel: Channel, title: str, message: str, write_terminal: Callable[[str], None]
) -> Attempt:
    """A terminal channel: its bytes go to ``write_terminal`` (which never blocks)."""
    payload = terminal_payload(channel, title=title, message=message)
    assert payload is not None
    try:
        write_terminal(payload)
    except Exception as exc:  # a notification must never fail the form
        return Attempt(channel.name, "failed", _describe(exc))
    return Attempt(channel.name, "attempted")


async def _run_command(
    command: str, title: str, message: str, time_limit: float, url: str | None = None
) -> Attempt:
    env = {**os.environ, **command_environment(title=title, message=message, url=url)}
    completed: subprocess.CompletedProcess[bytes] | None = None
    try:
        with trio.move_on_after(time_limit):
            completed = await trio.run_process(
                command,
                shell=True,
                check=False,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                **_GROUP_OPTIONS,
            )
    except Exception as exc:  # cannot start: no shell, bad environment value, ...
        return Attempt("command", "failed", _describe(exc))
    if completed is None:
        return Attempt("command", "failed", f"timed out after {time_limit:g} s; killed")
    if completed.returncode != 0:
        return Attempt("command", "failed", _exit_detail(completed.returncode))
    return Attempt("command", "attempted")


def _exit_detail(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


if sys.platform != "win32":

    async def _kill_group(process: trio.Process) -> None:
        # The shell may have started children (`cmd1; cmd2`, pipelines, `&`); killing only the
        # shell would orphan them. The command leads its own process group (process_group=0),
        # so the group id is its pid. The group outlives its leader while members remain.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    # process_group=0 (not start_new_session) keeps the command in our session, so it can still
    # open /dev/tty if it wants to.
    _GROUP_OPTIONS: dict[str, Any] = {"process_group": 0, "deliver_cancel": _kill_group}
else:  # pragma: no cover - Windows: trio's default cancel delivery kills the process.
    _GROUP_OPTIONS = {}
