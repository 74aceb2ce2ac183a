"""``pi-agent-ask mcp`` when its client closes standard input with requests in flight.

MCP ends a stdio session by closing the server's input; a client (or a script such as
``printf '...' | pi-agent-ask mcp``) may still read the output. Each test runs the server as a
process over pipes: the requests that need no person are answered before it ends, and a call
that waits for the person returns a structured error saying where its form stays, which the
next server (or ``history``) finds there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import mcp.types as types
import pytest
import trio
import trio.testing

from pi_agent_ask.mcp_common.journals import journal_path
from tests.test_mcp import ASK
from tests.test_mcp_stdio import INITIALIZED, Home, hello, home, read_lines

__all__ = ["home"]

CALL = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}'


def call(number: int, name: str, arguments: dict[str, Any]) -> str:
    return CALL % (number, json.dumps({"name": name, "arguments": arguments}))


def initialize(name: str, capabilities: dict[str, Any] | None = None) -> str:
    params = hello(name, capabilities=capabilities)
    return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})


async def start(home: Home, *args: str) -> trio.Process:
    """``pi-agent-ask mcp ARGS`` with pipes for its input and output (standard error goes to
    ``server.log``, which the process holds open)."""
    with (home.root / "server.log").open("a") as log:
        return await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=home.env(),
            cwd=home.work,
        )


async def send(process: trio.Process, *lines: str) -> None:
    assert process.stdin is not None
    await process.stdin.send_all("".join(line + "\n" for line in lines).encode())


async def rest(process: trio.Process) -> bytes:
    """Everything the server writes until its output ends."""
    assert process.stdout is not None
    received = b""
    while chunk := await process.stdout.receive_some(65536):
        received += chunk
    return received


def by_id(output: bytes) -> dict[Any, dict[str, Any]]:
    messages = [json.loads(line) for line in output.splitlines()]
    return {m["id"]: m for m in messages if "method" not in m}


async def test_requests_in_flight_when_the_input_closes_are_answered(home: Home) -> None:
    """A script writes its requests, closes its input and reads: every request that needs no
    person (the tool list, a history tool) gets its result; ``wait_for_answers``, which would
    wait for the person, gets a structured error naming the questions and the journal where
    they stay; the server ends by itself (exit 0) and the questions are still queued there."""
    settings = home.root / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    with trio.fail_after(90):
        process = await start(home, "--settings", str(settings))
        assert process.stdout is not None
        await send(
            process,
            initialize("script"),
            INITIALIZED,
            call(1, "ask_user", {**ASK, "background": True}),
            call(2, "ask_user", ASK),
        )
        opened = by_id(await read_lines(process.stdout, 3))
        assert process.stdin is not None
        await send(
            process,
            '{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}',
            call(4, "list_ask_history", {}),
            call(5, "wait_for_answers", {}),
        )
        await process.stdin.aclose()
        answers = by_id(await rest(process))
        assert await process.wait() == 0
    asked = [opened[n]["result"]["structuredContent"]["requestId"] for n in (1, 2)]
    assert set(answers) == {3, 4, 5}, answers
    assert "ask_user" in [tool["name"] for tool in answers[3]["result"]["tools"]]
    assert answers[4]["result"]["structuredContent"]["total"] == 2, answers[4]
    ended = answers[5]["result"]
    journal = journal_path(home.state, f"script@{home.work}")
    assert ended["isError"] is True
    assert ended["structuredContent"] == {
        "status": "input_closed",
        "pendingRequestIds": asked,
        "sessionFile": str(journal),
    }
    text = ended["content"][0]["text"]
    assert "closed this server's input" in text and str(journal) in text, text
    assert "Nothing is lost" in text
    listed = await trio.run_process(
        [sys.executable, "-m", "pi_agent_ask", "history", "list", "--session", str(journal)],
        capture_stdout=True,
        env=home.env(),
    )
    records = json.loads(listed.stdout)["records"]
    assert {(r["requestId"], r["status"]) for r in records} == {(rid, "waiting") for rid in asked}


async def test_a_form_shown_in_the_client_when_the_input_closes_is_shown_again(
    home: Home,
) -> None:
    """A foreground ``ask_user`` whose form the client shows (form elicitation) when the
    client closes its input returns an error naming its request and journal, at once; the
    next server of the agent shows the same form again."""
    elicitation = {"elicitation": {"form": {}}}
    with trio.fail_after(90):
        process = await start(home)
        assert process.stdout is not None and process.stdin is not None
        await send(process, initialize("shows", elicitation), INITIALIZED, call(1, "ask_user", ASK))
        shown = json.loads((await read_lines(process.stdout, 2)).splitlines()[1])
        assert shown["method"] == "elicitation/create", shown
        await process.stdin.aclose()
        answers = by_id(await rest(process))
        assert await process.wait() == 0
        ended = answers[1]["result"]
        assert ended["isError"] is True
        assert ended["structuredContent"]["status"] == "input_closed"
        [request_id] = ended["structuredContent"]["pendingRequestIds"]
        assert request_id in ended["content"][0]["text"]
        again = await start(home)
        assert again.stdout is not None and again.stdin is not None
        await send(
            again,
            initialize("shows", elicitation),
            INITIALIZED,
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        )
        lines = (await read_lines(again.stdout, 3)).splitlines()
        reshown = [json.loads(line) for line in lines if b"elicitation/create" in line]
        await again.stdin.aclose()
        await rest(again)
        assert await again.wait() == 0
    assert reshown and reshown[0]["params"]["message"] == shown["params"]["message"]


async def test_a_call_waiting_on_a_desk_when_the_input_closes_leaves_its_form_there(
    home: Home,
) -> None:
    """Through a desk: a foreground ``ask_user`` the desk shows when the client closes its
    input returns the structured error at once, and its form stays on the desk."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    desk_file = home.root / "no-desk.json"  # the file the server's environment names
    with trio.fail_after(90):
        async with open_desk(home.root / "desk", desk_file=desk_file, state_dir=home.state) as desk:
            process = await start(home)
            assert process.stdin is not None
            await send(process, initialize("desked"), INITIALIZED, call(1, "ask_user", ASK))
            await desk.board.wait_for(lambda board: board.current is not None)
            await process.stdin.aclose()
            answers = by_id(await rest(process))
            assert await process.wait() == 0
            shown = await answer_displayed(desk)
    ended = answers[1]["result"]
    assert ended["isError"] is True
    assert ended["structuredContent"]["status"] == "input_closed"
    assert "stays queued on the pi-agent-ask desk" in ended["content"][0]["text"]
    assert shown.key == f"desked@{home.work}"


