"""Hostile input at the command line, run as a real process (issue 10, items 1, 5, 6, 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.persistence.session_file import SessionFile, SessionFileError

from .runtime_support import EventLog, payload, settings_file, submit

ROOT = Path(__file__).resolve().parent.parent
#: Everything a terminal could act on that printed output must never hold raw.
LIVE = ["\x1b", "\x9b", "\x9d", "\x7f", "\u202e", "\u2066", "\u2028", "\u2029", "\x07"]
HOSTILE = "x\x1b[2J\x1b]0;owned\x07\x9b31m\x9d0;t\x9c\u202eevil\u2066\x7f\u2028end"


def run(*args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "pi_agent_ask", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            start_new_session=True,  # no controlling terminal
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"pi-agent-ask {' '.join(args)} hung")


# -- 1. surrogates in a payload --------------------------------------------------------------

SURROGATE_PAYLOAD = '{"questions": [{"id": "a", "prompt": "Pick\\ud800", "options": ["x", "y"]}]}'


def test_validate_with_a_surrogate_exits_2_with_an_issue() -> None:
    done = run("validate", "-", stdin=SURROGATE_PAYLOAD)
    assert done.returncode == 2, done.stderr
    out = json.loads(done.stdout)
    assert out["ok"] is False and out["params"] is None
    [issue] = out["issues"]
    assert issue["path"] == "questions[0].prompt"
    assert "lone surrogate U+D800" in issue["message"]


def test_ask_with_a_surrogate_exits_2_with_a_tool_error(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    done = run("ask", "--settings", str(settings), "-", stdin=SURROGATE_PAYLOAD)
    assert done.returncode == 2, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is True
    assert "questions[0].prompt: is not valid Unicode" in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("deep", "Payload is nested too deeply to read"),
        ("/dev/zero", "Payload is larger than 67108864 characters"),
    ],
)
def test_an_unreadable_payload_is_an_issue_not_a_traceback(
    tmp_path: Path, source: str, message: str
) -> None:
    if source == "deep":
        deep = tmp_path / "deep.json"
        deep.write_text("[" * 100_000 + "]" * 100_000)
        source = str(deep)
    done = run("validate", source)
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["issues"] == [{"path": "", "message": message}]


# -- 5. odd session paths ----------------------------------------------------------------------


def test_history_list_on_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "s.pas"
    os.mkfifo(fifo)
    done = run("history", "list", "--session", str(fifo), timeout=20)
    assert done.returncode == 5
    assert done.stderr == (
        f"pi-agent-ask: session file refused (not-a-regular-file): {fifo}: "
        "not a regular file (a FIFO, device or directory)\n"
    )


@pytest.mark.parametrize("kind", ["fifo", "char-device"])
async def test_open_runtime_refuses_a_path_that_is_not_a_regular_file(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "s.pas"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/null")
    with pytest.raises(SessionFileError) as refused:
        async with open_runtime(session=path, settings=settings_file(tmp_path)):
            pass  # pragma: no cover - never reached
    assert refused.value.reason == "not-a-regular-file"
    if kind == "fifo":  # nothing was written into it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.read(fd, 100) == b""
        finally:
            os.close(fd)


# -- 6. a session another process holds --------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["demo", "--headless"], ["ask", "-"]],
    ids=["demo", "ask"],
)
def test_a_locked_session_is_a_named_error_with_exit_5(tmp_path: Path, command: list[str]) -> None:
    session = tmp_path / "held.pas"
    settings = settings_file(tmp_path)
    with SessionFile.open(session):  # this process holds the write lock
        done = run(
            *command,
            "--session",
            str(session),
            "--settings",
            str(settings),
            stdin=json.dumps(payload("a")),
        )
    assert done.returncode == 5, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"pi-agent-ask: session file refused (locked): {session}: "
        "session file is open for writing elsewhere\n"
    )


# -- 8. agent text never reaches the terminal live -------------------------------------------


def test_ask_output_escapes_terminal_controls(tmp_path: Path) -> None:
    body = payload("a", title=HOSTILE)
    body["questions"][0]["prompt"] = HOSTILE
    done = run("ask", "--settings", str(tmp_path / "settings.json"), "-", stdin=json.dumps(body))
    assert done.returncode == 3, done.stderr
    for char in LIVE:
        assert char not in done.stdout
    assert "\\u009b31m" in done.stdout and "\\u202eevil" in done.stdout
    json.loads(done.stdout)  # still the same JSON


async def answered_session(tmp_path: Path) -> tuple[Path, str]:
    session = tmp_path / "s.pas"
    body = payload("a", title=HOSTILE)
    body["questions"][0]["prompt"] = HOSTILE
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=NullSurface()
    ) as rt:
        log = EventLog()
        log.attach(rt.events)

        def on_started(started: dict[str, object]) -> None:
            response = {"kind": "answer", "answers": {"a": {"values": ["a1"], "note": HOSTILE}}}
            submit(rt.events, str(started["flowId"]), response)

        rt.events.on(ev.STARTED, on_started)
        with trio.fail_after(20):
            result = await rt.call_tool("ask_user", body, "c1")
    return session, result["details"]["requestId"]


async def test_history_read_and_list_escape_terminal_controls(tmp_path: Path) -> None:
    session, request_id = await answered_session(tmp_path)
    for args in (["read", request_id, "a"], ["list"]):
        command = ["history", *args, "--session", str(session)]
        done = await trio.to_thread.run_sync(lambda command=command: run(*command))
        assert done.returncode == 0, done.stderr
        for char in LIVE:
            assert char not in done.stdout
        assert "\\u009b31m" in done.stdout


async def test_an_export_keeps_the_text_but_no_live_control(tmp_path: Path) -> None:
    session, _request_id = await answered_session(tmp_path)
    target = tmp_path / "out.md"
    done = await trio.to_thread.run_sync(
        lambda: run("history", "export", "--session", str(session), str(target))
    )
    assert done.returncode == 0, done.stderr
    text = target.read_text(encoding="utf-8")
    for char in LIVE:
        assert char not in text
    shown = (
        "x<U+001B>[2J<U+001B>]0;owned<U+0007><U+009B>31m<U+009D>0;t<U+009C><U+202E>evil"
        "<U+2066><U+007F><U+2028>end"
    )
    assert text.count(shown) == 3  # the form title, the question and the question note
