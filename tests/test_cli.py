"""The command line, run as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=60,
        check=False,
    )


def test_validate_accepts_the_example_payload() -> None:
    done = run("validate", "examples/deploy.json")
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["ok"] is True and out["issues"] == []
    assert out["params"]["questions"][1]["type"] == "multi"


def test_validate_reports_semantic_and_schema_issues_with_exit_2() -> None:
    done = run("validate", "-", stdin='{"questions": []}')
    assert done.returncode == 2
    assert json.loads(done.stdout) == {
        "ok": False,
        "issues": [{"path": "questions", "message": "At least one question is required"}],
        "params": None,
    }
    schema = run(
        "validate", stdin='{"questions": [{"id": "a", "prompt": "P", "options": [{"label": "x"}]}]}'
    )
    assert schema.returncode == 2
    issues = json.loads(schema.stdout)["issues"]
    assert issues and all(issue["path"] for issue in issues)


def test_validate_rejects_text_that_is_not_json() -> None:
    done = run("validate", stdin="{nope")
    assert done.returncode == 2
    assert "not valid JSON" in json.loads(done.stdout)["issues"][0]["message"]


def test_ask_without_a_terminal_prints_the_fallback_and_exits_3(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    done = subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", "ask", "--settings", str(settings), "-"],
        input=(ROOT / "examples/deploy.json").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
        check=False,
    )
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["structuredContent"]["cancelled"] is True
    assert (
        "Needs user input: ask_user requires interactive TUI mode." in result["content"][0]["text"]
    )


def test_headless_demo_runs_to_the_end() -> None:
    done = run("demo", "--headless")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("✓ Answers received") == 3


def test_history_commands_read_a_demo_session(tmp_path: Path) -> None:
    session = tmp_path / "demo.pas"
    assert run("demo", "--headless", "--session", str(session)).returncode == 0
    listing = run("history", "list", "--session", str(session), "--answered-only")
    assert listing.returncode == 0, listing.stderr
    data = json.loads(listing.stdout)
    assert data["total"] == 3
    assert [r["questionId"] for r in data["records"]] == ["region", "checks", "window"]
    first = data["records"][0]
    read = run("history", "read", "--session", str(session), first["requestId"], "region")
    record = json.loads(read.stdout)["record"]
    assert record["answer"]["values"] == ["eu-west"]
    missing = run("history", "read", "--session", str(session), "nope", "q")
    assert missing.returncode == 2
    assert "Question not found on the current branch: nope / q" in missing.stderr
    target = tmp_path / "out.md"
    key = f"{first['requestId']}:region"
    exported = run("history", "export", "--session", str(session), str(target), key, key)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["keys"] == [
        {"requestId": first["requestId"], "questionId": "region"}
    ]
    assert target.read_text().startswith("# Ask history\n")
    again = run("history", "export", "--session", str(session), str(target))
    assert again.returncode == 2
    assert target.read_text().count("\n## Question ") == 1


def test_history_of_a_missing_session_is_an_error(tmp_path: Path) -> None:
    done = run("history", "list", "--session", str(tmp_path / "missing.pas"))
    assert done.returncode == 2
    assert "cannot open session" in done.stderr
    assert not (tmp_path / "missing.pas").exists()


def test_history_export_without_a_path_names_only_what_is_missing() -> None:
    """The question keys are optional (``export PATH [REQUEST_ID:QUESTION_ID ...]``): a
    missing path is said alone, not as if the keys were missing too."""
    done = run("history", "export")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "pi-agent-ask history export: error: the following arguments are required: path"
    )


def test_history_without_an_action_says_so_as_the_other_commands_do() -> None:
    """``history`` alone names what is missing as ``store`` and ``hook`` do (``ACTION``), not
    the parser's internal name for it."""
    done = run("history")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "pi-agent-ask history: error: the following arguments are required: ACTION"
    )


