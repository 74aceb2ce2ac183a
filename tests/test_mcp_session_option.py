"""``pi-agent-ask mcp --session PATH`` that cannot be a journal, as a client and a person see it:
refused at start when start-up can tell (exit 5, a line on standard error), else a JSON-RPC
error naming the file on each request that needs it (and a line on standard error)."""

from __future__ import annotations

import sys

import pytest
import trio
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from tests.test_mcp import ASK
from tests.test_mcp_stdio import Home, call, home, plain, server

__all__ = ["home"]


async def test_a_session_that_is_a_folder_is_refused_at_start(home: Home) -> None:
    folder = home.root / "sessions"
    folder.mkdir()
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp", "--session", str(folder)],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=home.env(),
            cwd=home.work,
        )
    assert done.returncode == 5
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"pi-agent-ask mcp: session file refused (not-a-regular-file): {folder}: not a regular "
        "file (a FIFO, device or directory)\n"
    )


async def test_a_session_that_is_not_a_session_file_is_a_json_rpc_error(home: Home) -> None:
    notes = home.root / "notes.txt"
    notes.write_text("my notes, not a journal\n")
    with trio.fail_after(60):
        async with server(home, "--desk", "off", "--session", str(notes)) as client:
            with pytest.raises(MCPError) as listed:
                await client.list_tools()
            with pytest.raises(MCPError) as called:
                await client.call_tool("ask_user", ASK)
            # The person moves the file away: the next call makes the journal there.
            notes.rename(home.root / "notes-kept.txt")
            asked = await call(client, "ask_user", ASK)
    for refused in (listed.value.error, called.value.error):
        assert refused.code == INTERNAL_ERROR
        assert refused.message.startswith(
            f"pi-agent-ask cannot open its session journal: {notes}: not a pi-agent-ask "
            "session file. Give --session a pi-agent-ask session file"
        )
        assert refused.data == {"path": str(notes), "reason": "not-a-session-file"}
    assert "`pi-agent-ask desk`" in plain(asked)  # served (--desk off: the fallback text)
    assert (home.root / "notes-kept.txt").read_text() == "my notes, not a journal\n"
    log = (home.root / "server.log").read_text()
    assert log.count(f"pi-agent-ask: cannot open the session journal: {notes}:") == 1, log


async def test_a_question_no_desk_could_see_is_refused_not_kept(home: Home) -> None:
    """With ``--session``, no desk and a client that cannot show forms, a question kept "for
    a desk" would be kept where no desk looks (the desk keeps its own journals): the agent
    was told to have the user start a desk, whose wait then found nothing. It is refused
    instead, saying what helps, and asked again once a desk runs it is answered there."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    journal = home.root / "mine.pias"
    desk_file = home.root / "no-desk.json"
    with trio.fail_after(90):
        async with server(home, "--session", str(journal), name="own") as client:
            refused = [
                await call(client, "ask_user", {**ASK, "background": background})
                for background in (True, False)
            ]
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=desk_file
            ) as desk:
                asked = await call(client, "ask_user", {**ASK, "background": True})
                await answer_displayed(desk)
                waited = await call(client, "wait_for_answers", {})
    for result in refused:
        assert result.is_error
        text = plain(result)
        assert text.startswith("Nothing was asked"), text
        assert "--session" in text and "`pi-agent-ask desk`" in text
    [item] = waited.structured_content["results"]
    assert item["requestId"] == asked.structured_content["requestId"]
    log = (home.root / "server.log").read_text()
    assert "pi-agent-ask: a question was refused" in log and "--session" in log


async def test_a_call_no_desk_could_take_either_hears_what_is_wrong_with_it(home: Home) -> None:
    """The refusal of a question no desk could see is for calls that would be asked: one the
    runtime refuses (its schema, its semantic checks) gets that refusal, which tells the agent
    what to change, rather than advice to start a desk that would refuse it too."""
    journal = home.root / "mine.pias"
    blank_prompt = {"questions": [{"id": "a", "prompt": " ", "options": [{"value": "x"}]}]}
    with trio.fail_after(60):
        async with server(home, "--session", str(journal), name="own") as client:
            wrong_type = await call(client, "ask_user", {"questions": "x"})
            blank = await call(client, "ask_user", blank_prompt)
            valid = await call(client, "ask_user", ASK)
    assert wrong_type.is_error
    assert plain(wrong_type) == (
        'Validation failed for tool "ask_user":\n  - questions: must be array, not string'
    )
    assert blank.structured_content["error"]["issues"] == [
        {"path": "questions[0].prompt", "message": "Question 1: prompt is required"}
    ]
    assert plain(valid).startswith("Nothing was asked"), plain(valid)
