"""The command line around the form: --version, the default history session, ``history list``
as a table or JSON, ``settings`` and Ctrl+C without a terminal."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pi_agent_ask import cli
from pi_agent_ask.history_table import history_table

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = {
    "title": "Build setup",
    "questions": [
        {
            "id": "goal",
            "prompt": "What should I optimize for?",
            "options": [{"value": "speed", "label": "Speed"}, {"value": "size", "label": "Size"}],
        }
    ],
}


def run(
    *args: str, env: dict[str, str], stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The command in a new session (no controlling terminal: ``/dev/tty`` cannot open)."""
    return subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
        env=env,
        start_new_session=True,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}


def test_version(env: dict[str, str]) -> None:
    done = run("--version", env=env)
    assert done.returncode == 0
    assert done.stdout.startswith("pi-agent-ask ") and done.stdout.strip().split()[1][0].isdigit()


def test_ask_journals_into_the_default_session_and_history_reads_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run("ask", env=env, stdin=json.dumps(PAYLOAD))
    assert done.returncode == 3  # no terminal: the fallback result
    default = tmp_path / "agent" / "pi-agent-ask" / "history.pias"
    assert default.exists()
    listing = run("history", "list", env=env)  # piped: JSON
    assert listing.returncode == 0, listing.stderr
    data = json.loads(listing.stdout)
    assert data["total"] == 1 and data["records"][0]["prompt"] == "What should I optimize for?"


def test_no_session_journals_nothing(env: dict[str, str], tmp_path: Path) -> None:
    done = run("ask", "--no-session", env=env, stdin=json.dumps(PAYLOAD))
    assert done.returncode == 3
    assert not (tmp_path / "agent" / "pi-agent-ask" / "history.pias").exists()
    listing = run("history", "list", env=env)
    assert listing.returncode == 0
    assert json.loads(listing.stdout)["total"] == 0


def test_history_list_is_a_table_on_a_terminal(env: dict[str, str], tmp_path: Path) -> None:
    assert run("ask", env=env, stdin=json.dumps(PAYLOAD)).returncode == 3
    data = json.loads(run("history", "list", env=env).stdout)
    table = history_table(data, tmp_path / "h.pias", width=140)
    lines = table.splitlines()
    assert lines[0].split() == ["STATUS", "WHEN", "QUESTION", "REQUEST", "QUESTION-ID"]
    record = data["records"][0]
    assert lines[1].startswith("cancelled")
    assert "Q1: What should I optimize for?" in lines[1]
    assert lines[1].endswith(f"{record['requestId']} goal")
    assert all(len(line) <= 140 for line in lines[:2])

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    args = cli.build_parser().parse_args(["history", "list"])
    os.environ["PI_CODING_AGENT_DIR"] = env["PI_CODING_AGENT_DIR"]
    assert cli.cmd_history(args, out, io.StringIO()) == 0
    assert out.getvalue().splitlines()[0].startswith("STATUS")
    args = cli.build_parser().parse_args(["history", "list", "--json"])
    out = Tty()
    assert cli.cmd_history(args, out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["total"] == 1


def test_settings_without_a_terminal_says_it_needs_one(env: dict[str, str]) -> None:
    done = run("settings", env=env)
    assert done.returncode == 3
    assert "requires interactive TUI mode" in done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr


def test_ctrl_c_while_starting_prints_no_traceback(env: dict[str, str], tmp_path: Path) -> None:
    fifo = tmp_path / "payload"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [sys.executable, "-m", "pi_agent_ask", "ask", str(fifo)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    # Opening the FIFO's write end returns once ``ask`` opened it to read its payload: it is
    # starting up. Interrupt it there, as a person pressing Ctrl+C during start-up does. The
    # write end stays open until it exited: closing it at once would race the signal with an
    # empty payload (which rightly exits 2) on a loaded machine.
    writer = os.open(fifo, os.O_WRONLY)
    try:
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            # The signal came after Python last looked for signals and before the read it
            # then began: the read waits for the payload's end. Closing the write end ends
            # it, and the interrupt is raised before the empty payload is parsed.
            os.close(writer)
            writer = -1
            out, err = process.communicate(timeout=60)
    finally:
        if writer >= 0:
            os.close(writer)
    assert process.returncode == cli.EXIT_INTERRUPTED
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert out == ""


def test_session_and_no_session_together_are_refused(env: dict[str, str], tmp_path: Path) -> None:
    """``--session FILE --no-session`` asked for two things: a usage error, nothing asked and
    nothing journalled (``--no-session`` silently won)."""
    session = tmp_path / "s.pias"
    done = run("ask", "--session", str(session), "--no-session", env=env, stdin=json.dumps(PAYLOAD))
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr and done.stdout == ""
    assert not session.exists()
