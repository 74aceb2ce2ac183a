"""The notifications actor and its pure payload builders (catalog §7.2)."""

from __future__ import annotations

import functools
import math
import os
import shlex
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.actors.notifications import (
    Attempt,
    Bell,
    Command,
    Notified,
    Notify,
    Osc9,
    Osc777,
    channels_from_json,
    channels_to_json,
    command_environment,
    discard_terminal,
    notification_message,
    osc9_payload,
    osc777_payload,
    run_notifications,
    terminal_payload,
    unheard,
)
from pi_agent_ask.form.sanitize import sanitize_line

# Guard for tests that run real processes; far below the 60 s the hanging commands would take.
REAL_TIME_GUARD = 20

# --------------------------------------------------------------------------------------------
# Message
# --------------------------------------------------------------------------------------------


def test_message_names_the_label() -> None:
    assert notification_message("Scope", "What should we change?") == "Question waiting: Scope"


def test_message_falls_back_to_the_prompt_with_whitespace_collapsed() -> None:
    assert (
        notification_message("", "What\nshould\twe change?")
        == "Question waiting: What should we change?"
    )
    assert notification_message("  \t", "  Deploy  now? ") == "Question waiting: Deploy now?"
    assert notification_message("Big \n\n  scope", "p") == "Question waiting: Big scope"


def test_message_is_truncated_to_120_characters() -> None:
    prefix = "Question waiting: "
    fits = "x" * (120 - len(prefix))
    assert notification_message(fits, "") == prefix + fits
    long = "y" * 200
    message = notification_message(long, "")
    assert len(message) == 120
    assert message == prefix + "y" * (119 - len(prefix)) + "…"
    assert notification_message(fits + "z", "") == prefix + fits[:-1] + "…"


def test_message_neutralises_terminal_sequences() -> None:
    assert notification_message("\x1b]0;pwned\x07Scope", "") == "Question waiting: \ufffdScope"
    assert notification_message("a\x1b[2Jb\x00", "") == "Question waiting: a\ufffdb\ufffd"


@given(st.text(), st.text())
def test_message_is_always_one_safe_trimmed_line(label: str, prompt: str) -> None:
    message = notification_message(label, prompt)
    assert message.startswith("Question waiting:")
    assert len(message) <= 120
    assert "  " not in message
    assert message == message.rstrip() or message.endswith("…")
    assert sanitize_line(message) == message


# --------------------------------------------------------------------------------------------
# Channel payloads
# --------------------------------------------------------------------------------------------


def test_terminal_payloads() -> None:
    message = "Question waiting: Scope"
    assert terminal_payload(Bell(), title="pi-agent-ask", message=message) == "\x07"
    assert (
        terminal_payload(Osc9(), title="pi-agent-ask", message=message)
        == "\x1b]9;Question waiting: Scope\x07"
    )
    assert (
        terminal_payload(Osc777(), title="pi-agent-ask", message=message)
        == "\x1b]777;notify;pi-agent-ask;Question waiting: Scope\x07"
    )
    assert terminal_payload(Command("true"), title="pi-agent-ask", message=message) is None


def test_osc9_strips_control_characters() -> None:
    assert osc9_payload("a\x07b\x1b]0;x\x9cc\x00\x7fd\x9b") == "\x1b]9;ab]0;xcd\x07"


def test_osc777_replaces_semicolons_and_strips_control_characters() -> None:
    assert (
        osc777_payload("pi;agent", "Question waiting: a;b\x07;c\x1b")
        == "\x1b]777;notify;pi:agent;Question waiting: a:b:c\x07"
    )


def test_command_environment() -> None:
    assert command_environment(title="pi-agent-ask", message="Question waiting: Scope") == {
        "ASK_NOTIFY_EVENT": "question.waiting",
        "ASK_NOTIFY_TITLE": "pi-agent-ask",
        "ASK_NOTIFY_MESSAGE": "Question waiting: Scope",
    }


@pytest.mark.parametrize(
    ("raw", "channels"),
    [
        (["bell"], (Bell(),)),
        (
            ["osc777", {"type": "command", "command": "notify-send x"}, "osc9", "bell"],
            (Osc777(), Command("notify-send x"), Osc9(), Bell()),
        ),
        (
            ["osc9", "beep", 3, None, {"type": "command"}, {"type": "command", "command": " "}],
            (Osc9(),),
        ),
        (["nope", {"type": "cmd", "command": "x"}], (Bell(),)),
        ([], (Bell(),)),
        ("osc9", (Bell(),)),
        (None, (Bell(),)),
        ({"type": "command", "command": "x"}, (Bell(),)),
    ],
)
def test_channels_from_json(raw: object, channels: tuple[object, ...]) -> None:
    assert channels_from_json(raw) == channels


