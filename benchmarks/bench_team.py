"""The team desk under load: 20 agents × 100 forms across two desks on one PostgreSQL.

A throwaway cluster (``initdb``/``pg_ctl`` on a Unix socket), two ``pi-agent-ask desk --store
URL --headless`` processes, 20 agents as official SDK clients over Streamable HTTP with their
own tokens (half on each desk), each asking 100 foreground forms one after the other, and two
people answering (each a board on the store, claiming then submitting). Prints:

- forms/s: 2000 forms from the first ask to the last result;
- answer -> agent: the time from a submission's commit to the agent holding its result,
  p50 and p99 (target: p99 at most 100 ms on loopback), measured twice: with the two people
  answering at machine speed (every core busy: the figure is mostly queueing), and as a person
  answers (``paced``: one answer at a time, each given once all 20 agents wait on a form, the
  next once the answer before reached its agent; half the answers cross to the other desk);
- rows and bytes per form: the store's rows (requests, outcomes) and their tables' and
  indexes' size, divided by the forms;
- the board's read (``board``, first; ``python -m benchmarks.bench_team board`` alone): 500
  pending forms of 20 agents, 10 of them in ``wait_for_answers``, the server's execution time
  of the board's statements (``EXPLAIN ANALYZE``) and one ``Store.board`` call, medians of 40.

Assert nothing: machines here are shared and noisy.
"""

from __future__ import annotations

import functools
import signal
import statistics
import sys
import time
from typing import Any

import httpx2
import psycopg
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pi_agent_ask.desk.testing import yes_no_form
from pi_agent_ask.store.db import BOARD_SQL, WAITS_SQL, Store
from pi_agent_ask.store.schema import DESK_ROLE
from pi_agent_ask.store.testing import (
    answering,
    desk_process,
    find_pg_bin,
    throwaway_cluster,
)

AGENTS = 20
FORMS = 100


PACED_FORMS = 10
"""Answers per agent in the paced figure (200 in all)."""


async def agent(
    url: str,
    token: str,
    forms: int,
    received: dict[str, float],
    arrived: dict[str, trio.Event] | None = None,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=None)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for n in range(forms):
            result = await session.call_tool("ask_user", yes_no_form(f"f{n}", background=False))
            request_id = result.structured_content["requestId"]
            received[request_id] = time.time()
            if arrived is not None:
                arrived.setdefault(request_id, trio.Event()).set()


async def paced(desk_url: str, desks: list[Any], tokens: list[str], agents: int) -> list[float]:
    """One person answering as people do: each answer once every agent waits on a form, the
    next once the answer before reached its agent. Returns the latencies in ms."""
    submitted: dict[str, float] = {}
    received: dict[str, float] = {}
    arrived: dict[str, trio.Event] = {}
    last: list[str] = []
    enough = trio.Event()

    def answered(request_id: str) -> None:
        submitted[request_id] = time.time()
        last.append(request_id)
        if len(submitted) == agents * PACED_FORMS:
            enough.set()

    async def pace(board: Any) -> None:
        if last:
            await arrived.setdefault(last[-1], trio.Event()).wait()
        await board.wait_for(lambda forms: len(forms) >= agents)

    async with (
        answering(desk_url, "cy", on_answer=answered, pace=pace),
        trio.open_nursery() as asking,
    ):
        for i in range(agents):
            url = desks[i % 2][1]
            # Agents ask until the person is done; the forms left are never answered.
            asking.start_soon(agent, url, tokens[i], 10**6, received, arrived)
        await enough.wait()
        await arrived.setdefault(last[-1], trio.Event()).wait()
        asking.cancel_scope.cancel()
    return [1000 * (received[r] - submitted[r]) for r in submitted if r in received]


