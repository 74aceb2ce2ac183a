"""A desk that starts while ``pi-agent-ask mcp`` shows a form through the client's own form
elicitation: the person's answer there is delivered, never dropped, and the desk does not show
that form again. Real processes: the server under the SDK's stdio client, the desk in-process.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pi_agent_ask.mcp_server.router import DRAIN_LOG, UNRECORDED_TEXT
from tests.test_mcp import ASK, accept
from tests.test_mcp_stdio import Home, call, home, plain

__all__ = ["home"]


@asynccontextmanager
async def server_with_log(
    home: Home, elicit: Any, name: str
) -> AsyncIterator[tuple[ClientSession, trio.abc.ReceiveStream]]:
    """The stdio server under the SDK's client, its standard error readable as it is written."""
    read_end, write_end = os.pipe()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pi_agent_ask", "mcp"], env=home.env(), cwd=home.work
    )
    with os.fdopen(write_end, "w") as errlog:
        async with (
            trio.lowlevel.FdStream(read_end) as log,
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit,
                client_info=types.Implementation(name=name, version="1"),
            ) as client,
        ):
            await client.initialize()
            yield client, log


async def wait_for_line(log: trio.abc.ReceiveStream, text: str) -> None:
    seen = b""
    while text.encode() not in seen:
        chunk = await log.receive_some()
        assert chunk, f"the server's standard error ended without {text!r}: {seen!r}"
        seen += chunk


@pytest.mark.parametrize(
    ("given", "cancelled"),
    [(accept({"db": "lite"}), False), (types.ElicitResult(action="decline"), True)],
    ids=["answered", "declined"],
)
async def test_an_answer_given_in_the_client_while_a_desk_starts_is_delivered(
    home: Home, given: types.ElicitResult, cancelled: bool
) -> None:
    """Answered or declined there, the person's decision is the call's result."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    shown = trio.Event()
    release = trio.Event()
    noticed = trio.Event()
    cut: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        try:
            await release.wait()
        except trio.Cancelled:
            cut.append("the server withdrew the form from the client")
            noticed.set()
            raise
        return given

    results: list[types.CallToolResult] = []
    answered = trio.Event()
    with trio.fail_after(90):
        async with (
            server_with_log(home, elicit, "both") as (client, log),
            trio.open_nursery() as nursery,
        ):

            async def ask() -> None:
                results.append(await call(client, "ask_user", ASK))
                answered.set()

            async def read_log() -> None:
                await wait_for_line(log, DRAIN_LOG)
                noticed.set()

            nursery.start_soon(ask)
            await shown.wait()  # the person has the form in the client
            nursery.start_soon(read_log)
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk:
                await noticed.wait()  # the server has seen the desk
                # Meanwhile the agent's calls are served; a new form waits for the desk.
                later = await call(client, "ask_user", {**ASK, "background": True})
                assert later.structured_content["status"] == "queued", plain(later)
                release.set()  # and the person answers in the client's form
                await answered.wait()
                assert not cut, cut
                [result] = results
                assert result.structured_content is not None, plain(result)
                assert result.structured_content["cancelled"] is cancelled
                if not cancelled:
                    assert result.structured_content["answers"]["db"]["values"] == ["lite"]
                # The desk shows the new form only, never the one answered in the client.
                shown_on_desk = await answer_displayed(desk)
                waited = await call(client, "wait_for_answers", {})
                assert desk.board.current is None
            nursery.cancel_scope.cancel()
    assert shown_on_desk.key == f"both@{home.work}"
    [item] = waited.structured_content["results"]
    assert item["requestId"] == later.structured_content["requestId"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]


def server_pid() -> int:
    """The process id of the one ``pi-agent-ask mcp`` this test process started."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
            command = (status.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # a process that ended meanwhile
        if int(fields.get("PPid", "0")) == os.getpid() and b"pi_agent_ask" in command:
            found.append(int(status.parent.name))
    [pid] = found
    return pid


async def test_an_answer_in_the_client_that_cannot_be_recorded_during_a_move_is_said_so(
    home: Home,
) -> None:
    """The person answers in the client while a desk starts, and the journal's write of that
    answer fails (the server's files may grow no more: ``EFBIG``): the form goes to the desk,
    and the call waiting on it says in words that the answer given in the client was not kept
    (it said only that the question is shown on the desk)."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    shown = trio.Event()
    release = trio.Event()
    results: list[types.CallToolResult] = []
    answered = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        await release.wait()
        return accept({"db": "lite"})

    with trio.fail_after(90):
        async with (
            server_with_log(home, elicit, "full") as (client, log),
            trio.open_nursery() as nursery,
        ):

            async def ask() -> None:
                results.append(await call(client, "ask_user", ASK))
                answered.set()

            nursery.start_soon(ask)
            await shown.wait()
            pid = server_pid()
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk:
                await wait_for_line(log, DRAIN_LOG)
                # From now on the server's journal cannot grow: the answer's write fails.
                [journal] = home.state.glob("*.pias")
                limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (journal.stat().st_size, limits[1]))
                release.set()
                await wait_for_line(log, "The answer could not be saved to the session file")
                resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)
                await answered.wait()
                # The form is the desk's now: answered there, it reaches the agent.
                on_desk = await answer_displayed(desk)
                waited = await call(client, "wait_for_answers", {})
            nursery.cancel_scope.cancel()
    [result] = results
    assert result.is_error
    assert plain(result) == UNRECORDED_TEXT
    assert on_desk.key == f"full@{home.work}"
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]
