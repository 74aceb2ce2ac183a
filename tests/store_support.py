"""The team store's tests' PostgreSQL: one throwaway cluster per test session
(``pi_agent_ask.store.testing.Cluster``: ``initdb`` and ``pg_ctl`` on a Unix socket in a
temporary folder, run as the ``postgres`` system user or ``nobody`` when the tests run as root,
since ``initdb`` refuses root). Tests that need it skip, saying why, only when the binaries are
missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pi_agent_ask.store.testing import Cluster, find_pg_bin, throwaway_cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)")
    try:
        with throwaway_cluster(bin_dir) as cluster:
            yield cluster
    except LookupError as error:
        pytest.skip(str(error))


@pytest.fixture
def store_db(pg_cluster: Cluster) -> str:
    """A fresh initialised database's name."""
    return pg_cluster.new_database()


@pytest.fixture
def desk_url(pg_cluster: Cluster, store_db: str) -> str:
    """A desk's connection string on a fresh store (a login role in ``pi_agent_ask_desk``)."""
    role = pg_cluster.login_role("team_desk", "pi_agent_ask_desk")
    return pg_cluster.url(store_db, role)
