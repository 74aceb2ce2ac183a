"""A team desk on a real PostgreSQL, driven by the official MCP SDK's clients through
``pi-agent-ask mcp --desk URL`` with an agent token: one desk, one agent, answers delivered
once; a revoked token refused."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.store.db import Store, Submitted, machine
from pi_agent_ask.store.run import TeamDesk
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    agent,
    ask,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_mcp_stdio import read_lines
from tests.test_runtime import WAIT_REFUSED

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


async def test_one_desk_one_agent_answers_delivered_once(
    pg_cluster: Cluster,
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
            # An argument the wait does not take is refused at once, as on every desk (an
            # agent expecting a time limit would wait for the person without one).
            refused = await session.call_tool("wait_for_answers", {"timeout": 1})
            assert refused.is_error and refused.structured_content is None
            assert refused.content[0].text == WAIT_REFUSED
            assert isinstance(await desk.board.answer(request_id, YES), Submitted)
            waited = await session.call_tool("wait_for_answers", {})
            assert [r["requestId"] for r in waited.structured_content["results"]] == [request_id]
            again = await session.call_tool("wait_for_answers", {})
            assert again.structured_content["results"] == []
            rows = await desk.store.run(Store.outcomes, desk.store.store)
            assert [row["answered_by"] for row in rows] == ["ann", "ann"]
            assert all(row["delivered_call"] is not None for row in rows)


async def test_a_revoked_token_is_refused(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    admin = pg_cluster.url(store_db)
    token = Store.new_token(admin, "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            receipt = await session.call_tool("ask_user", ask("Deploy", background=True))
            assert receipt.structured_content["status"] == "queued"
            Store.revoke(admin, "alpha")
            # The same agent's next call, on the session it already has: refused at once.
            refused = await session.call_tool("ask_user", ask("Again", background=True))
            assert refused.is_error
            assert "refused this agent's token" in refused.content[0].text
            import httpx2

            async with httpx2.AsyncClient() as http:
                response = await http.post(
                    desk.url,
                    headers={"Authorization": f"Bearer {token}"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                )
            assert response.status_code == 401
            assert "revoked" in response.json()["error"]


async def test_requests_the_sdk_cannot_read_or_refuses_are_answered_in_words(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """On the team desk and through ``pi-agent-ask mcp --desk URL``, as on a local desk: a
    line that is not JSON gets a parse error (no client waits forever), and params the SDK
    refuses are described."""
    import json
    import os
    import subprocess

    import httpx2

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    version = "2025-11-25"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "ask_user", "arguments": ["not", "an", "object"]},
    }
    described = "Invalid request parameters: params.arguments: Input should be a valid object"
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            headers = {
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {token}",
            }
            async with httpx2.AsyncClient(headers=headers) as http:
                opened = await http.post(desk.url, json=initialize)
                session = {"mcp-session-id": opened.headers["mcp-session-id"]}
                session["mcp-protocol-version"] = version
                await http.post(desk.url, json=initialized, headers=session)
                refused = await http.post(desk.url, json=call, headers=session)
            [data] = [line for line in refused.text.splitlines() if line.startswith("data: ")]
            assert json.loads(data.removeprefix("data: "))["error"]["message"] == described

            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            lines = [initialize, initialized, "not JSON", call, ping]
            sent = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", desk.url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PI_AGENT_ASK_TOKEN": token},
            )
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send_all(sent.encode())
            received = await read_lines(process.stdout, 4)
            await process.stdin.aclose()
            assert await process.wait() == 0
    answers = [json.loads(line) for line in received.splitlines()]
    hello, parse, refusal, pong = answers
    assert hello["result"]["serverInfo"]["version"]
    assert parse["id"] is None and parse["error"]["code"] == -32700
    assert refusal["id"] == 2 and refusal["error"]["message"] == described
    assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}


CLAIMER = """
import sys, trio
from pi_agent_ask.store.board import TeamBoard
from pi_agent_ask.store.db import Store
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen

