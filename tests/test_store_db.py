"""The team store's SQL rules on a real PostgreSQL: claims, first submission wins, delivery
once per call, tokens, and row-level security."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from pi_agent_ask.store.db import BOARD_SQL, WAITS_SQL, Claim, Refused, Store, Submitted
from tests.store_support import Cluster, desk_url, store_db  # noqa: F401

PARAMS = {"title": "T", "questions": []}


@pytest.fixture
def store(desk_url: str):  # noqa: F811
    store = Store(desk_url)
    store.open()
    yield store
    store.close()


def test_init_is_idempotent(pg_cluster: Cluster, store_db: str) -> None:  # noqa: F811
    assert Store.init(pg_cluster.url(store_db)) == []


def test_ask_is_keyed_by_call(store: Store) -> None:
    first = store.ask("a", "call-1", PARAMS, background=True)
    again = store.ask("a", "call-1", PARAMS, background=True)
    other = store.ask("a", "call-2", PARAMS, background=True)
    assert first == again
    assert other[0] != first[0]
    assert [row.request_id for row in store.board()] == [first[0], other[0]]


def test_claim_submit_take_once(store: Store) -> None:
    rid, _bg, _state = store.ask("a", "c1", PARAMS, background=True)
    claim = store.claim(rid, desk="d1", person="ann", lease=30)
    assert isinstance(claim, Claim)
    other = store.claim(rid, desk="d2", person="bob", lease=30)
    assert isinstance(other, Refused) and other.reason == "claimed"
    assert "ann is answering this form on d1 (until" in other.message
    refused = store.submit(rid, {"cancelled": False}, person="bob", desk="d2")
    assert isinstance(refused, Refused) and refused.reason == "claimed"
    done = store.submit(rid, {"cancelled": False}, person="ann", desk="d1", claim_token=claim.token)
    assert isinstance(done, Submitted)
    late = store.submit(rid, {"cancelled": True}, person="bob", desk="d2")
    assert isinstance(late, Refused) and late.reason == "answered"
    assert "ann already answered" in late.message
    taken = store.take("a", "call-x")
    assert [d.request_id for d in taken] == [rid]
    assert [d.request_id for d in store.take("a", "call-x")] == [rid]  # the same call again
    assert store.take("a", "call-y") == []  # never to another call
    assert store.board() == []


def test_two_people_submit_at_once_one_outcome(store: Store) -> None:
    rid, _bg, _state = store.ask("a", "c1", PARAMS, background=True)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def person(i: int) -> None:
        barrier.wait()
        results.append(store.submit(rid, {"n": i}, person=f"p{i}", desk=f"d{i}"))

    threads = [threading.Thread(target=person, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, Submitted) for r in results) == 1
    assert all(r.reason == "answered" for r in results if isinstance(r, Refused))
    assert len(store.outcomes([rid])) == 1


def test_lease_expiry_returns_form_with_draft(store: Store, desk_url: str) -> None:  # noqa: F811
    rid, _bg, _state = store.ask("a", "c1", PARAMS, background=True)
    claim = store.claim(rid, desk="d1", person="ann", lease=30)
    assert isinstance(claim, Claim)
    assert store.save_draft(claim.token, {"drafts": ["x"]}, person="ann")
    # d1 dies: no heartbeat. Until the lease runs out, the form is ann's.
    assert isinstance(store.claim(rid, desk="d2", person="bob", lease=30), Refused)
    # The lease runs out (its end moved to the past, not waited for: a loaded machine took
    # longer than a short lease between the two claims above).
    with psycopg.connect(desk_url, autocommit=True) as conn:
        conn.execute("SET ROLE pi_agent_ask_desk")
        conn.execute(
            "UPDATE pi_agent_ask.requests SET lease_until = now() - interval '1 s'"
            " WHERE request_id = %s",
            (rid,),
        )
    again = store.claim(rid, desk="d2", person="bob", lease=30)
    assert isinstance(again, Claim)
    assert again.row.draft == {"drafts": ["x"]}
    assert store.heartbeat(claim.token, lease=30) is None  # the dead desk's claim is gone
    lost = store.submit(rid, {}, person="ann", desk="d1", claim_token=claim.token)
    assert isinstance(lost, Refused) and lost.reason == "lease_lost"
    # Who holds it now, as for any held form (a short status line names them).
    assert (lost.holder, lost.desk) == ("bob", "d2") and lost.until is not None


def test_token_refused_after_revocation(pg_cluster: Cluster, store_db: str, store: Store) -> None:  # noqa: F811
    admin = pg_cluster.url(store_db)
    token = Store.new_token(admin, "agent-a")
    assert store.agent_for_token(token) == "agent-a"
    assert store.agent_for_token(token + "x") is None
    assert Store.revoke(admin, "agent-a") == 1
    assert store.agent_for_token(token) is None


def test_rows_unreadable_under_another_key(store: Store, desk_url: str) -> None:  # noqa: F811
    rid, _bg, _state = store.ask("a", "c1", PARAMS, background=True)
    assert isinstance(store.submit(rid, {"x": 1}, person="p", desk="d"), Submitted)
    assert store.take("b", "call") == []
    assert store.request_state("b", rid) is None
    with psycopg.connect(desk_url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL ROLE pi_agent_ask_agent")
        conn.execute("SELECT set_config('pi_agent_ask.agent', 'b', true)")
        assert conn.execute("SELECT count(*) FROM pi_agent_ask.requests").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pi_agent_ask.outcomes").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM pi_agent_ask.tokens")


def test_store_commands(pg_cluster: Cluster, store_db: str, store: Store) -> None:  # noqa: F811
    import io

    from pi_agent_ask.cli import main

    admin = pg_cluster.url(store_db)
    out = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(out):
        assert main(["store", "init", admin]) == 0
        assert main(["store", "token", admin, "--agent", "ci-7"]) == 0
    lines = out.getvalue().splitlines()
    assert (
        lines[0] == "pi-agent-ask store: schema ready; migrations applied: none (already current)"
    )
    assert store.agent_for_token(lines[1]) == "ci-7"
    with redirect_stdout(io.StringIO()) as revoked:
        assert main(["store", "revoke", admin, "--agent", "ci-7"]) == 0
    assert "1 token(s) of 'ci-7' revoked" in revoked.getvalue()
    assert store.agent_for_token(lines[1]) is None
    assert main(["store", "init", "host=/nonexistent dbname=x"]) == 1


def test_a_retried_claim_or_submission_finds_its_own(store: Store) -> None:
    rid, _bg, _state = store.ask("a", "c1", PARAMS, background=True)
    token = "9f1c3a4e-0000-4000-8000-000000000001"
    first = store.claim(rid, desk="d1", person="ann", lease=30, token=token)
    again = store.claim(rid, desk="d1", person="ann", lease=30, token=token)
    assert isinstance(first, Claim) and isinstance(again, Claim)
    assert again.token == token
    assert isinstance(store.claim(rid, desk="d2", person="bob", lease=30), Refused)
    done = store.submit(rid, {"x": 1}, person="ann", desk="d1", claim_token=token)
    retried = store.submit(rid, {"x": 1}, person="ann", desk="d1", claim_token=token)
    assert isinstance(done, Submitted) and retried == done
    other = store.submit(rid, {"x": 2}, person="ann", desk="d2")
    assert isinstance(other, Refused) and other.reason == "answered"


def test_times_in_refusals_are_the_desks_own_clock_not_the_servers_zone(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
) -> None:
    """The sentences a person reads ("until 10:42:37", "at 10:42:07") give the time as the
    desk's clock shows it, whatever time zone the database session runs in (here Tokyo's)."""
    role = pg_cluster.login_role("team_desk_tokyo", "pi_agent_ask_desk")
    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:
        conn.execute(f"ALTER ROLE {role} SET timezone = 'Asia/Tokyo'")
    store = Store(pg_cluster.url(store_db, role))
    store.open()
    try:
        rid, _bg, _state = store.ask("a", "tz-1", PARAMS, background=True)
        claim = store.claim(rid, desk="d1", person="bob", lease=30)
        assert isinstance(claim, Claim)
        held = store.claim(rid, desk="d2", person="ann", lease=30)
        assert isinstance(held, Refused) and held.until is not None
        assert f"(until {held.until.astimezone():%H:%M:%S} unless" in held.message
        done = store.submit(rid, {"x": 1}, person="bob", desk="d1", claim_token=claim.token)
        assert isinstance(done, Submitted)
        late = store.submit(rid, {"x": 2}, person="ann", desk="d2")
        assert isinstance(late, Refused)
        assert f" at {done.answered_at.astimezone():%H:%M:%S};" in late.message
    finally:
        store.close()


@pytest.mark.parametrize("before", ["free", "lease ran out"])
def test_a_form_another_desk_is_claiming_this_instant_is_refused_in_words(
    store: Store,
    desk_url: str,  # noqa: F811
    before: str,
) -> None:
    """Two desks opening one form at the same instant: the claim that finds the row locked
    (``SKIP LOCKED``: the other desk's claim is in flight, not committed) is refused with a
    sentence, not an error from formatting a lease that is not there yet (or is over)."""
    rid, _bg, _state = store.ask("a", f"race-{before}", PARAMS, background=True)
    if before == "lease ran out":
        old = store.claim(rid, desk="d0", person="carol", lease=0.01)
        assert isinstance(old, Claim)
        with psycopg.connect(desk_url, autocommit=True) as conn:
            conn.execute("SELECT pg_sleep(0.05)")
    with psycopg.connect(desk_url) as other:
        other.execute("SET ROLE pi_agent_ask_desk")
        other.execute(
            "SELECT 1 FROM pi_agent_ask.requests WHERE request_id = %s FOR UPDATE", (rid,)
        )
        refused = store.claim(rid, desk="d2", person="ann", lease=30)
        other.rollback()
    assert isinstance(refused, Refused) and refused.reason == "claimed"
    assert refused.message == "Another desk is opening this form at this moment."
    claim = store.claim(rid, desk="d2", person="ann", lease=30)
    assert isinstance(claim, Claim)


def test_an_agent_s_wait_marks_its_forms_until_it_ends_or_its_lease_runs_out(
    store: Store,
    desk_url: str,  # noqa: F811
) -> None:
    """``wait_for_answers`` in progress is a lease in the store (a desk that dies mid-wait
    stops extending it): the board shows the agent's forms as waited on while it lives, and
    only the agent's own key can end it."""
    store.ask("a", "c1", PARAMS, background=True)
    store.ask("b", "c1", PARAMS, background=True)
    store.mark_wait("a", "wait-1", lease=30)
    waits = {row.agent_key: row.agent_waits for row in store.board()}
    assert waits == {"a": True, "b": False}
    store.unmark_wait("b", "wait-1")  # another agent's key: row-level security admits nothing
    assert [row.agent_waits for row in store.board() if row.agent_key == "a"] == [True]
    store.unmark_wait("a", "wait-1")
    assert not any(row.agent_waits for row in store.board())
    store.mark_wait("a", "wait-2", lease=30)
    (left,) = [row.wait_left for row in store.board() if row.agent_key == "a"]
    assert left is not None and 0 < left <= 30
    # The lease runs out (its end moved to the past, not waited for: a loaded machine may
    # take longer than a short lease to read the board).
    with psycopg.connect(desk_url, autocommit=True) as conn:
        conn.execute("SET ROLE pi_agent_ask_desk")
        conn.execute("UPDATE pi_agent_ask.waits SET until = now() - interval '1 s'")
    assert not any(row.agent_waits for row in store.board())


def _loops(plan: dict[str, Any]) -> list[int]:
    """How often each node of an ``EXPLAIN (ANALYZE, FORMAT JSON)`` plan ran."""
    return [plan["Actual Loops"]] + [n for child in plan.get("Plans", ()) for n in _loops(child)]


def test_the_board_reads_the_waits_once_not_once_per_form(store: Store) -> None:
    """The board's statements run each plan node once, however many forms wait: the agents'
    waits are one small read beside the forms (a subquery per form made a 500-form board
    six times dearer), and the board still says which agents wait."""
    for n in range(12):
        store.ask(f"agent-{n % 3}", f"c{n}", PARAMS, background=True)
    store.mark_wait("agent-1", "wait-1", lease=30)
    with psycopg.connect(store.conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL ROLE pi_agent_ask_desk")
        for statement in (BOARD_SQL, WAITS_SQL):
            (explained,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement).fetchone()
            assert max(_loops(explained[0]["Plan"])) == 1, (statement, explained)
    rows = store.board()
    assert len(rows) == 12
    assert {row.agent_key for row in rows if row.agent_waits} == {"agent-1"}
    assert all(0 < (row.wait_left or 0) <= 30 for row in rows if row.agent_key == "agent-1")
