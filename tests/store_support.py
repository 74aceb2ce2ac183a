"""A throwaway PostgreSQL cluster for the team store's tests: ``initdb`` and ``pg_ctl`` from the
system's PostgreSQL, on a Unix socket in a temporary folder, one per test session.

``initdb`` refuses to run as root, and the tests may run as root (CI): then the server runs as
the ``postgres`` system user (else ``nobody``) through ``runuser``, in a folder given to it.
Tests that need the cluster skip, saying why, only when the binaries are missing.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_agent_ask.store.db import Store

BIN_DIRS = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15")]
_names = itertools.count()


def _bin_dir() -> Path | None:
    env = os.environ.get("PI_AGENT_ASK_PG_BIN")
    for candidate in [Path(env)] if env else BIN_DIRS:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


class Cluster:
    """A running cluster: ``url(db, user)`` connection strings, ``restart()``."""

    def __init__(self, bin_dir: Path, root: Path, user: str | None) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.socket = root / "sock"
        self.user = user
        self.superuser = user or pwd.getpwuid(os.getuid()).pw_name

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)

    def initdb(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.superuser, "-E", "UTF8")

    def _options(self) -> str:
        return (
            f"-k {self.socket} -c listen_addresses='' -c fsync=off -c max_connections=200 "
            "-c shared_buffers=32MB"
        )

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-o",
            self._options(),
            "start",
        )

    def restart(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-m",
            "fast",
            "-o",
            self._options(),
            "restart",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")

    def url(self, db: str = "postgres", user: str | None = None) -> str:
        return f"host={self.socket} port=5432 dbname={db} user={user or self.superuser}"

    def new_database(self) -> str:
        """A fresh database, initialised as ``store init`` does; returns its name."""
        import psycopg

        name = f"team_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        Store.init(self.url(name))
        return name

    def login_role(self, name: str, member_of: str) -> str:
        """A login role (created once) that is a member of ``member_of``."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
            if exists is None:
                conn.execute(f"CREATE ROLE {name} LOGIN")
            conn.execute(f"GRANT {member_of} TO {name}")
        return name


def _server_user() -> str | None:
    if os.getuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    pytest.skip("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)")
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="pi-agent-ask-pg-"))
    # Short: a Unix socket's path is limited to about 100 bytes.
    (root / "sock").mkdir()
    if user is not None:
        entry = pwd.getpwnam(user)
        root.chmod(0o755)
        for path in (root, root / "sock"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(bin_dir, root, user)
    cluster.initdb()
    cluster.start()
    try:
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def store_db(pg_cluster: Cluster) -> str:
    """A fresh initialised database's name."""
    return pg_cluster.new_database()


@pytest.fixture
def desk_url(pg_cluster: Cluster, store_db: str) -> str:
    """A desk's connection string on a fresh store (a login role in ``pi_agent_ask_desk``)."""
    role = pg_cluster.login_role("team_desk", "pi_agent_ask_desk")
    return pg_cluster.url(store_db, role)
