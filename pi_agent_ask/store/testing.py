"""Helpers for driving team desks in tests and benchmarks: an answering person, a desk process.

:func:`answering` runs a board on the store (its own listener, no HTTP) whose person answers
every free form as it appears, the first option of every question, through a claim, the way a
person at a desk would; it returns the request ids it answered. :func:`desk_process` starts
``pi-agent-ask desk --store URL --headless`` and returns the process and its URL.
:class:`Cluster` is a throwaway PostgreSQL cluster (``initdb``, ``pg_ctl``) on a Unix socket in
a temporary folder, run as an unprivileged user when the caller is root (``initdb`` refuses
root); :func:`throwaway_cluster` starts and removes one, and first :func:`reap_orphans`: the
clusters of processes killed before they could remove theirs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import trio

from pi_agent_ask.proc_stat import FIRST, START_TIME, STATE, stat_fields
from pi_agent_ask.store.board import TeamBoard
from pi_agent_ask.store.db import Claim, FormRow, Store, Submitted
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen

__all__ = [
    "Cluster",
    "answering",
    "desk_process",
    "find_pg_bin",
    "first_options",
    "reap_orphans",
    "throwaway_cluster",
]


def first_options(row: FormRow) -> dict[str, Any]:
    """The response choosing the first option of every question of ``row``."""
    answers = {
        question["id"]: {"values": [question["options"][0]["value"]]}
        for question in row.params["questions"]
    }
    return {"kind": "answer", "answers": answers}


@asynccontextmanager
async def answering(
    url: str,
    person: str,
    *,
    respond: Callable[[FormRow], Mapping[str, Any]] = first_options,
    on_answer: Callable[[str], None] | None = None,
    pace: Callable[[TeamBoard], Awaitable[None]] | None = None,
) -> AsyncIterator[TeamBoard]:
    """A person answering every free form on the store at ``url`` until the block ends;
    ``on_answer(request_id)`` after each submission of theirs that won; ``pace(board)``, when
    given, before each form they open (a person's rhythm, not the machine's)."""
    store = Store(url)
    await trio.to_thread.run_sync(store.open)
    try:
        shared = AsyncStore.of(store)
        wakes = Wakes()
        board = TeamBoard(shared, wakes, person)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen, url, wakes)
            await wakes.connected.wait()
            await nursery.start(board.run)

            async def work() -> None:
                while True:
                    if pace is not None:
                        await pace(board)
                    await board.wait_for(lambda forms: any(not form.claim_live for form in forms))
                    claim = await board.open()
                    if not isinstance(claim, Claim):
                        await board.refresh()
                        continue
                    outcome = await board.answer(claim.request_id, respond(claim.row))
                    if isinstance(outcome, Submitted) and on_answer is not None:
                        on_answer(outcome.request_id)

            nursery.start_soon(work)
            try:
                yield board
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)


async def desk_process(
    url: str, person: str, *extra: str, env: Mapping[str, str] | None = None
) -> tuple[trio.Process, str]:
    """``pi-agent-ask desk --store URL --headless --as PERSON`` and the URL it listens at."""
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "--headless", "--store", url]
    # A process the caller keeps and stops (trio.run_process would wait for it to exit).
    process = await trio.lowlevel.open_process(
        [*command, "--as", person, *extra], stdout=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await process.stdout.receive_some(1)
        if not chunk:
            raise RuntimeError(f"the desk exited before it listened: {line!r}")
        line += chunk
    return process, line.decode().rsplit(" ", 1)[1].strip()


BIN_DIRS = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15")]
_names = itertools.count()


def find_pg_bin() -> Path | None:
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


def server_user() -> str | None:
    """Who runs the server: ``None`` (the caller) unless the caller is root; then the
    ``postgres`` system user, else ``nobody``. Raises ``LookupError`` when neither exists."""
    if os.getuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise LookupError("running as root and no unprivileged user (postgres, nobody) to run it")


PREFIX = "pi-agent-ask-pg-"
"""How the folder of a cluster made by ``throwaway_cluster`` is named (then random letters)."""

OWNER = "owner"
"""The file in a cluster's folder naming the process that made it: ``PID START``, START being
when that process started (``process_start``), so that a process id used again by a later
process is not taken for the owner."""


def process_start(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (``proc_stat.START_TIME``);
    ``""`` on a system without ``/proc``. ``ProcessLookupError`` when there is no such process
    (``PermissionError`` may mean one of another user's, alive)."""
    try:
        fields = stat_fields(pid)
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            raise ProcessLookupError(pid) from None
        os.kill(pid, 0)  # raises ProcessLookupError when it is gone
        return ""
    if fields[STATE - FIRST] == "Z":  # exited, not yet reaped by its parent
        raise ProcessLookupError(pid)
    return fields[START_TIME - FIRST]


def _owner_gone(owner: str) -> bool:
    pid, _, start = owner.partition(" ")
    try:
        return process_start(int(pid)) != start
    except ProcessLookupError:
        return True
    except (ValueError, OSError):  # not an owner file this module wrote, or not ours to see
        return False


def reap_orphans(bin_dir: Path, folder: Path | None = None, user: str | None = None) -> list[Path]:
    """Stop and remove the clusters in ``folder`` (default: the system's temporary folder)
    whose owner process is gone; return their folders. A test run killed from outside (a
    timeout's SIGTERM, a SIGKILL) never reaches ``throwaway_cluster``'s clean-up, and its
    server would run on, holding memory (the tests' clusters live in ``/dev/shm``) and
    connections, until the machine restarts. ``user`` runs the server (``server_user``).

    Only folders with an owner file are touched: a folder without one is being made, or was
    made by an older version of this module (left to whoever made it)."""
    reaped = []
    for root in sorted(Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            owner = (root / OWNER).read_text()
        except OSError:
            continue
        if not _owner_gone(owner):
            continue
        cluster = Cluster(bin_dir, root, user)
        if (cluster.data / "postmaster.pid").exists():
            # Another process may be reaping it too, or its server may have died with it.
            with contextlib.suppress(subprocess.CalledProcessError):
                cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped


@contextmanager
def throwaway_cluster(bin_dir: Path, folder: Path | None = None) -> Iterator[Cluster]:
    """A started cluster in a new temporary folder (in ``folder``, default the system's
    temporary folder), stopped and removed afterwards. The orphans in that folder
    (``reap_orphans``) are removed first."""
    user = server_user()
    reap_orphans(bin_dir, folder, user)
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=folder))
    (root / OWNER).write_text(f"{os.getpid()} {process_start(os.getpid())}")
    (root / "sock").mkdir()  # short: a Unix socket's path is limited to about 100 bytes
    if user is not None:
        entry = pwd.getpwnam(user)
        root.chmod(0o755)
        for path in (root, root / "sock"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(bin_dir, root, user)
    try:
        cluster.initdb()
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
