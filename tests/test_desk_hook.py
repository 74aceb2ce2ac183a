"""Claude Code's hook while ``pi-agent-ask mcp`` forwards to a desk: the answers a person gave
on the desk reach the agent's context through the hook, exactly once, and a take whose reply
cannot be written is given back to the desk (journaled there, first in the next result).

The server and the hook run as processes in a private home (``tests.test_mcp_stdio``); the
desk runs in the test (``open_desk``), on the connection file the server follows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.desk.run import Desk
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, answer_displayed, desk_client, open_desk
from pi_agent_ask.mcp_common.connection import HOOK_PATH, desk_url, key_headers
from pi_agent_ask.mcp_common.journals import default_key
from pi_agent_ask.mcp_server import hook
from pi_agent_ask.mcp_server.forward import DeskUpstream, desk_take
from pi_agent_ask.mcp_server.hook_socket import runtime_dir, slug
from tests.test_mcp import ASK, background_of
from tests.test_mcp_stdio import Home, call, home, run_hook, server

__all__ = ["home"]

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

PROMPT = {"hook_event_name": "UserPromptSubmit", "prompt": "go on"}


async def answered_on_desk(desk: Desk, key: str) -> None:
    """Answer the form on the desk's display (agent ``key``'s) and return once its outcome is
    journaled (``pi-agent-ask:completed``), so a take finds the answer."""
    await desk.board.wait_for(lambda board: board.current is not None)
    agent = desk.registry.get(key)
    assert agent is not None
    completed = trio.Event()
    unsubscribe = agent.runtime.events.on(ev.COMPLETED, lambda _payload: completed.set())
    try:
        shown = await answer_displayed(desk)
        assert shown.key == key
        await completed.wait()
    finally:
        unsubscribe()


async def test_the_hook_adds_an_answer_given_on_the_desk_once(home: Home) -> None:
    key = default_key("claude-code", home.work)
    payload = {**PROMPT, "cwd": str(home.work)}
    with trio.fail_after(90):
        async with (
            open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk,
            server(home, name="claude-code") as client,
        ):
            await call(client, "ask_user", {**ASK, "background": True})
            before = await run_hook(home, payload)
            await answered_on_desk(desk, key)
            first = await run_hook(home, payload)
            again = await run_hook(home, {**payload, "hook_event_name": "PostToolUse"})
            later = await call(client, "ask_user", {**ASK, "background": True})
    assert before == (0, "")  # nothing answered yet: the hook adds nothing
    status, output = first
    assert status == 0
    added = json.loads(output)["hookSpecificOutput"]
    assert added["hookEventName"] == "UserPromptSubmit"
    assert "Postgres" in added["additionalContext"]
    assert again == (0, "")  # taken once
    assert background_of(later) == []  # and not again with the next tool result


async def test_a_take_whose_reply_fails_is_given_back_to_the_desk(tmp_path: Path) -> None:
    key = "agent@/work"
    logged: list[str] = []
    with trio.fail_after(60):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, key) as agent,
            trio.open_nursery() as nursery,
        ):
            await agent.call_tool("ask_user", {**ASK, "background": True})
            await answered_on_desk(desk, key)
            upstream = DeskUpstream(
                url=desk.address.url, token=desk.address.token, key=key, nursery=nursery
            )
            # The hook hangs up before the reply: writing it fails, and the take is given back.
            hook_side, server_side = trio.testing.memory_stream_pair()
            await hook_side.send_all(b'{"op": "take"}\n')
            await hook_side.aclose()
            await hook._serve_one(desk_take(upstream, logged.append), server_side)
            given_back = await agent.call_tool("ask_user", {**ASK, "background": True})
            retaken = await desk_take(upstream, logged.append)()
    [answer] = background_of(given_back)
    assert answer["details"]["result"]["answers"]["db"]["values"] == ["pg"]
    assert retaken.messages == []  # given back once, handed out once more: then gone
    assert logged == []


async def test_the_desk_hook_endpoint_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            url = desk_url(desk.address.url, HOOK_PATH)
            token = {"Authorization": f"Bearer {desk.address.token}"}
            async with httpx2.AsyncClient(timeout=10) as http:

                async def post(headers: dict[str, str], **params: str) -> tuple[int, Any]:
                    response = await http.post(url, params=params, headers=headers)
                    return response.status_code, response.json()

                no_token = await post(key_headers("a"), op="take")
                no_key = await post(token, op="take")
                bad_op = await post({**token, **key_headers("a")}, op="peek")
                bad_key = await post({**token, **key_headers("two\tparts")}, op="take")
                empty = await post({**token, **key_headers("a")}, op="take")
                unknown = await post({**token, **key_headers("a")}, op="give-back", receipt="x")
                got = await http.get(url, headers={**token, **key_headers("a")})
    assert no_token[0] == 401
    assert no_key == (400, {"error": "No agent key: send the X-Pi-Agent-Ask-Key header."})
    assert bad_op == (400, {"error": "Unknown hook request: op must be take or give-back."})
    assert bad_key[0] == 400 and "Invalid X-Pi-Agent-Ask-Key" in bad_key[1]["error"]
    assert empty == (200, {"messages": [], "receipt": ""})
    assert unknown == (404, {"error": "No such receipt: nothing was given back."})
    assert got.status_code == 404


async def test_the_hook_socket_follows_the_server_to_the_desk_and_back(home: Home) -> None:
    key = default_key("claude-code", home.work)
    socket = runtime_dir(home.env()) / f"{slug(key)}.sock"
    seen: list[bool] = []
    with trio.fail_after(90):
        async with server(home, name="claude-code") as client:
            await call(client, "ask_user", {**ASK, "background": True})  # kept: no desk
            seen.append(socket.exists())
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk:
                await call(client, "ask_user", {**ASK, "background": True})  # on the desk
                seen.append(socket.exists())
                await answered_on_desk(desk, key)
            await desk.stopped.wait()
            await call(client, "ask_user", {**ASK, "background": True})  # kept again
            seen.append(socket.exists())
    log = (home.root / "server.log").read_text()
    assert seen == [True, True, True]
    assert "hooks are off" not in log
