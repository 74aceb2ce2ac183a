"""Claude Code's hook for an agent of a team store (``pi-agent-ask mcp --desk URL,...``): the
answers given on any desk reach the agent's context through the hook, once; a take goes to the
next desk with its call key when one is away (the same answers, not more); a reply the hook
could not pass on is given back; answers with images wait for a tool result.

A real PostgreSQL (``tests.store_support``); the forwarder and the hook run as processes in a
private home (``tests.test_mcp_stdio.Home``), the team desk in the test."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
import pytest
import trio
import trio.testing
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.mcp_common.connection import HOOK_PATH
from pi_agent_ask.mcp_common.connection import desk_url as beside
from pi_agent_ask.mcp_server import hook
from pi_agent_ask.store.agent import StoreAgentTools
from pi_agent_ask.store.board import result_of_response
from pi_agent_ask.store.db import FormRow, Refused, Store
from pi_agent_ask.store.forward import team_take
from pi_agent_ask.store.run import TeamDesk
from pi_agent_ask.store.testing import Cluster
from tests.store_support import (  # noqa: F401
    YES,
    ask,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_mcp import background_of
from tests.test_mcp_stdio import Home, home, run_hook

__all__ = ["home"]

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

AWAY = "http://127.0.0.1:9/mcp"
"""A desk URL nothing answers at."""


@asynccontextmanager
async def claude_code(home: Home, urls: list[str], token: str) -> AsyncIterator[ClientSession]:
    """Claude Code's MCP client on ``pi-agent-ask mcp --desk URL,...`` in ``home``."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", "--desk", ",".join(urls)],
        env={**os.environ, **home.env(), "PI_AGENT_ASK_TOKEN": token},
        cwd=home.work,
    )
    with (home.root / "server.log").open("a") as log:
        async with (
            stdio_client(server, errlog=log) as (read, write),
            ClientSession(
                read, write, client_info=types.Implementation(name="claude-code", version="1")
            ) as session,
        ):
            await session.initialize()
            yield session