def test_ask_reports_a_refused_session_file_with_exit_5(tmp_path: Path) -> None:
    not_a_session = tmp_path / "plain.txt"
    not_a_session.write_text("this is not a session file\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_agent_ask",
            "ask",
            "--session",
            str(not_a_session),
            "--settings",
            str(tmp_path / "settings.json"),
            "examples/deploy.json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 5
    assert done.stdout == ""
    assert done.stderr.startswith(
        f"pi-agent-ask: session file refused (not-a-session-file): {not_a_session}: "
    )
    assert not_a_session.read_text() == "this is not a session file\n"  # left untouched


def test_history_list_for_a_person_fits_80_columns(tmp_path: Path) -> None:
    """The table ``history list`` prints on a terminal: at 80 columns no line is wider, each
    request:question key stays whole (``history read`` takes it) and the question is shown in
    whole words."""
    from pi_agent_ask.form.transcript import cell_width
    from pi_agent_ask.history_table import history_table

    session = tmp_path / "demo.pas"
    assert run("demo", "--headless", "--session", str(session)).returncode == 0
    data = json.loads(run("history", "list", "--session", str(session)).stdout)
    table = history_table(data, session, width=80)
    lines = table.splitlines()
    assert max(cell_width(line) for line in lines) <= 80, table
    for record in data["records"]:
        assert f"{record['requestId']} {record['questionId']}" in table
    assert "Region: Where should the service run first?" in table
    # At 60 the key goes below the status and time too (a key alone takes 43 columns).
    narrow = history_table(data, session, width=60)
    assert max(cell_width(line) for line in narrow.splitlines()) <= 60, narrow
    words = set(" ".join(f"{r['label']}: {r['prompt']}" for r in data["records"]).split())
    for line in narrow.splitlines():
        if line.startswith(" " * 10) and ": " in line:  # a question: whole words, then "…"
            shown = line.split()
            assert set(shown[:-1]) <= words
            assert shown[-1] in words or shown[-1].endswith("…")


def test_ask_and_demo_name_a_session_file_that_cannot_be_created(tmp_path: Path) -> None:
    """A session path in a directory that does not exist (or cannot be written) is the
    person's mistake, said in one line with exit 5 before any form opens: not an internal
    error (ask) or a traceback (demo). The ``--output`` file is not left behind empty."""
    session = tmp_path / "no-such-dir" / "s.pias"
    settings = str(tmp_path / "settings.json")
    output = tmp_path / "result.json"
    ask = subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_agent_ask",
            "ask",
            "--session",
            str(session),
            "--settings",
            settings,
            "--output",
            str(output),
            "examples/deploy.json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        start_new_session=True,
        check=False,
    )
    demo = run("demo", "--headless", "--session", str(session), "--settings", settings)
    for done in (ask, demo):
        assert done.returncode == 5, done.stderr
        assert done.stdout == ""
        assert done.stderr == (
            f"pi-agent-ask: cannot open session {str(session)!r}: No such file or directory\n"
        )
    assert not session.parent.exists()
    assert not output.exists()


def test_ask_refuses_an_output_file_it_cannot_write_before_the_form(tmp_path: Path) -> None:
    """``--output`` in a directory that does not exist: said before anything is asked (the
    answers would have nowhere to go), exit 2, nothing journalled."""
    output = tmp_path / "no-such-dir" / "result.json"
    session = tmp_path / "s.pias"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_agent_ask",
            "ask",
            "--output",
            str(output),
            "--session",
            str(session),
            "--settings",
            str(tmp_path / "settings.json"),
            "examples/deploy.json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"pi-agent-ask: cannot write the result to {str(output)!r}: No such file or directory\n"
    )
    assert not session.exists()


def test_ask_names_the_default_session_it_cannot_make(tmp_path: Path) -> None:
    """The default history session under an agent directory that cannot be made (a file is in
    the way): the reason is the directory's, said with exit 5 before any form opens."""
    blocker = tmp_path / "agent"
    blocker.write_text("a file where the agent directory should be\n")
    done = subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", "ask", "examples/deploy.json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(blocker)},
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    assert done.stdout == ""
    session = blocker / "pi-agent-ask" / "history.pias"
    assert done.stderr.endswith(
        f"pi-agent-ask: cannot open session {str(session)!r}: Not a directory\n"
    )


def test_history_list_for_a_person_fits_40_columns(tmp_path: Path) -> None:
    """At 40 columns (the narrowest screen the product supports) a request id and its question
    id do not fit beside the status column: they still stay whole, each within the width."""
    from pi_agent_ask.form.transcript import cell_width
    from pi_agent_ask.history_table import history_table

    session = tmp_path / "demo.pas"
    assert run("demo", "--headless", "--session", str(session)).returncode == 0
    data = json.loads(run("history", "list", "--session", str(session)).stdout)
    table = history_table(data, session, width=40)
    lines = table.splitlines()
    assert max(cell_width(line) for line in lines) <= 40, table
    words = {word for line in lines for word in line.split()}
    for record in data["records"]:
        assert record["requestId"] in words and record["questionId"] in words, table


