"""A team desk that stops (Ctrl-Q, a signal) while a claim of its terminal is on its way to the
store: the claim comes back after the board stopped. It is given back at once (the desk ended
with "Nursery is closed to new arrivals", and the form stayed taken until its lease ran out).
The claim is held back by a table lock until the board has stopped, so the order is certain."""

from __future__ import annotations

import psycopg
import trio

from pi_agent_ask.store.board import STOPPED, TeamBoard
from pi_agent_ask.store.db import Claim, Refused, Store
from pi_agent_ask.store.wakes import AsyncStore, Wakes
from tests.store_support import (  # noqa: F401
    Cluster,
    ask,
    desk_url,
    store_db,
)


async def test_a_claim_that_comes_back_after_the_board_stopped_is_given_back(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    store = Store(desk_url)
    with trio.fail_after(30):
        await trio.to_thread.run_sync(store.open)
        try:
            shared = AsyncStore.of(store)
            request_id, _bg, _state = await shared.run(
                Store.ask, store, "alpha", "c1", ask("Deploy"), background=True
            )
            board = TeamBoard(shared, Wakes(), "ann")
            lock = await trio.to_thread.run_sync(psycopg.connect, pg_cluster.url(store_db))
            try:
                # A claim (an UPDATE) waits for this lock; the board's reads do not.
                lock.execute("LOCK TABLE pi_agent_ask.requests IN EXCLUSIVE MODE")
                opened: list[Claim | Refused] = []

                async def claim() -> None:
                    opened.append(await board.open(request_id))

                async with trio.open_nursery() as nursery:
                    async with trio.open_nursery() as running:
                        await running.start(board.run)
                        nursery.start_soon(claim)
                        running.cancel_scope.cancel()
                    # The board has stopped; now the claim goes through.
                    await trio.to_thread.run_sync(lock.rollback)
            finally:
                await trio.to_thread.run_sync(lock.close)
            assert opened == [STOPPED]
            # Given back: another desk takes the form at once, not when ann's lease runs out.
            other = await shared.run(
                Store.claim, store, request_id, desk="bob:1:ab", person="bob", lease=30
            )
            assert isinstance(other, Claim), other
        finally:
            await trio.to_thread.run_sync(store.close)
