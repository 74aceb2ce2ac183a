"""How a team agent's session on a desk ends (``pi-agent-ask mcp --desk URL,...``): the agent
done while the desk runs, the session is ended on the desk (the SDK's ``DELETE``), so the desk
frees it at once; a desk gone under it, nothing is asked of that desk, so the SDK has no failed
``DELETE`` to log."""

from __future__ import annotations

import functools
import itertools
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
    YES,
    Cluster,
    agent,
    ask,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_mcp_desk_close import records_of
from tests.test_mcp_stdio import opening, read_lines

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


async def test_a_team_agent_that_ends_ends_its_session_on_the_desk(
    pg_cluster: Cluster,
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
    pg_cluster: Cluster,
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
    pg_cluster: Cluster,
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
    ]
    wait = call % (2, '{"name": "wait_for_answers", "arguments": {}}')
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
            await read_lines(process.stdout, 2)  # initialize and the receipt
            # The wait goes after the receipt: sent with the ask, it could find nothing
            # pending yet and return at once (the SDK runs the two calls side by side).
            await process.stdin.send_all(wait.encode() + b"\n")
            await desk.board.wait_for(lambda forms: len(forms) == 1 and forms[0].agent_waits)
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
    read: trio.MemoryReceiveChannel[str] | None = None
    """Each line written, for a test that follows the output as it comes."""
    _out: trio.MemorySendChannel[str] | None = None

    @classmethod
    def open(cls) -> Lines:
        out, read = trio.open_memory_channel[str](1000)  # a test's few hundred lines at most
        return cls(*trio.open_memory_channel[str](100), read=read, out=out)

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
        if self._out is not None:
            self._out.send_nowait(text)

    async def flush(self) -> None:
        pass


async def test_a_team_agent_whose_input_ends_is_answered_every_request(
    pg_cluster: Cluster,
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


async def test_a_team_agent_s_wait_counts_progress_at_its_own_interval(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A foreground ask through the forwarder sends progress at the forwarder's
    ``--progress-interval`` (it was ignored: the desk's own count was relayed, every 10 s,
    and started from zero again on the next desk after a failover), each value larger than
    the one before, then the answer."""
    import json

    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    client = Lines.open()
    assert client.read is not None
    asking = {"name": "ask_user", "arguments": ask("Deploy"), "_meta": {"progressToken": 7}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": asking}
    progress: list[float] = []
    with trio.fail_after(30):
        async with team_desk(desk_url, "ann") as desk, trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(
                    serve_stdio_via_team,
                    [desk.url],
                    token,
                    key="counting",
                    cwd=tmp_path,
                    hook_dir=tmp_path,
                    stdin=client,
                    stdout=client,
                    progress_interval=0.05,
                )
            )
            for line in (*opening("counting"), json.dumps(call)):
                await client.send.send(line + "\n")
            forms = await desk.board.wait_for(lambda forms: len(forms) == 1)
            async for line in client.read:
                message = json.loads(line)
                if message.get("method") == "notifications/progress":
                    progress.append(message["params"]["progress"])
                    if len(progress) == 3:
                        await desk.board.answer(forms[0].request_id, YES)
                elif message.get("id") == 1:
                    answered = message["result"]
                    break
            await client.send.aclose()
    assert progress[:3] == [0.05, 0.1, 0.15], progress
    assert all(a < b for a, b in itertools.pairwise(progress)), progress
    assert answered["structuredContent"]["answers"]["q"]["values"] == ["yes"]


async def test_a_team_forwarder_cancelled_with_a_session_held_ends(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Cancelled (a host ending it without a signal), the forwarder ends its session on the
    desk and returns; it waited for that session's end, shielded, for ever."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    client = Lines.open()
    assert client.read is not None
    with records_of("mcp.server.streamable_http") as desk_log, trio.fail_after(30):
        async with team_desk(desk_url, "ann") as desk, trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(
                    serve_stdio_via_team,
                    [desk.url],
                    token,
                    key="cancelled",
                    cwd=tmp_path,
                    hook_dir=tmp_path,
                    stdin=client,
                    stdout=client,
                )
            )
            listing = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
            for line in (*opening("cancelled"), listing):
                await client.send.send(line + "\n")
            async for line in client.read:
                if '"id":1' in line:
                    break  # answered by the desk: a session is held there
            nursery.cancel_scope.cancel()
        ended = [r for r in desk_log if r.getMessage().startswith("Terminating session")]
    assert len(ended) == 1, [r.getMessage() for r in desk_log]