async def read_to_the_end(answered: bool) -> float:
    """Seconds from the end of a server's input to the end of its read stream, with one
    request read, and answered (or not) first."""
    from mcp.shared.message import SessionMessage

    from pi_agent_ask.mcp_server.input_end import CountedWrites, HeldReads, Outstanding

    send, receive = anyio.create_memory_object_stream[Any](2)
    written, taken = anyio.create_memory_object_stream[Any](2)
    outstanding = Outstanding()
    ended: list[bool] = []
    ping = types.JSONRPCRequest(jsonrpc="2.0", id=7, method="ping")
    async with (
        HeldReads(receive, outstanding, lambda: ended.append(True)) as reads,
        CountedWrites(written, outstanding) as writes,
        taken,
    ):
        await send.send(SessionMessage(ping))
        await send.aclose()
        assert (await reads.receive()).message == ping
        if answered:
            answer = types.JSONRPCResponse(jsonrpc="2.0", id=7, result={})
            await writes.send(SessionMessage(answer))
        start = trio.current_time()
        with trio.fail_after(100), pytest.raises(anyio.EndOfStream):
            await reads.receive()
    assert ended == [True]
    return trio.current_time() - start


async def test_the_read_ends_when_the_answers_are_out_or_after_the_limit(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """The end of the input reaches the server once every request read is answered, at once;
    a request that is never answered (a desk that stopped answering, say) holds it only
    ``ANSWERS_LIMIT`` seconds, said on standard error."""
    from pi_agent_ask.mcp_server.input_end import ANSWERS_LIMIT

    assert await read_to_the_end(answered=True) == 0
    assert capsys.readouterr().err == ""
    assert await read_to_the_end(answered=False) == ANSWERS_LIMIT
    assert "1 request(s) still running after 30 s are ended" in capsys.readouterr().err