async def answered(desk: TeamDesk, label: str, *, image: bool = False) -> str:
    """Answer the form ``label`` "yes" on ``desk`` (``image``: with a pasted image as well, as
    a terminal's paste gives it); its request id."""

    def labelled(form: FormRow) -> bool:
        return bool(form.params["questions"][0]["label"] == label)

    forms = await desk.board.wait_for(lambda forms: any(map(labelled, forms)))
    [row] = [form for form in forms if labelled(form)]
    result = result_of_response(row, YES)
    assert isinstance(result, dict), result
    if image:
        picture = {"id": "i1", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        result["answers"]["q"]["customImages"] = [picture]
    outcome = await desk.board.submit(row.request_id, result)
    assert not isinstance(outcome, Refused), outcome
    return row.request_id


async def test_the_hook_adds_an_answer_given_on_a_team_desk_once(
    home: Home,
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(home.work), "prompt": "go on"}
    with trio.fail_after(90):
        async with (
            team_desk(desk_url, "ann") as desk,
            claude_code(home, [desk.url], token) as agent,
        ):
            await agent.call_tool("ask_user", ask("Deploy", background=True))
            before = await run_hook(home, payload)
            await answered(desk, "Deploy")
            first = await run_hook(home, payload)
            again = await run_hook(home, {**payload, "hook_event_name": "PostToolUse"})
            later = await agent.call_tool("ask_user", ask("Again", background=True))
    assert before == (0, "")
    status, output = first
    assert status == 0, (home.root / "server.log").read_text()
    added = json.loads(output)["hookSpecificOutput"]["additionalContext"]
    assert "Deploy" in added and "Yes" in added
    assert again == (0, "")
    assert background_of(later) == []


async def test_a_take_goes_on_to_the_next_desk_and_is_given_back_when_the_hook_hangs_up(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    conninfo = pg_cluster.url(store_db)
    token = Store.new_token(conninfo, "alpha")
    logged: list[str] = []
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as desk:
            tools = StoreAgentTools(desk.store, desk.board.wakes, "alpha")
            await tools.call_tool("ask_user", ask("Deploy", background=True), call_key="c1")
            await answered(desk, "Deploy")
            # The first desk is away: the take is the second's. The hook hangs up before its
            # reply, so the take is given back.
            hook_side, server_side = trio.testing.memory_stream_pair()
            await hook_side.send_all(b'{"op": "take"}\n')
            await hook_side.aclose()
            await hook._serve_one(team_take([AWAY, desk.url], token, logged.append), server_side)
            given_back = await tools.call_tool(
                "ask_user", ask("More", background=True), call_key="c2"
            )
            # A take retried with its call key (its desk went away with the reply) gets the
            # same answers, and a new take nothing more.
            await tools.call_tool("ask_user", ask("Third", background=True), call_key="c3")
            await answered(desk, "More")
            first = await tools.take_for_hook("hook-1")
            retried = await tools.take_for_hook("hook-1")
            other = await tools.take_for_hook("hook-2")
    [answer] = background_of(given_back)
    assert answer["details"]["result"]["answers"]["q"]["values"] == ["yes"]
    assert len(first) == 1 and retried == first and other == []
    assert logged == []


async def test_answers_with_images_are_left_for_a_tool_result(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as desk:
            tools = StoreAgentTools(desk.store, desk.board.wakes, "alpha")
            await tools.call_tool("ask_user", ask("Plain", background=True), call_key="c1")
            await tools.call_tool("ask_user", ask("Picture", background=True), call_key="c2")
            await answered(desk, "Plain")
            await answered(desk, "Picture", image=True)
            taken = await tools.take_for_hook("hook-1")
            result = await tools.call_tool("wait_for_answers", {}, call_key="c3")
    [plain] = taken
    assert "Plain" in json.dumps(plain)
    [picture] = result.structured_content["results"]
    assert picture["result"]["questions"][0]["label"] == "Picture"
    assert picture["result"]["answers"]["q"]["customImages"][0]["mimeType"] == "image/png"


async def test_the_team_hook_endpoint_refuses_what_it_cannot_serve(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, httpx2.AsyncClient(timeout=10) as http:
            url = beside(desk.url, HOOK_PATH)
            agent = {"Authorization": f"Bearer {token}"}

            async def post(headers: dict[str, str], **params: str) -> tuple[int, Any]:
                response = await http.post(url, params=params, headers=headers)
                return response.status_code, response.json()

            no_token = await post({}, op="take", call="k")
            bad_op = await post(agent, op="peek", call="k")
            no_call = await post(agent, op="take")
            long_call = await post(agent, op="take", call="k" * 201)
            empty = await post(agent, op="take", call="k")
            nothing_back = await post(agent, op="give-back", call="k")
    assert no_token[0] == 401
    assert bad_op == (400, {"error": "Unknown hook request: op must be take or give-back."})
    assert no_call[0] == long_call[0] == 400
    assert "call must be printable text" in no_call[1]["error"]
    assert empty == (200, {"messages": []})
    assert nothing_back == (200, {"givenBack": 0})


async def test_two_sessions_of_two_agents_in_one_directory_keep_their_hooks_apart(
    home: Home,
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """Two Claude Code sessions in one project, each an agent of the store with its own token
    (stand-ins: ``tests/claude_stand_in.py``): each hook adds its own agent's answers. Before,
    both forwarders named their hook socket by the same default key: the second served no
    hooks, and its session's hook took the first agent's answers."""
    from tests.test_mcp_agent_keys import (
        ROOT,
        assert_kept_apart,
        each_says,
        hook_contexts,
        stand_in,
    )

    store = pg_cluster.url(store_db)
    with trio.fail_after(120):
        async with team_desk(desk_url, "ann") as desk, contextlib.AsyncExitStack() as stack:
            sessions = []
            for label in ("Alpha", "Beta"):
                env = {
                    **os.environ,
                    **home.env(),
                    "PI_AGENT_ASK_TOKEN": Store.new_token(store, label.lower()),
                    "PYTHONPATH": str(ROOT),
                }
                sessions.append(await stand_in(stack, [label, "--desk", desk.url], home.work, env))
            await each_says(sessions, "asked")
            for label in ("Alpha 1", "Alpha 2", "Beta 1", "Beta 2"):
                await answered(desk, label)
            contexts = await hook_contexts(sessions)
    assert_kept_apart(contexts)
