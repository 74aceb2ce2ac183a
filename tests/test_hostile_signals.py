"""``SIGTERM`` or ``SIGHUP`` while a form is open: the terminal comes back usable (echo and line
mode on, normal screen) and the form stays waiting in the session file (issue 10, item 7).

``ask`` runs on a real pseudo-terminal that is its controlling terminal; the test waits for the
form to draw, signals the process, and reads the terminal modes afterwards."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import payload, settings_file

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30.0
# Run in a new session: opening the pty makes it the controlling terminal (/dev/tty), then
# the command replaces this process (no preexec_fn: the test process may have threads).
ACQUIRE_TERMINAL = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.dup2(fd, 0)
os.execv(sys.executable, [sys.executable, "-m", "pi_agent_ask", *sys.argv[2:]])
"""


def read_until(master: int, marker: bytes, deadline: float) -> bytes:
    seen = b""
    while marker not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail(f"the form never drew {marker!r}; got {seen[-400:]!r}")
        ready, _, _ = select.select([master], [], [], remaining)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the child closed the terminal
                pytest.fail(f"the terminal closed early; got {seen[-400:]!r}")
    return seen


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_while_a_form_is_open_restores_the_terminal(
    tmp_path: Path, signum: signal.Signals
) -> None:
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    session = tmp_path / "s.pas"
    body = tmp_path / "payload.json"
    body.write_text(json.dumps(payload("a", title="Signal test")))

    errors = (tmp_path / "stderr.txt").open("wb")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            ACQUIRE_TERMINAL,
            os.ttyname(slave),
            "ask",
            "--settings",
            str(settings_file(tmp_path)),
            "--session",
            str(session),
            str(body),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errors,
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    try:
        read_until(master, b"Question a?", time.monotonic() + TIMEOUT)
        during = termios.tcgetattr(slave)
        assert not during[3] & termios.ECHO  # the form really has the terminal in raw mode
        child.send_signal(signum)
        status = child.wait(timeout=TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        errors.close()
    after = termios.tcgetattr(slave)
    # Drain what the child wrote last: the screen is switched back and the cursor shown.
    tail = b""
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        tail += chunk
    os.close(master)
    os.close(slave)
    assert after[3] & termios.ECHO and after[3] & termios.ICANON
    assert status == 128 + signum, (tmp_path / "stderr.txt").read_text()
    assert after[3] == before[3]
    assert b"\x1b[?1049l" in tail and b"\x1b[?25h" in tail
    # The form was not journaled as aborted: it reopens on the next start.
    with SessionFile.open(session, readonly=True) as opened:
        types = [entry.type for entry in opened.branch()]
    assert types[0] == "tool-call" and "tool-result" not in types
