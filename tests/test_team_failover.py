"""Two team desks (processes), 10 agents (the official MCP SDK's clients through
``pi-agent-ask mcp --desk URL,URL``), two people answering: a desk SIGKILLed in the middle,
PostgreSQL restarted in the middle. Nothing is lost and nothing is delivered twice."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.mcp_common.connection import DESK_FILE_ENV
from pi_agent_ask.store.db import Store, Submitted
from pi_agent_ask.store.run import TeamDesk, run_team_desk
from pi_agent_ask.store.testing import answering, desk_process
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    agent,
    ask,
    desk_url,
    store_db,
    team_desk,
)

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

# Ten agents of six rounds, not twenty of three: the same 120 asks, in half the processes (ten
# calls in flight at a time, five of them on the desk that is killed). Each ``pi-agent-ask mcp``
# costs 1.2 to 2 s of CPU before its first call (the MCP SDK's import): twenty of them were most
# of the test's time. A call key made anew on each try, or no retry on the next desk, still fails
# it.
AGENTS = 10
ROUNDS = 6  # each round: one foreground ask, one background ask and a wait


def received(result: Any) -> list[str]:
    """Every request id whose answer this tool result carries."""
    structured = result.structured_content or {}
    ids = [entry["details"]["requestId"] for entry in structured.get("backgroundAnswers", [])]
    ids += [entry["requestId"] for entry in structured.get("results", [])]
    return ids


async def run_agent(
    name: str, urls: list[str], token: str, asked: list[str], got: list[str], progress: Any
) -> None:
    async with agent(urls, token) as session:
        for round_ in range(ROUNDS):
            front = await session.call_tool("ask_user", ask(f"{name}-{round_}-f", background=False))
            assert not front.is_error, front
            assert front.structured_content["answers"]["q"]["values"] == ["yes"]
            asked.append(front.structured_content["requestId"])
            got.append(front.structured_content["requestId"])
            got.extend(received(front))
            progress()
            back = await session.call_tool("ask_user", ask(f"{name}-{round_}-b", background=True))
            asked.append(back.structured_content["requestId"])
            got.extend(received(back))
            waited = await session.call_tool("wait_for_answers", {})
            got.extend(received(waited))
            progress()


async def run_team(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    admin = pg_cluster.url(store_db)
    tokens = [Store.new_token(admin, f"agent-{i}") for i in range(AGENTS)]
    asked: list[str] = []
    got: list[str] = []
    answered: list[str] = []
    done = 0
    total = AGENTS * ROUNDS * 2
    third, two_thirds = trio.Event(), trio.Event()

    def progress() -> None:
        nonlocal done
        done += 1
        if done >= total // 3:
            third.set()
        if done >= 2 * total // 3:
            two_thirds.set()

    with trio.fail_after(240):
        # Their sign-in files in the test's folder: by default one replaced, then removed, the
        # one of a desk the person at this machine runs (``desk login-url``: no desk running).
        files = [{**os.environ, DESK_FILE_ENV: str(tmp_path / f"{n}.json")} for n in (1, 2)]
        first, url1 = await desk_process(desk_url, "desk-one", env=files[0])
        second, url2 = await desk_process(desk_url, "desk-two", env=files[1])
        try:
            async with (
                answering(desk_url, "ann", on_answer=answered.append),
                answering(desk_url, "bob", on_answer=answered.append),
                trio.open_nursery() as nursery,
            ):
                for i in range(AGENTS):
                    urls = [url1, url2] if i % 2 == 0 else [url2, url1]
                    nursery.start_soon(run_agent, f"a{i}", urls, tokens[i], asked, got, progress)
                await third.wait()
                first.send_signal(signal.SIGKILL)  # agents on desk one go on to desk two
                await two_thirds.wait()
                await trio.to_thread.run_sync(pg_cluster.restart)
        finally:
            for process in (first, second):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await process.wait()

    assert first.returncode == -signal.SIGKILL
    assert done == total and len(asked) == total
    counts = Counter(got)
    assert sorted(counts) == sorted(asked), "an outcome was lost (or one never asked arrived)"
    assert [rid for rid, n in counts.items() if n > 1] == [], "an outcome was delivered twice"
    assert Counter(answered) == Counter(set(asked)), "a form was answered twice"
    store = Store(desk_url)
    store.open()
    try:
        rows = store.outcomes()
    finally:
        store.close()
    assert len(rows) == len(asked)
    assert all(row["delivered_call"] is not None for row in rows)
    assert {row["answered_by"] for row in rows} <= {"ann", "bob"}


async def test_a_desk_killed_and_postgresql_restarted_in_the_middle_lose_nothing(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Each of the 5 agents that started on desk one has calls left when it is killed (a
    third of the way), so finishing at all means they went on on desk two; a third of the way
    later, PostgreSQL restarts under both the desk and the people answering."""
    await run_team(pg_cluster, store_db, desk_url, tmp_path)


async def test_a_foreground_ask_moved_off_a_desk_that_stopped_still_blocks_its_agent(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """Ann's desk stops (Ctrl-Q, an upgrade) under an agent's foreground ask: it makes the
    request a background one, as for a call its client cut, and the agent's forwarder sends
    the call to bob's desk, where it waits on. Every desk shows the form as blocking its
    agent again (it stayed a background form, offered for Later, its answer free for any
    other call of the agent), and bob's answer is the call's result."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery, team_desk(desk_url, "bob") as bob:
            ann_stopped = trio.Event()

            async def ann_desk(task_status: trio.TaskStatus[TeamDesk]) -> None:
                try:
                    await run_team_desk(desk_url, person="ann", task_status=task_status)
                finally:
                    ann_stopped.set()

            ann: TeamDesk = await nursery.start(ann_desk)
            async with agent([ann.url, bob.url], token) as alpha:
                results: list[Any] = []
                returned = trio.Event()

                async def call() -> None:
                    results.append(await alpha.call_tool("ask_user", ask("Deploy")))
                    returned.set()

                nursery.start_soon(call)
                (row,) = await bob.board.wait_for(lambda rows: len(rows) == 1)
                assert not row.background
                ann.cancel()
                await ann_stopped.wait()
                await bob.board.refresh()  # what the store says now, ann's change included
                (row,) = await bob.board.wait_for(
                    lambda rows: len(rows) == 1 and not rows[0].background
                )
                done = await bob.board.answer(row.request_id, YES)
                assert isinstance(done, Submitted), done
                await returned.wait()
            (result,) = results
            assert not result.is_error, result
            assert result.structured_content["answers"]["q"]["values"] == ["yes"]
