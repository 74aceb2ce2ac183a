"""Command channels of the notifications actor, as mutation testing of
``actors/notifications.py`` found them unpinned.

``docs/mutation-actors.md`` lists the mutants each test kills. The actor runs as in
``tests/test_notifications.py``, with real shell commands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from pi_agent_ask.actors.notifications import Attempt, Command, Notified, Notify, Osc9, Osc777

from .test_notifications import REAL_TIME_GUARD, notifications

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell commands")


async def test_terminal_channels_next_to_a_command_get_the_title_and_message() -> None:
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            channels = (Osc777(), Command("exit 0"), Osc9())
            await h.tx.send(Notify("f1", "Scope", "What?", True, channels))
            report = await h.reports.receive()
    assert h.written == [
        "\x1b]777;notify;pi-agent-ask;Question waiting: Scope\x07",
        "\x1b]9;Question waiting: Scope\x07",
    ]
    assert report == Notified(
        "f1",
        "Question waiting: Scope",
        (
            Attempt("osc777", "attempted"),
            Attempt("command", "attempted"),
            Attempt("osc9", "attempted"),
        ),
    )


async def test_a_command_killed_by_a_signal_names_the_signal() -> None:
    with trio.fail_after(REAL_TIME_GUARD):
        async with notifications() as h:
            await h.tx.send(Notify("f1", "Scope", "What?", True, (Command("kill -9 $$"),)))
            report = await h.reports.receive()
    assert report.attempts == (Attempt("command", "failed", "killed by signal 9"),)


@pytest.mark.skipif(not Path("/proc/self/fd/0").exists(), reason="needs /proc")
async def test_a_command_reads_nothing_from_our_standard_input() -> None:
    # Our standard input is a pipe with a line waiting in it; the command must not see it
    # (nor be able to take input meant for the host): its standard input is /dev/null.
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    try:
        os.write(write_end, b"typed by the person\n")
        os.dup2(read_end, 0)
        with trio.fail_after(REAL_TIME_GUARD):
            async with notifications() as h:
                check = '[ "$(readlink /proc/$$/fd/0)" = /dev/null ]'
                await h.tx.send(Notify("f1", "Scope", "What?", True, (Command(check),)))
                report = await h.reports.receive()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert report.attempts == (Attempt("command", "attempted"),)