async def person(url: str, name: str, submitted: dict[str, float], stop: trio.Event) -> None:
    def answered(request_id: str) -> None:
        submitted[request_id] = time.time()

    async with answering(url, name, on_answer=answered):
        await stop.wait()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(agents: int = AGENTS, forms: int = FORMS) -> None:
    bin_dir = find_pg_bin()
    if bin_dir is None:
        print("skipped: PostgreSQL's initdb and pg_ctl are not installed")
        return
    with throwaway_cluster(bin_dir) as cluster:
        db = await trio.to_thread.run_sync(cluster.new_database)
        admin = cluster.url(db)
        desk_url = cluster.url(db, cluster.login_role("team_desk", "pi_agent_ask_desk"))
        tokens = [Store.new_token(admin, f"agent-{i}") for i in range(agents)]
        desks = [await desk_process(desk_url, f"desk-{n}") for n in (1, 2)]
        submitted: dict[str, float] = {}
        received: dict[str, float] = {}
        try:
            stop = trio.Event()
            async with trio.open_nursery() as people:
                people.start_soon(person, desk_url, "ann", submitted, stop)
                people.start_soon(person, desk_url, "bob", submitted, stop)
                start = time.perf_counter()
                async with trio.open_nursery() as nursery:
                    for i in range(agents):
                        url = desks[i % 2][1]
                        nursery.start_soon(agent, url, tokens[i], forms, received)
                elapsed = time.perf_counter() - start
                stop.set()
            paced_latencies = await paced(desk_url, desks, tokens, agents)
        finally:
            for process, _url in desks:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await process.wait()
        total = agents * forms
        latencies = [1000 * (received[r] - submitted[r]) for r in received if r in submitted]
        with psycopg.connect(admin) as conn:
            rows = conn.execute(
                "SELECT (SELECT count(*) FROM pi_agent_ask.requests)"
                " + (SELECT count(*) FROM pi_agent_ask.outcomes)"
            ).fetchone()
            size = conn.execute(
                "SELECT pg_total_relation_size('pi_agent_ask.requests')"
                " + pg_total_relation_size('pi_agent_ask.outcomes')"
            ).fetchone()
        assert rows is not None and size is not None
        print(
            f"{agents} agents x {forms} forms, two desks, two people: {total / elapsed:.0f} forms/s"
        )
        print(
            f"answer -> agent's result: p50 {statistics.median(latencies):.1f} ms, "
            f"p99 {percentile(latencies, 0.99):.1f} ms ({len(latencies)} forms)"
        )
        print(
            f"answer -> agent's result, paced (one person, each answer while all {agents} agents"
            f" wait): p50 {statistics.median(paced_latencies):.1f} ms, "
            f"p99 {percentile(paced_latencies, 0.99):.1f} ms ({len(paced_latencies)} forms)"
        )
        print(f"store: {rows[0] / total:.1f} rows and {size[0] / total:.0f} bytes per form")


BOARD_FORMS = 500
BOARD_READS = 40


def board(forms: int = BOARD_FORMS, agents: int = AGENTS) -> None:
    """The board's read on ``forms`` pending forms, half the agents waiting."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        print("skipped: PostgreSQL's initdb and pg_ctl are not installed")
        return
    with throwaway_cluster(bin_dir) as cluster:
        url = cluster.url(cluster.new_database())
        store = Store(url)
        store.open()
        try:
            for n in range(forms):
                key = f"agent-{n % agents}"
                store.ask(key, f"call-{n}", yes_no_form(f"q{n}", background=True), background=True)
            for n in range(0, agents, 2):
                store.mark_wait(f"agent-{n}", "wait", lease=600)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")
                server = []
                for _ in range(BOARD_READS):
                    with conn.transaction():
                        conn.execute(f"SET LOCAL ROLE {DESK_ROLE}")
                        total = 0.0
                        for statement in (BOARD_SQL, WAITS_SQL):
                            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement)
                            plan = row.fetchone()
                            assert plan is not None
                            total += plan[0][0]["Execution Time"]
                        server.append(total)
            calls = []
            for _ in range(BOARD_READS):
                start = time.perf_counter()
                store.board()
                calls.append(1000 * (time.perf_counter() - start))
        finally:
            store.close()
    print(
        f"board of {forms} forms ({agents // 2} agents waiting): server "
        f"{statistics.median(server):.2f} ms, Store.board {statistics.median(calls):.1f} ms"
    )


def main() -> None:
    board()
    if sys.argv[1:] != ["board"]:
        trio.run(functools.partial(run))


if __name__ == "__main__":
    main()