def test_channels_round_trip_through_json() -> None:
    raw = ["osc9", {"type": "command", "command": "say hi"}, "bell", "osc777"]
    assert channels_to_json(channels_from_json(raw)) == raw


# --------------------------------------------------------------------------------------------
# The actor
# --------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class Harness:
    tx: trio.MemorySendChannel[Notify]
    reports: trio.MemoryReceiveChannel[Notified]
    written: list[str]


@asynccontextmanager
async def notifications(
    *, write_terminal: Callable[[str], None] | None = None, command_timeout: float = 5.0
) -> AsyncIterator[Harness]:
    """Run the actor on an unbuffered channel; closing the channel at the end lets it return."""
    written: list[str] = []
    report_tx, report_rx = trio.open_memory_channel[Notified](math.inf)
    tx, rx = trio.open_memory_channel[Notify](0)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(
                run_notifications,
                rx,
                write_terminal=write_terminal or written.append,
                report=report_tx.send_nowait,
                command_timeout=command_timeout,
            )
        )
        async with tx:
            yield Harness(tx, report_rx, written)


def notify(flow_id: str, *channels: object, label: str = "Scope", enabled: bool = True) -> Notify:
    return Notify(flow_id, label, "What should we change?", enabled, channels)


async def test_terminal_channels_run_in_configured_order(autojump_clock: object) -> None:
    async with notifications() as h:
        await h.tx.send(notify("f1", Osc777(), Bell(), Osc9()))
        report = await h.reports.receive()
    assert h.written == [
        "\x1b]777;notify;pi-agent-ask;Question waiting: Scope\x07",
        "\x07",
        "\x1b]9;Question waiting: Scope\x07",
    ]
    assert report == Notified(
        "f1",
        "Question waiting: Scope",
        (
            Attempt("osc777", "attempted"),
            Attempt("bell", "attempted"),
            Attempt("osc9", "attempted"),
        ),
    )


async def test_prompt_is_used_when_the_label_is_empty(autojump_clock: object) -> None:
    async with notifications() as h:
        await h.tx.send(Notify("f1", "", "What\nshould\twe change?", True, (Osc9(),)))
        report = await h.reports.receive()
    assert h.written == ["\x1b]9;Question waiting: What should we change?\x07"]
    assert report.message == "Question waiting: What should we change?"


async def test_disabled_notifications_are_one_skipped_attempt(autojump_clock: object) -> None:
    async with notifications() as h:
        await h.tx.send(notify("f1", Bell(), Command("exit 0"), enabled=False))
        report = await h.reports.receive()
    assert report.attempts == (Attempt("notifications", "skipped"),)
    assert h.written == []


async def test_a_failing_terminal_write_is_reported_and_the_rest_still_runs(
    autojump_clock: object,
) -> None:
    written: list[str] = []

    def write(text: str) -> None:
        if text.startswith("\x1b]9;"):
            raise OSError(5, "Input/output error")
        written.append(text)

    async with notifications(write_terminal=write) as h:
        await h.tx.send(notify("f1", Bell(), Osc9(), Osc777()))
        first = await h.reports.receive()
        await h.tx.send(notify("f2", Bell()))
        second = await h.reports.receive()
    assert first.attempts == (
        Attempt("bell", "attempted"),
        Attempt("osc9", "failed", "OSError: [Errno 5] Input/output error"),
        Attempt("osc777", "attempted"),
    )
    assert second.attempts == (Attempt("bell", "attempted"),)
    assert written == [
        "\x07",
        "\x1b]777;notify;pi-agent-ask;Question waiting: Scope\x07",
        "\x07",
    ]


async def test_a_command_exiting_3_has_failed() -> None:
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            await h.tx.send(notify("f1", Command("exit 3"), Bell()))
            report = await h.reports.receive()
    assert report.attempts == (
        Attempt("command", "failed", "exit status 3"),
        Attempt("bell", "attempted"),
    )


async def test_a_command_that_succeeds_was_attempted(capfd: pytest.CaptureFixture[str]) -> None:
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            await h.tx.send(notify("f1", Command("echo leaked; echo leaked >&2; cat")))
            report = await h.reports.receive()
    assert report.attempts == (Attempt("command", "attempted"),)
    # stdin, stdout and stderr are /dev/null: nothing reaches our streams, `cat` sees EOF.
    out, err = capfd.readouterr()
    assert "leaked" not in out
    assert "leaked" not in err


async def test_the_command_gets_the_notification_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_ASK_TEST_INHERITED", "inherited")
    out = tmp_path / "env.txt"
    command = (
        'printf "%s|%s|%s|%s" "$ASK_NOTIFY_EVENT" "$ASK_NOTIFY_TITLE" "$ASK_NOTIFY_MESSAGE"'
        f' "$PI_ASK_TEST_INHERITED" > {shlex.quote(str(out))}'
    )
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            await h.tx.send(Notify("f1", "", "Ship it;\nnow?", True, (Command(command),)))
            report = await h.reports.receive()
    assert report.attempts == (Attempt("command", "attempted"),)
    assert (
        out.read_text() == "question.waiting|pi-agent-ask|Question waiting: Ship it; now?|inherited"
    )


