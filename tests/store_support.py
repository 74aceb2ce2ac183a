"""The team store's tests' PostgreSQL: one throwaway cluster per test process (the
``pg_cluster`` fixture of ``conftest.py``; ``pi_agent_ask.store.testing.Cluster``: ``initdb``
and ``pg_ctl`` on a Unix socket in a temporary folder, run as the ``postgres`` system user or
``nobody`` when the tests run as root, since ``initdb`` refuses root). Tests that need it skip, saying why, only when the binaries are
missing. Beside it, what the team tests share: a team desk in the test's Trio run, an agent on
the official SDK's stdio client over ``pi-agent-ask mcp --desk``, a yes/no form.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_agent_ask.desk.testing import yes_no_form
from pi_agent_ask.store.board import TeamBoard
from pi_agent_ask.store.db import Store
from pi_agent_ask.store.run import TeamDesk, run_team_desk
from pi_agent_ask.store.testing import Cluster
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen

YES = {"kind": "answer", "answers": {"q": {"values": ["yes"]}}}
"""The response answering ``ask``'s question "yes"."""


def ask(label: str, *, background: bool = False) -> dict[str, Any]:
    """``ask_user`` arguments: one yes/no question ``q``, labelled ``label``."""
    return yes_no_form(label, background=background)


@asynccontextmanager
async def team_desk(url: str, person: str, **options: Any) -> AsyncIterator[TeamDesk]:
    """A team desk on the store at ``url``, answering as ``person``, for the block."""
    async with trio.open_nursery() as nursery:
        desk: TeamDesk = await nursery.start(
            functools.partial(run_team_desk, url, person=person, **options)
        )
        try:
            yield desk
        finally:
            desk.cancel()


@asynccontextmanager
async def reading_board(
    store: Store, url: str
) -> AsyncIterator[tuple[AsyncStore, TeamBoard, list[float]]]:
    """``store`` (on ``url``) opened for the block, with ann's board on it running and the
    times the board re-read the store (its ``on_change``), as a desk keeps them."""
    await trio.to_thread.run_sync(store.open)
    try:
        shared = AsyncStore.of(store)
        wakes = Wakes()
        reads: list[float] = []
        board = TeamBoard(shared, wakes, "ann", on_change=lambda: reads.append(trio.current_time()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen, url, wakes)
            await wakes.connected.wait()
            await nursery.start(board.run)
            yield shared, board, reads
            nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(store.close)


@asynccontextmanager
async def agent(urls: list[str], token: str) -> AsyncIterator[ClientSession]:
    """An agent: the SDK's stdio client over ``pi-agent-ask mcp --desk URL,...`` with its
    token."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", "--desk", ",".join(urls)],
        env={**os.environ, "PI_AGENT_ASK_TOKEN": token},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture
def store_db(pg_cluster: Cluster) -> str:
    """A fresh initialised database's name."""
    return pg_cluster.new_database()


@pytest.fixture
def desk_url(pg_cluster: Cluster, store_db: str) -> str:
    """A desk's connection string on a fresh store (a login role in ``pi_agent_ask_desk``)."""
    role = pg_cluster.login_role("team_desk", "pi_agent_ask_desk")
    return pg_cluster.url(store_db, role)


def new_sessions_read_only(conninfo: str, db: str, read_only: bool) -> None:
    """Database ``db`` read-only, or writable again, for its next sessions (as a standby is
    during a failover), and its sessions ended so that the desks take new ones (the
    listeners' are left: they only listen)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        setting = "SET default_transaction_read_only = on" if read_only else "RESET ALL"
        conn.execute(f'ALTER DATABASE "{db}" {setting}')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
            " AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%%'",
            (db,),
        )
