"""A desk's board over time, without a person: PostgreSQL away for longer than a store call
keeps retrying (``AsyncStore.retry_for``, 60 s in a desk; a fraction of a second here, with as
short a wait for a pooled connection): the board, which extends its claims' leases and
re-reads the board, carries on once the server is back instead of ending the desk, its claim
still its own; and a dead desk's lease that ran out is timed once, not re-read in a loop."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel

from pi_agent_ask.store.board import TeamBoard
from pi_agent_ask.store.db import Claim, Store, Submitted
from pi_agent_ask.store.testing import first_options
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen
from tests.store_support import (  # noqa: F401
    Cluster,
    ask,
    desk_url,
    reading_board,
    store_db,
    team_desk,
)


@pytest.mark.parametrize("claimed", [True, False])
async def test_a_board_carries_on_after_an_outage_longer_than_its_retries(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    claimed: bool,
) -> None:
    store = Store(desk_url, wait=0.3)
    await trio.to_thread.run_sync(store.open)
    try:
        limiter = trio.CapacityLimiter(store.max_connections)
        shared = AsyncStore(store, limiter, retry_for=0.3)
        patient = AsyncStore(store, limiter)  # the agents' side, as a desk's retries
        wakes = Wakes()
        board = TeamBoard(shared, wakes, "ann", lease=5.0, heartbeat=0.1)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen, desk_url, wakes)
                await wakes.connected.wait()
                await nursery.start(board.run)
                first, _bg, _state = await patient.run(
                    Store.ask, store, "alpha", "c1", ask("First"), background=True
                )
                await board.wait_for(lambda rows: len(rows) == 1)
                if claimed:
                    claim = await board.open(first)
                    assert isinstance(claim, Claim)
                pg_cluster.stop()
                try:
                    # Heartbeats (and a wake's re-read) fail for longer than their retries.
                    woken = wakes.board()
                    wakes.wake_board()
                    await woken.wait()
                    await trio.sleep(1.0)
                finally:
                    pg_cluster.start()
                second, _bg, _state = await patient.run(
                    Store.ask, store, "alpha", "c2", ask("Second"), background=True
                )
                rows = await board.wait_for(lambda rows: len(rows) == 2)
                assert [row.request_id for row in rows] == [first, second]
                if claimed:
                    assert board.claimed_here(first) is not None
                done = await board.answer(first, first_options(rows[0]))
                assert isinstance(done, Submitted) and done.answered_by == "ann"
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(store.close)


async def test_a_lease_that_ran_out_is_read_once_not_over_and_over(
    desk_url: str,  # noqa: F811
) -> None:
    """A desk that died leaves its claim in the row, its lease in the past, until another desk
    takes the form. The other desks re-read the board once when that lease runs out (a timer
    at that instant, since nothing notifies an expiry), and not again until something changes:
    an expired lease is not a timer that has always just fired."""
    store = Store(desk_url)
    with trio.fail_after(60):
        async with reading_board(store, desk_url) as (shared, board, reads):
            request_id, _bg, _state = await shared.run(
                Store.ask, store, "alpha", "c1", ask("First"), background=True
            )
            # Another desk claims it for half a second and dies (never releases it).
            claim = await shared.run(
                Store.claim, store, request_id, desk="gone:1:ab", person="bob", lease=0.5
            )
            assert isinstance(claim, Claim)
            await board.wait_for(lambda rows: bool(rows) and rows[0].claim_live)
            rows = await board.wait_for(lambda rows: bool(rows) and not rows[0].claim_live)
            assert rows[0].claimed_by == "bob"  # the dead desk's claim is still in the row
            settled = len(reads)
            await trio.sleep(1.0)
            assert len(reads) - settled <= 1


async def test_a_desk_reaches_the_store_at_once_when_the_server_is_back(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
) -> None:
    """PostgreSQL away for 8 s while the desk calls it: once the server is back, the desk's
    next call goes through within a few seconds (its listener's reconnection renews the pool).
    The pool left to itself tried again 1, 3, 7 and 15 s after its first failure: 7 s more
    of waiting here, about half the outage in general."""
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            await desk.store.run(Store.board, desk.store.store)
            pg_cluster.stop()
            back = False
            try:
                async with trio.open_nursery() as nursery:
                    # A call during the outage: the pool finds its connection broken.
                    nursery.start_soon(desk.store.run, Store.board, desk.store.store)
                    await trio.sleep(8)
                    pg_cluster.start()
                    back = True
                    with trio.move_on_after(4) as late:
                        await desk.store.run(Store.board, desk.store.store)
                        # A call in a worker thread is not interrupted: a deadline that
                        # passed meanwhile is seen at the next checkpoint.
                        await trio.lowlevel.checkpoint()  # the deadline's check, nothing else
                    assert not late.cancelled_caught
            finally:
                if not back:
                    pg_cluster.start()