async def test_a_hanging_command_is_killed_at_the_timeout(tmp_path: Path) -> None:
    # The shell starts `sleep` as a child and waits for it: killing only the shell would
    # leave `sleep` running, so the whole process group must go.
    pid_file = tmp_path / "sleep.pid"
    command = f"sleep 60 & echo $! > {shlex.quote(str(pid_file))}; wait"
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications(command_timeout=0.5) as h:
            await h.tx.send(notify("f1", Command(command), Bell()))
            report = await h.reports.receive()
        assert report.attempts == (
            Attempt("command", "failed", "timed out after 0.5 s; killed"),
            Attempt("bell", "attempted"),
        )
        assert h.written == ["\x07"]
        if hasattr(os, "pidfd_open"):
            await _wait_exited(int(pid_file.read_text()))


async def _wait_exited(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)  # readable once the process has exited
    finally:
        os.close(fd)


async def test_a_blocked_command_delays_neither_the_sender_nor_later_notifications(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    blocked = Command(f"read line < {shlex.quote(str(gate))}")
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            # Both sends return although the first command cannot finish until the gate opens.
            await h.tx.send(notify("slow", blocked, Bell(), label="Slow"))
            await h.tx.send(notify("fast", Osc9(), label="Fast"))
            first = await h.reports.receive()
            assert first == Notified(
                "fast", "Question waiting: Fast", (Attempt("osc9", "attempted"),)
            )
            assert h.written == ["\x1b]9;Question waiting: Fast\x07"]
            await trio.to_thread.run_sync(gate.write_text, "go\n", abandon_on_cancel=True)
            second = await h.reports.receive()
    assert second == Notified(
        "slow",
        "Question waiting: Slow",
        (Attempt("command", "attempted"), Attempt("bell", "attempted")),
    )
    assert h.written == ["\x1b]9;Question waiting: Fast\x07", "\x07"]


async def test_cancelling_the_actor_kills_a_running_command(tmp_path: Path) -> None:
    started = tmp_path / "started"
    os.mkfifo(started)
    # The command reports the pid of its `sleep` child through the FIFO, then waits for it.
    command = f"sleep 60 & echo $! > {shlex.quote(str(started))}; wait"
    reports: list[Notified] = []
    tx, rx = trio.open_memory_channel[Notify](0)
    with trio.fail_after(REAL_TIME_GUARD):
        async with trio.open_nursery() as nursery, tx:
            await nursery.start(
                functools.partial(
                    run_notifications,
                    rx,
                    write_terminal=lambda text: None,
                    report=reports.append,
                    command_timeout=3600,
                )
            )
            await tx.send(notify("f1", Command(command)))
            pid = int(await trio.to_thread.run_sync(started.read_text, abandon_on_cancel=True))
            # The runtime ending: the nursery returns only once the command is dead.
            nursery.cancel_scope.cancel()
        if hasattr(os, "pidfd_open"):
            await _wait_exited(pid)
    assert reports == []


async def test_a_command_that_cannot_start_has_failed(autojump_clock: object) -> None:
    # A NUL cannot be passed in an argument; the attempt fails without a process.
    async with notifications() as h:
        await h.tx.send(notify("f1", Command("true\x00"), Bell()))
        report = await h.reports.receive()
    assert report.attempts[0].channel == "command"
    assert report.attempts[0].status == "failed"
    assert report.attempts[0].detail is not None
    assert report.attempts[0].detail.startswith("ValueError: ")
    assert report.attempts[1] == Attempt("bell", "attempted")


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize(
    "channels", [(), (Bell(),), (Osc9(), Osc777()), (Command("true"),), (Bell(), Command("x"))]
)
@pytest.mark.parametrize("terminal", [False, True])
async def test_a_notification_is_left_unmade_only_when_sending_it_would_reach_nobody(
    enabled: bool, channels: tuple[Any, ...], terminal: bool
) -> None:
    # ``unheard`` lets a form skip making its ``Notify``: only right when the actor would run
    # no command for it and write nothing (no terminal, no report).
    written: list[str] = []
    write = written.append if terminal else discard_terminal
    if unheard(enabled, channels, write):
        tx, rx = trio.open_memory_channel[Notify](0)
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(run_notifications, rx, write_terminal=write))
            async with tx:
                await tx.send(Notify("tool:c1", "Label", "Prompt?", enabled, channels))
        assert written == []
    else:
        needs_actor = enabled and any(isinstance(c, Command) for c in channels)
        assert terminal or needs_actor