BOM = "\ufeff".encode()


def ask_without_terminal(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", "ask", "--no-session", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal: the fallback lists the questions
        check=False,
    )


def test_a_payload_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """An editor (or a shell) that writes a UTF-8 byte order mark before the JSON: ``ask`` and
    ``validate`` read the payload, from a file and from standard input alike."""
    payload = BOM + (ROOT / "examples/deploy.json").read_bytes()
    saved = tmp_path / "payload.json"
    saved.write_bytes(payload)
    settings = str(tmp_path / "settings.json")
    for done in (
        ask_without_terminal("--settings", settings, str(saved)),
        ask_without_terminal("--settings", settings, "-", stdin=payload),
    ):
        assert done.returncode == 3, done.stderr  # asked (no terminal here: the fallback)
        text = json.loads(done.stdout)["content"][0]["text"]
        assert "Where should the service run first?" in text, text
    validated = run("validate", str(saved))
    assert validated.returncode == 0, validated.stdout
    assert json.loads(validated.stdout)["ok"] is True


def test_a_byte_order_mark_anywhere_else_is_still_refused(tmp_path: Path) -> None:
    body = (ROOT / "examples/deploy.json").read_bytes()
    cases = {
        "twice": (BOM + BOM + body, "Payload is not valid JSON: Unexpected UTF-8 BOM"),
        "inside": (b"[" + BOM + b"]", "Payload is not valid JSON: Expecting value"),
        "utf-16": (b"\xff\xfe" + body.decode().encode("utf-16-le"), "Cannot read payload"),
    }
    for name, (payload, message) in cases.items():
        saved = tmp_path / f"{name}.json"
        saved.write_bytes(payload)
        done = ask_without_terminal(str(saved))
        assert done.returncode == 2, (name, done.stdout)
        assert done.stderr.decode().startswith(f"pi-agent-ask: {message}"), (name, done.stderr)


def test_history_list_for_a_person_never_prints_the_agents_escapes(tmp_path: Path) -> None:
    """Labels and prompts are the agent's text: on a terminal the table shows them neutralised
    (an OSC retitled the window, a CSI recoloured the screen) and drawn as the form draws them,
    so the columns hold."""
    from pi_agent_ask.history_table import history_table

    record = {
        "requestId": "r-1",
        "questionId": "q",
        "status": "answered",
        "createdAt": "2026-12-06T16:06:00Z",
        "label": "L\x1b[31mRED",
        "prompt": "P\x1b]0;pwned\x07 ok 👍🏽",
    }
    table = history_table({"records": [record], "total": 1}, tmp_path / "h.pias", width=80)
    assert "\x1b" not in table and "\x07" not in table, repr(table)
    assert "ok 👍" in table
    assert "\U0001f3fd" not in table


def test_output_dash_is_standard_output(tmp_path: Path) -> None:
    """``--output -`` is standard output, as ``-`` is standard input for the payload; it
    wrote a file named ``-`` in the working directory."""
    done = subprocess.run(
        [sys.executable, "-m", "pi_agent_ask", "ask", "--no-session", "--output", "-"],
        input=(ROOT / "examples" / "deploy.json").read_bytes(),
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        start_new_session=True,  # no terminal: the fallback result is printed
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["details"]["cancelled"] is True
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("history", "list"),
        ("history", "read"),
        ("history", "export"),
        ("store", "token"),
        ("store", "revoke"),
    ],
)
def test_every_argument_of_a_command_says_what_it_is_for(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--help`` describes each argument: none is a bare name (``--limit LIMIT`` said neither
    the default nor the bounds)."""
    from pi_agent_ask import cli

    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    lines = capsys.readouterr().out.splitlines()
    sections = [
        n for n, line in enumerate(lines) if line.endswith("arguments:") or line == "options:"
    ]
    assert sections, lines
    bare = []
    for n, line in enumerate(lines[sections[0] :], start=sections[0]):
        entry = line.startswith("  ") and not line.startswith("   ")
        described = "  " in line.strip() or (
            n + 1 < len(lines) and lines[n + 1].startswith("   ")  # the text on the next line
        )
        if entry and not described:
            bare.append(line.strip())
    assert bare == [], bare
