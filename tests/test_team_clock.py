"""A desk whose clock is not the database's: leases are the database's time, so a desk times
them by the time left that the database reports, never by comparing its own clock with the
database's lease time. Its clock is given to the store here (``Store.clock``) instead of
changing the machine's time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import trio

from pi_agent_ask.store.db import Claim, Refused, Store
from tests.store_support import (  # noqa: F401
    ask,
    desk_url,
    reading_board,
    store_db,
)

LEASE = 1.0
"""Seconds of the other desk's claim (it dies holding it)."""


def _skewed(seconds: float) -> Callable[[], datetime]:
    """A wall clock ``seconds`` ahead of this machine's (behind when negative)."""
    return lambda: datetime.now(UTC) + timedelta(seconds=seconds)


@pytest.mark.parametrize("skew", [20.0, -20.0], ids=["ahead", "behind"])
async def test_a_desk_with_a_skewed_clock_sees_a_lease_run_out_once_and_on_time(
    desk_url: str,  # noqa: F811
    skew: float,
) -> None:
    """Ahead of the database, the desk read the lease as over already and re-read the board
    every 50 ms until the database agreed; behind it, the desk waited the skew on top of the
    lease before it showed the form free. Either way it now re-reads once, when the lease
    runs out by the database's clock."""
    store = Store(desk_url, clock=_skewed(skew))
    with trio.fail_after(60):
        async with reading_board(store, desk_url) as (shared, board, reads):
            request_id, _bg, _state = await shared.run(
                Store.ask, store, "alpha", "c1", ask("First"), background=True
            )
            claim = await shared.run(
                Store.claim, store, request_id, desk="gone:1:ab", person="bob", lease=LEASE
            )
            assert isinstance(claim, Claim)
            claimed_at = trio.current_time()
            await board.wait_for(lambda rows: bool(rows) and rows[0].claim_live)
            held = len(reads)
            # Free when the lease runs out, not the skew later (generous for a busy machine).
            with trio.fail_after(LEASE + 4):
                await board.wait_for(lambda rows: bool(rows) and not rows[0].claim_live)
            assert trio.current_time() - claimed_at >= LEASE - 0.5  # the claim took a while
            assert len(reads) - held <= 2, f"{len(reads) - held} reads while the lease ran"


@pytest.mark.parametrize("skew", [3600.0, -3600.0], ids=["ahead", "behind"])
def test_a_lease_s_end_in_a_sentence_is_the_desk_s_clock(
    desk_url: str,  # noqa: F811
    skew: float,
) -> None:
    """ "until 10:42:37" in a refusal is when the lease runs out on the reading desk's clock
    (its now plus the time the database says is left), not the database's lease time."""
    clock = _skewed(skew)
    store = Store(desk_url, clock=clock)
    store.open()
    try:
        rid, _bg, _state = store.ask("a", "skew-1", ask("S"), background=True)
        assert isinstance(store.claim(rid, desk="d1", person="bob", lease=30), Claim)
        held = store.claim(rid, desk="d2", person="ann", lease=30)
        assert isinstance(held, Refused) and held.until is not None
        assert abs((held.until - (clock() + timedelta(seconds=30))).total_seconds()) < 5
        assert f"(until {held.until.astimezone():%H:%M:%S} unless" in held.message
    finally:
        store.close()
