"""A throwaway PostgreSQL cluster for a fixture, or the test skipped saying why."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MEMORY = Path("/dev/shm")
"""A file system in memory (tmpfs), where a test process's cluster goes when there is room.
On disk, every database a test creates is some 330 files (7.5 MB) written, and removing a
worker's 60 of them at its end took 8-13 s, up to 70 s on a busy disk: one unlink after
another, the last test's teardown. In memory, creating and removing them costs a fraction.
Nothing is lost by it: the server runs with ``fsync=off`` already (no test is about what
reaches the disk), and a restart (``pg_ctl restart``) keeps the files as the disk does."""

MEMORY_ROOM = 2 * 1024**3
"""Free bytes ``MEMORY`` needs for a cluster to go there: a worker's databases take about
500 MB and its WAL up to 1 GB (``max_wal_size``)."""


def cluster_folder() -> Path | None:
    """``MEMORY`` when it is there, writable, and both it and the machine's free memory (what
    it is made of) have ``MEMORY_ROOM``; else ``None`` (the system's temporary folder)."""
    try:
        free = shutil.disk_usage(MEMORY).free
        memory = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    room = min(free, memory) >= MEMORY_ROOM
    return MEMORY if room and os.access(MEMORY, os.W_OK) else None


def cluster_or_skip() -> Iterator[Any]:
    """Yield a started ``pi_agent_ask.store.testing.Cluster``, removed afterwards; skip the
    test when PostgreSQL's programs are missing or no user may run them. Imports the store
    only when called: most tests need no PostgreSQL."""
    from pi_agent_ask.store.testing import find_pg_bin, throwaway_cluster

    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)")
    try:
        with throwaway_cluster(bin_dir, cluster_folder()) as cluster:
            yield cluster
    except LookupError as error:
        pytest.skip(str(error))
