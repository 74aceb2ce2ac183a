"""``store init`` on two databases of one cluster at once: the roles are the cluster's (one set
for every database), the advisory lock that serialises migrations is each database's own, so
two inits race to create the same roles. Both must succeed, whichever creates them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from pi_agent_ask.store.db import Store
from pi_agent_ask.store.schema import AGENT_ROLE, DESK_ROLE, TOKENS_ROLE
from pi_agent_ask.store.testing import Cluster
from tests.pg import cluster_or_skip

ROUNDS = 4


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[Cluster]:
    """A cluster of this module's own: its roles are dropped between rounds, which the
    session's shared cluster (every other store test's databases) cannot allow."""
    yield from cluster_or_skip()


def _roles(conn: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    rows = conn.execute(
        "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)",
        ([DESK_ROLE, AGENT_ROLE, TOKENS_ROLE],),
    ).fetchall()
    return {str(row[0]) for row in rows}


def _inits_at_once(cluster: Cluster, names: list[str]) -> tuple[list[list[int]], list[Exception]]:
    """``Store.init`` on each database of ``names``, all released at one instant: what each
    applied, and the errors raised."""
    start = threading.Barrier(len(names))
    errors: list[Exception] = []
    applied: list[list[int]] = []

    def init(name: str) -> None:
        start.wait()
        try:
            applied.append(Store.init(cluster.url(name)))
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=init, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return applied, errors


def test_two_inits_on_two_databases_of_one_cluster_at_once_both_succeed(
    fresh_cluster: Cluster,
) -> None:
    for round_ in range(ROUNDS):
        names = [f"init_{round_}_a", f"init_{round_}_b"]
        with psycopg.connect(fresh_cluster.url(), autocommit=True) as conn:
            for name in names:
                conn.execute(f"CREATE DATABASE {name}")
            assert _roles(conn) == set()  # each round starts with no roles: both create them
        applied, errors = _inits_at_once(fresh_cluster, names)
        assert errors == [], f"round {round_}: {errors!r}"
        assert applied == [[1, 2], [1, 2]]
        with psycopg.connect(fresh_cluster.url(), autocommit=True) as conn:
            assert _roles(conn) == {DESK_ROLE, AGENT_ROLE, TOKENS_ROLE}
            member = conn.execute(
                "SELECT pg_has_role(%s, %s, 'MEMBER')", (DESK_ROLE, AGENT_ROLE)
            ).fetchone()
            assert member == (True,)
            for name in names:
                assert Store.init(fresh_cluster.url(name)) == []  # and again: nothing to do
                conn.execute(f"DROP DATABASE {name}")
            for role in (DESK_ROLE, AGENT_ROLE, TOKENS_ROLE):
                conn.execute(f"DROP ROLE {role}")
