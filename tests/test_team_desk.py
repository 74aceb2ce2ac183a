"""A team desk on a real PostgreSQL, driven by the official MCP SDK's clients through
``pi-agent-ask mcp --desk URL`` with an agent token: one desk, one agent, answers delivered
once; a revoked token refused."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.store.db import Store, Submitted
from pi_agent_ask.store.run import TeamDesk, run_team_desk
from tests.store_support import Cluster, desk_url, pg_cluster, store_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


def ask(label: str, *, background: bool = False) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"{label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": background,
    }


YES = {"kind": "answer", "answers": {"q": {"values": ["yes"]}}}


@asynccontextmanager
async def team_desk(url: str, person: str, **options: Any) -> AsyncIterator[TeamDesk]:
    async with trio.open_nursery() as nursery:
        desk: TeamDesk = await nursery.start(
            functools.partial(run_team_desk, url, person=person, **options)
        )
        try:
            yield desk
        finally:
            desk.cancel()


@asynccontextmanager
async def agent(urls: list[str], token: str) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", "--desk", ",".join(urls)],
        env={**os.environ, "PI_AGENT_ASK_TOKEN": token},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_one_desk_one_agent_answers_delivered_once(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            tools = [tool.name for tool in (await session.list_tools()).tools]
            assert tools == ["ask_user", "wait_for_answers"]
            results: list[Any] = []

            async def foreground() -> None:
                results.append(await session.call_tool("ask_user", ask("Deploy")))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(foreground)
                forms = await desk.board.wait_for(lambda forms: len(forms) == 1)
                assert forms[0].agent_key == "alpha"
                done = await desk.board.answer(forms[0].request_id, YES)
                assert isinstance(done, Submitted) and done.answered_by == "ann"
            (result,) = results
            assert not result.is_error
            assert result.structured_content["answers"]["q"]["values"] == ["yes"]

            receipt = await session.call_tool("ask_user", ask("Later", background=True))
            request_id = receipt.structured_content["requestId"]
            forms = await desk.board.wait_for(lambda forms: len(forms) == 1)
            assert isinstance(await desk.board.answer(request_id, YES), Submitted)
            waited = await session.call_tool("wait_for_answers", {})
            assert [r["requestId"] for r in waited.structured_content["results"]] == [request_id]
            again = await session.call_tool("wait_for_answers", {})
            assert again.structured_content["results"] == []
            rows = await desk.store.run(Store.outcomes, desk.store.store)
            assert [row["answered_by"] for row in rows] == ["ann", "ann"]
            assert all(row["delivered_call"] is not None for row in rows)


async def test_a_revoked_token_is_refused(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    admin = pg_cluster.url(store_db)
    token = Store.new_token(admin, "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            async with agent([desk.url], token) as session:
                assert (await session.list_tools()).tools
            Store.revoke(admin, "alpha")
            import httpx2

            async with httpx2.AsyncClient() as http:
                response = await http.post(
                    desk.url,
                    headers={"Authorization": f"Bearer {token}"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                )
            assert response.status_code == 401
            assert "revoked" in response.json()["error"]
