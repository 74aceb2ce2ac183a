"""A throwaway PostgreSQL cluster for a fixture, or the test skipped saying why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def cluster_or_skip() -> Iterator[Any]:
    """Yield a started ``pi_agent_ask.store.testing.Cluster``, removed afterwards; skip the
    test when PostgreSQL's programs are missing or no user may run them. Imports the store
    only when called: most tests need no PostgreSQL."""
    from pi_agent_ask.store.testing import find_pg_bin, throwaway_cluster

    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)")
    try:
        with throwaway_cluster(bin_dir) as cluster:
            yield cluster
    except LookupError as error:
        pytest.skip(str(error))
