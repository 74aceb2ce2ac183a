"""Setting a team desk up as docs/team.md says, and getting it wrong: a ``desk --store`` whose
store cannot serve it (not a connection string, no server there, no schema yet, a login role
that is not a desk's) stops at once with one sentence saying what to do, not an internal
error after half a minute of the pool's retries; and the pool's own log lines never reach
standard error (a terminal desk's screen) while PostgreSQL restarts."""

from __future__ import annotations

import argparse
import functools
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import psycopg
import pytest
import trio

from pi_agent_ask.commands.store import cmd_store
from tests.store_support import (  # noqa: F401
    Cluster,
    desk_url,
    store_db,
)


async def _desk(store: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "--headless", "--store", store]
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json")}
    return await trio.run_process(
        command, env=env, capture_stdout=True, capture_stderr=True, check=False
    )


def _empty_database(cluster: Cluster, name: str) -> str:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f"DROP DATABASE {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return name


@pytest.mark.parametrize(
    "case",
    ["not a connection string", "no server", "no schema", "not a desk role"],
)
async def test_a_store_that_cannot_serve_a_desk_is_refused_at_once_in_words(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    tmp_path: Path,
    case: str,
) -> None:
    if case == "not a connection string":
        store, says = "postgres:/team", "is not a connection string"
    elif case == "no server":
        store = f"host={tmp_path} port=5432 dbname=team user=nobody"
        says = "cannot reach the store: "
    elif case == "no schema":
        store = pg_cluster.url(_empty_database(pg_cluster, "team_no_schema"))
        says = "pi-agent-ask store init"
    else:
        role = pg_cluster.login_role("team_stranger", "pg_read_all_data")
        store, says = pg_cluster.url(store_db, role), "pi_agent_ask_desk"
    with trio.fail_after(25):  # the pool alone would try for 30 s
        done = await _desk(store, tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert done.stdout == b""
    (line,) = err.splitlines()
    assert line.startswith("pi-agent-ask: cannot start the desk: "), line
    assert says in line
    assert "internal error" not in line


async def test_the_pool_says_nothing_on_standard_error_while_postgresql_is_down(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Standard error is a terminal desk's screen: while the server is away the pool tries to
    reconnect, and those tries are the desk's business (it retries, docs/team.md), not lines
    across the person's form."""
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json")}
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "--headless", "--store", desk_url]
    with trio.fail_after(120), (tmp_path / "stderr").open("wb") as errors:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=errors, env=env
        )
        try:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some(1)
            url = line.decode().rsplit(" ", 1)[1].strip()
            pg_cluster.stop()
            try:
                async with httpx2.AsyncClient(timeout=60) as http, trio.open_nursery() as nursery:
                    # The token is checked in the store: the pool tries to reach it.
                    nursery.start_soon(
                        functools.partial(
                            http.post, url, headers={"authorization": "Bearer pia_x"}, json={}
                        )
                    )
                    await trio.sleep(2)
                    pg_cluster.start()
            finally:
                if not (pg_cluster.socket / ".s.PGSQL.5432").exists():
                    pg_cluster.start()
            assert process.poll() is None  # the desk carried on
        finally:
            process.send_signal(signal.SIGTERM)
            await process.wait()
    assert (tmp_path / "stderr").read_text() == ""


@pytest.mark.parametrize("case", ["no schema", "not a tokens role"])
async def test_store_token_on_a_store_that_cannot_take_it_says_what_to_do(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    case: str,
) -> None:
    """``store token`` (and ``store revoke``) before ``store init``, or as a role that may not
    manage tokens: one line naming the fix, not the database's error with its SQL."""
    if case == "no schema":
        url, says = pg_cluster.url(_empty_database(pg_cluster, "team_no_tokens")), "store init"
    else:
        url, says = desk_url, "GRANT pi_agent_ask_tokens TO team_desk;"
    for action in ("token", "revoke"):
        command = [sys.executable, "-m", "pi_agent_ask", "store", action, url, "--agent", "a"]
        done = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False
        )
        (line,) = done.stderr.decode().splitlines()
        assert done.returncode == 1 and done.stdout == b""
        assert line.startswith("pi-agent-ask store: ") and says in line, line


@pytest.mark.parametrize("case", ["not a connection string", "no server", "not allowed"])
def test_store_init_that_cannot_run_says_what_to_do_in_one_line(
    pg_cluster: Cluster, tmp_path: Path, case: str
) -> None:
    """``store init`` with a mistyped address, no server there, or a login role that may not
    create the schema: one line naming the fix, as a desk's start says it, not psycopg's
    class name (``ProgrammingError: missing "=" ...``)."""
    if case == "not a connection string":
        url, says = "postgresq:///team", "the store's address is not a connection string"
    elif case == "no server":
        url, says = f"host={tmp_path} port=5432 dbname=team user=nobody", "cannot reach the store"
    else:
        role = pg_cluster.login_role("team_no_create", "pg_read_all_data")
        url = pg_cluster.url(_empty_database(pg_cluster, "team_no_create"), role)
        says = "may not create the schema and roles (permission denied "
    stdout, stderr = io.StringIO(), io.StringIO()
    args = argparse.Namespace(store_command="init", url=url)
    assert cmd_store(args, stdout, stderr) == 1
    (line,) = stderr.getvalue().splitlines()
    assert line.startswith("pi-agent-ask store: ") and says in line, line
    assert "Error:" not in line and stdout.getvalue() == ""