async def main(url):
    store = Store(url)
    store.open()
    board = TeamBoard(AsyncStore.of(store), Wakes(), "carol", lease=1.0, heartbeat=0.3)
    async with trio.open_nursery() as nursery:
        await nursery.start(board.run)
        claim = await board.open()
        await board.save_draft(claim.request_id, {"drafts": [{"values": ["no"]}]})
        print("claimed", claim.request_id, flush=True)
        await trio.sleep_forever()

trio.run(main, sys.argv[1])
"""


async def test_a_dead_desks_form_returns_with_its_draft_when_the_lease_runs_out(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    import signal
    import subprocess

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            receipt = await session.call_tool("ask_user", ask("Deploy", background=True))
            request_id = receipt.structured_content["requestId"]
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", CLAIMER, desk_url], stdout=subprocess.PIPE
            )
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some(1)
            assert line.decode().split() == ["claimed", request_id]
            # Alive, carol's desk keeps the form: the others see who is on it, and its draft
            # (the claim and the draft are two writes: the board may see the first alone).
            forms = await desk.board.wait_for(
                lambda forms: bool(forms) and forms[0].claim_live and forms[0].draft is not None
            )
            assert (forms[0].claimed_by, forms[0].draft) == (
                "carol",
                {"drafts": [{"values": ["no"]}]},
            )
            refused = await desk.board.open(request_id)
            assert getattr(refused, "reason", None) == "claimed"
            assert "carol is answering this form" in refused.message
            process.send_signal(signal.SIGKILL)
            await process.wait()
            # Dead, its lease runs out and the form comes back to every desk, with its draft.
            forms = await desk.board.wait_for(lambda forms: bool(forms) and not forms[0].claim_live)
            claim = await desk.board.open(request_id)
            assert claim.row.draft == {"drafts": [{"values": ["no"]}]}
            assert isinstance(await desk.board.answer(request_id, YES), Submitted)
            waited = await session.call_tool("wait_for_answers", {})
            assert [r["requestId"] for r in waited.structured_content["results"]] == [request_id]


async def test_two_people_submitting_one_form_at_once_make_one_outcome(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    from pi_agent_ask.store.db import Refused

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with (
            team_desk(desk_url, "ann") as one,
            team_desk(desk_url, "bob") as two,
            agent([one.url, two.url], token) as session,
        ):
            receipt = await session.call_tool("ask_user", ask("Deploy", background=True))
            request_id = receipt.structured_content["requestId"]
            for desk in (one, two):
                await desk.board.wait_for(lambda forms: len(forms) == 1)
            outcomes: list[Any] = []
            no = {"kind": "answer", "answers": {"q": {"values": ["no"]}}}

            async def submit(desk: TeamDesk, response: dict[str, Any]) -> None:
                outcomes.append(await desk.board.answer(request_id, response))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(submit, one, YES)
                nursery.start_soon(submit, two, no)
            (won,) = [o for o in outcomes if isinstance(o, Submitted)]
            (lost,) = [o for o in outcomes if isinstance(o, Refused)]
            assert lost.reason == "answered"
            assert lost.message.startswith(f"{won.answered_by} already answered this form")
            waited = await session.call_tool("wait_for_answers", {})
            (result,) = waited.structured_content["results"]
            value = result["result"]["answers"]["q"]["values"]
            assert value == (["yes"] if won.answered_by == "ann" else ["no"])
            rows = await one.store.run(Store.outcomes, one.store.store)
            assert len(rows) == 1 and rows[0]["answered_by"] == won.answered_by


async def test_a_long_answer_reaches_the_agent_through_the_forwarder(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    # A typed answer of 400 KB comes back in the text, in the compact answers and in the full
    # result: one message of more than 1 MiB from the desk.
    long_text = "line of a pasted log\n" * 20_000
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            receipt = await session.call_tool("ask_user", ask("Log", background=True))
            request_id = receipt.structured_content["requestId"]
            await desk.board.wait_for(lambda forms: len(forms) == 1)
            answer = {"kind": "answer", "answers": {"q": {"customText": long_text}}}
            assert isinstance(await desk.board.answer(request_id, answer), Submitted)
            waited = await session.call_tool("wait_for_answers", {})
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["q"]["customText"] == long_text.strip()


async def test_a_call_without_arguments_is_a_call_with_none(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            asked = await session.call_tool("ask_user", None)
    assert asked.is_error
    assert "questions: must have required property 'questions'" in asked.content[0].text


async def test_a_second_different_answer_from_the_same_desk_is_refused_not_reported_sent(
    desk_url: str,  # noqa: F811
) -> None:
    """Submitting is idempotent for its submitter only as a retry (the same answer again, its
    first reply lost): a person who answers a form a second time with another answer (the
    page still showed it, or the same desk's terminal and page) is told it was not sent,
    never "ok" while the agent gets the first one."""
    from pi_agent_ask.store.db import Refused

    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            store, name = desk.store.store, desk.board.desk

            def result(value: str) -> dict[str, Any]:
                return {"cancelled": False, "answers": {"q": {"values": [value]}}}

            first = await desk.store.run(
                Store.submit, store, request_id, result("yes"), person="ann", desk=name
            )
            assert isinstance(first, Submitted)
            again = await desk.store.run(
                Store.submit, store, request_id, result("yes"), person="ann", desk=name
            )
            assert again == first  # a retry: the same outcome
            other = await desk.store.run(
                Store.submit, store, request_id, result("no"), person="ann", desk=name
            )
            assert isinstance(other, Refused) and other.reason == "answered"
            # The machine in plain words, not the desk's id (the refusal's ``desk`` keeps it).
            assert other.message.startswith(
                f"ann already answered this form on {machine(name)} at "
            )
            assert name not in other.message and other.desk == name
            assert other.message.endswith("your answer was not sent.")
            (row,) = await desk.store.run(Store.outcomes, store, [request_id])
            assert row["result"]["answers"]["q"]["values"] == ["yes"]


async def test_a_form_with_a_nul_character_is_refused_in_words_not_a_database_error(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """NUL (U+0000) is valid text for a form (a desk of files keeps it) but PostgreSQL cannot
    store it: the agent gets a tool error naming where it is and what to do, not the
    database's message about its JSON parameter; nothing is asked, and the next ask works."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk, agent([desk.url], token) as session:
            form = ask("Deploy", background=True)
            form["questions"][0]["prompt"] = "Deploy\x00 now?"
            refused = await session.call_tool("ask_user", form)
            assert refused.is_error
            text = refused.content[0].text
            assert "questions[0].prompt" in text and "NUL" in text
            assert "DETAIL" not in text and "portal" not in text
            assert await desk.store.run(Store.board, desk.store.store) == []
            fine = await session.call_tool("ask_user", ask("Deploy", background=True))
            assert fine.structured_content["status"] == "queued"


async def test_every_board_hears_at_once_that_a_cut_call_left_its_form_a_background_one(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """The agent's client cancels a foreground ask: its form stays, as a background one, and
    every desk's board shows it no longer blocking at once (it showed the agent blocked until
    some other change of the board made the desks read it again)."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(60):
        async with (
            team_desk(desk_url, "ann") as desk,
            team_desk(desk_url, "bob") as bob,
            agent([desk.url], token) as session,
        ):
            async with trio.open_nursery() as nursery:

                async def foreground() -> None:
                    await session.call_tool("ask_user", ask("Deploy"))

                nursery.start_soon(foreground)
                (form,) = await bob.board.wait_for(lambda forms: len(forms) == 1)
                assert not form.background
                nursery.cancel_scope.cancel()  # the SDK tells the server the call is cancelled
            with trio.fail_after(10):
                for board in (bob.board, desk.board):
                    # A board may not hold the form at the moment it is read (ann's reads the
                    # store after bob's): wait for the form itself, shown as a background one.
                    await board.wait_for(lambda forms: len(forms) == 1 and forms[0].background)
