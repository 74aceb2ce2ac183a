"""How a team agent's session on a desk ends (``pi-agent-ask mcp --desk URL,...``): the agent
done while the desk runs, the session is ended on the desk (the SDK's ``DELETE``), so the desk
frees it at once; a desk gone under it, nothing is asked of that desk, so the SDK has no failed
``DELETE`` to log."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import attrs
import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.mcp_server.input_end import INPUT_CLOSED_LOG, ON_DESK
from pi_agent_ask.store.db import Store
from pi_agent_ask.store.forward import FailoverUpstream, serve_stdio_via_team
from tests.store_support import (  # noqa: F401
    Cluster,
    agent,
    ask,
    desk_url,
    pg_cluster,
    store_db,
    team_desk,
)
from tests.test_mcp_desk_close import records_of
from tests.test_mcp_stdio import opening, read_lines

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


async def test_a_team_agent_that_ends_ends_its_session_on_the_desk(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with records_of("mcp.server.streamable_http") as desk_log, trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            async with agent([desk.url], token) as alpha:
                await alpha.call_tool("ask_user", ask("Deploy", background=True))
            # The agent's server has ended, and the desk heard the end of its session.
            ended = [r for r in desk_log if r.getMessage().startswith("Terminating session")]
    assert len(ended) == 1, [r.getMessage() for r in desk_log]


async def test_a_session_on_a_team_desk_that_stopped_is_dropped_without_a_word(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with records_of("mcp.client.streamable_http") as client_log, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            async with team_desk(desk_url, "ann") as desk:
                upstream = FailoverUpstream(urls=[desk.url], token=token, nursery=nursery)
                session, generation = await upstream.session()
                await session.list_tools()
            # The desk has stopped: the forwarder's next call finds its session broken.
            upstream.broken(generation)
    assert [r.getMessage() for r in client_log if r.levelno >= logging.WARNING] == []


async def test_a_team_agent_killed_during_a_call_ends_its_server_quietly(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """The client dies while its wait runs on the desk: its pipes close under the server,
    which ends as when standard input closes (exit 0, no traceback; standard error says where
    the wait's questions stay, as ``pi-agent-ask mcp`` on its own says)."""
    import json
    import os
    import subprocess
    import sys

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}'
    lines = [
        *opening("doomed"),
        call % (1, json.dumps({"name": "ask_user", "arguments": ask("Deploy", background=True)})),
        call % (2, '{"name": "wait_for_answers", "arguments": {}}'),
    ]
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", desk.url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "PI_AGENT_ASK_TOKEN": token},
            )
            assert process.stdin and process.stdout and process.stderr
            await process.stdin.send_all("".join(line + "\n" for line in lines).encode())
            # initialize and the receipt; the wait goes on
            await read_lines(process.stdout, 2)
            await desk.board.wait_for(lambda forms: len(forms) == 1)
            await process.stdout.aclose()
            await process.stdin.aclose()
            said = b""
            while chunk := await process.stderr.receive_some(65536):
                said += chunk
            assert await process.wait() == 0, said.decode()
    assert said.decode() == INPUT_CLOSED_LOG.format(where=ON_DESK) + "\n"


@attrs.define(eq=False)
class Lines:
    """A client's side of the stdio transport in memory: the lines it writes (its input,
    ``readline`` and iteration as the SDK reads a file; closed as a client closes it), and
    what it reads (``written``)."""

    send: trio.MemorySendChannel[str]
    receive: trio.MemoryReceiveChannel[str]
    written: list[str] = attrs.field(factory=list)

    @classmethod
    def open(cls) -> Lines:
        return cls(*trio.open_memory_channel[str](100))  # the test's few lines

    async def readline(self) -> str:
        return await anext(self, "")

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        try:
            return await self.receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def write(self, text: str) -> None:
        self.written.append(text)

    async def flush(self) -> None:
        pass


async def test_a_team_agent_whose_input_ends_is_answered_every_request(
    pg_cluster: Cluster,  # noqa: F811
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The client closes the forwarder's input with requests in flight, as ``pi-agent-ask
    mcp`` on its own meets it (``input_end.py``): the foreground ask waiting for the person
    returns ``input_closed`` at once, saying where its question stays; the tool list asked
    just before is answered, not ``Connection closed``; the server ends by itself."""
    from tests.test_mcp_input_end import by_id, call

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    client = Lines.open()
    with trio.fail_after(30):
        async with team_desk(desk_url, "ann") as desk:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    functools.partial(
                        serve_stdio_via_team,
                        [desk.url],
                        token,
                        key="closing",
                        cwd=tmp_path,
                        hook_dir=tmp_path,
                        stdin=client,
                        stdout=client,
                    )
                )
                for line in (*opening("closing"), call(1, "ask_user", ask("Deploy"))):
                    await client.send.send(line + "\n")
                await desk.board.wait_for(lambda forms: len(forms) == 1)
                await client.send.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
                await client.send.aclose()
            still = await desk.board.wait_for(lambda forms: len(forms) == 1)
    answers = by_id("".join(client.written).encode())
    assert set(answers) == {0, 1, 2}, answers
    ended = answers[1]["result"]
    assert ended["isError"] is True, ended
    assert ended["structuredContent"] == {
        "status": "input_closed",
        "pendingRequestIds": [],
        "sessionFile": None,
    }
    assert "stays queued on the pi-agent-ask desk" in ended["content"][0]["text"]
    assert "ask_user" in [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert len(still) == 1
