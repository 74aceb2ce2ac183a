"""How ``pi-agent-ask mcp``'s session on a desk ends: quietly and correctly.

The agent done while the desk runs: the session is ended on the desk (the SDK's ``DELETE``),
so the desk frees it at once instead of keeping it for hours. The desk gone first: nothing is
asked of it, so the SDK has no failed ``DELETE`` to log ("Session termination failed")."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, open_desk
from pi_agent_ask.mcp_server.forward import DeskUpstream, forward_list
from tests.test_mcp import ASK
from tests.test_mcp_stdio import Home, call, home, opening, read_lines, server

AWAY = "http://127.0.0.1:9/mcp"
"""A desk URL nothing answers at."""

__all__ = ["home"]

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


@contextmanager
def records_of(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records of logger ``name`` (from INFO) while the block runs, whatever its parents
    do with them."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger(name)
    handler, level = Keep(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_an_agent_that_ends_ends_its_session_on_the_desk(home: Home) -> None:
    with (
        records_of("mcp.server.streamable_http") as desk_log,
        trio.fail_after(60),
    ):
        async with open_desk(
            home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
        ):
            async with server(home, name="done") as client:
                await call(client, "ask_user", {**ASK, "background": True})
            # The server process has ended, and the desk heard the end of its session.
            ended = [r for r in desk_log if r.getMessage().startswith("Terminating session")]
    assert len(ended) == 1, [r.getMessage() for r in desk_log]


async def test_a_session_on_a_desk_that_stopped_is_dropped_without_a_word(tmp_path: Path) -> None:
    with (
        records_of("mcp.client.streamable_http") as client_log,
        trio.fail_after(60),
    ):
        async with trio.open_nursery() as nursery:
            async with open_desk(tmp_path / "d") as desk:
                upstream = DeskUpstream(
                    url=desk.address.url, token=desk.address.token, key="k", nursery=nursery
                )
                await forward_list(upstream)
            # The desk has stopped (and removed its connection file): the router drops the
            # session, as it does on every move away from a desk.
            upstream.reset()
    assert [r.getMessage() for r in client_log if r.levelno >= logging.WARNING] == []


async def raw_server(
    home: Home, name: str, *args: str, token: str | None = None, replies: int = 2
) -> trio.Process:
    """``pi-agent-ask mcp`` (with ``args``; ``token``: an agent's token of a team store) with a
    raw client's opening and a ``tools/list`` answered (the server has chosen its side: the
    desk, or local with its hook socket, or the team's desks); ``replies``: the lines to wait
    for (1: the ``initialize`` only)."""
    env = home.env() if token is None else {**home.env(), "PI_AGENT_ASK_TOKEN": token}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pi_agent_ask", "mcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=home.work,
    )
    assert process.stdin is not None and process.stdout is not None
    listed = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    await process.stdin.send_all("".join(f"{line}\n" for line in [*opening(name), listed]).encode())
    await read_lines(process.stdout, replies)  # initialize, then tools/list
    return process


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
async def test_a_signal_ends_the_server_as_the_end_of_its_input_does(
    home: Home, signum: signal.Signals
) -> None:
    """A client that ends its server with a signal (the TypeScript SDK sends ``SIGTERM`` to a
    server still running 2 s after its input closed): what the server holds is let go as at
    the end of its input (its hook socket and the file beside it removed), then it ends by
    that signal."""
    with trio.fail_after(60):
        process = await raw_server(home, "signalled")
        [socket] = home.runtime.glob("pi-agent-ask/mcp/*.sock")
        process.send_signal(signum)
        assert await process.wait() == -signum
    assert not socket.exists() and list(home.runtime.glob("pi-agent-ask/mcp/*")) == []


async def test_a_signal_ends_a_team_forwarder_as_the_end_of_its_input_does(home: Home) -> None:
    """The forwarder to a team's desks (``mcp --desk URL,...`` with an agent's token) on
    ``SIGTERM``: its hook socket and the file beside it are removed, then it ends by that
    signal. It handled no signal: the process died with the socket left behind."""
    with trio.fail_after(60):
        # No desk answers: tools/list waits for one, and the initialize is all that comes.
        process = await raw_server(home, "signalled", "--desk", AWAY, token="t", replies=1)
        [socket] = home.runtime.glob("pi-agent-ask/mcp/*.sock")
        process.send_signal(signal.SIGTERM)
        assert await process.wait() == -signal.SIGTERM
    assert not socket.exists() and list(home.runtime.glob("pi-agent-ask/mcp/*")) == []


async def test_a_signal_ends_the_servers_session_on_the_desk(home: Home) -> None:
    with records_of("mcp.server.streamable_http") as desk_log, trio.fail_after(60):
        async with open_desk(
            home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
        ):
            process = await raw_server(home, "signalled")
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == -signal.SIGTERM
            ended = [r for r in desk_log if r.getMessage().startswith("Terminating session")]
    assert len(ended) == 1, [r.getMessage() for r in desk_log]
