"""The tests' throwaway PostgreSQL clusters outlive no test run: a cluster whose owner process
was killed (no clean-up ran) is stopped and removed by the next ``throwaway_cluster`` in the
same folder (``reap_orphans``); a living owner's cluster is left alone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pi_agent_ask.store.testing import (
    OWNER,
    Cluster,
    find_pg_bin,
    process_start,
    reap_orphans,
    server_user,
    throwaway_cluster,
)
from tests.pg import cluster_folder

# A process that starts a cluster, says where, and holds it until killed.
OWNER_PROGRAM = """
import sys
from pathlib import Path
from pi_agent_ask.store.testing import throwaway_cluster
with throwaway_cluster(Path(sys.argv[1]), Path(sys.argv[2])) as cluster:
    print(cluster.root, flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def bin_dir() -> Path:
    found = find_pg_bin()
    if found is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed")
    return found


@pytest.fixture
def folder(bin_dir: Path) -> Iterator[Path]:
    # Short (a Unix socket's path is limited) and traversable by the server's user.
    path = Path(tempfile.mkdtemp(prefix="reap-", dir=cluster_folder()))
    path.chmod(0o755)
    yield path
    reap_orphans(bin_dir, path, server_user())  # what a failed test left
    shutil.rmtree(path, ignore_errors=True)


def test_a_killed_owners_cluster_is_stopped_and_removed(bin_dir: Path, folder: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", OWNER_PROGRAM, str(bin_dir), str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as owner:
        assert owner.stdout is not None
        root = Path(owner.stdout.readline().strip())
        # Its owner is alive: nothing is reaped.
        assert reap_orphans(bin_dir, folder, server_user()) == []
        owner.send_signal(signal.SIGKILL)  # no clean-up runs
    with psycopg.connect(Cluster(bin_dir, root, server_user()).url()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the orphan still serves
    server = int((root / "data" / "postmaster.pid").read_text().split()[0])

    # The next cluster made in that folder reaps it first (this one's initdb fails: it
    # need not start).
    no_initdb = folder / "bin"
    no_initdb.mkdir()
    (no_initdb / "pg_ctl").symlink_to(bin_dir / "pg_ctl")
    (no_initdb / "initdb").symlink_to(shutil.which("false") or "/bin/false")
    with pytest.raises(subprocess.CalledProcessError), throwaway_cluster(no_initdb, folder):
        pass
    assert sorted(folder.iterdir()) == [no_initdb]
    with pytest.raises(ProcessLookupError):
        process_start(server)


def test_an_owner_is_a_process_and_its_start(tmp_path: Path) -> None:
    bin_dir = Path(os.devnull)  # never run: no folder here has a server
    living = tmp_path / "pi-agent-ask-pg-living"
    reused = tmp_path / "pi-agent-ask-pg-reused"
    foreign = tmp_path / "pi-agent-ask-pg-foreign"
    unowned = tmp_path / "pi-agent-ask-pg-unowned"
    for path in (living, reused, foreign, unowned):
        path.mkdir()
    me = os.getpid()
    (living / OWNER).write_text(f"{me} {process_start(me)}")
    (reused / OWNER).write_text(f"{me} 1")  # this process id, but another process's start
    (foreign / OWNER).write_text("not an owner")
    assert reap_orphans(bin_dir, tmp_path) == [reused]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (living, foreign, unowned)
    )
