"""The desk as a process: killed with SIGKILL and restarted with nothing lost, refused on a
state directory another desk uses, and ``pi-agent-ask mcp --desk URL`` (the stdio server
forwarding to a desk) driven by the SDK's stdio client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from pi_agent_ask.desk.run import run_desk
from pi_agent_ask.desk.testing import (
    SDK_CLIENT_WARNINGS,
    answer_displayed,
    desk_client,
    open_desk,
    yes_no_form,
)
from pi_agent_ask.mcp_common.connection import find_desk, read_desk_file

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


def ask(label: str, *, background: bool = True) -> dict[str, Any]:
    return yes_no_form(label, background=background)


async def read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            raise AssertionError(f"the desk exited before it was ready: {data!r}")
        data += chunk
    return data.decode()


async def test_a_desk_killed_with_sigkill_restarts_with_nothing_lost(tmp_path: Path) -> None:
    file = tmp_path / "desk.json"
    state = tmp_path / "state"
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(file)}
    command = [
        sys.executable,
        "-m",
        "pi_agent_ask",
        "desk",
        "--headless",
        "--state",
        str(state),
        "--settings",
        str(tmp_path / "settings.json"),
    ]
    with trio.fail_after(90):
        process = await trio.lowlevel.open_process(command, env=env, stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None
            assert "listening at http://127.0.0.1:" in await read_line(process.stdout)
            address = read_desk_file(file)
            assert address is not None and address.pid == process.pid
            async with desk_client(address, "alpha") as alpha:
                first = (await alpha.call_tool("ask_user", ask("A1"))).structured_content
                second = (await alpha.call_tool("ask_user", ask("A2"))).structured_content
            async with desk_client(address, "beta") as beta:
                third = (await beta.call_tool("ask_user", ask("B1"))).structured_content
        finally:
            process.send_signal(signal.SIGKILL)
            await process.wait()
        assert process.returncode == -signal.SIGKILL

        # The dead desk's file is still there, and it is stale.
        assert read_desk_file(file) == address
        assert await find_desk(path=file) is None

        async with open_desk(tmp_path, state_dir=state) as desk:
            # Every agent's queue is back before any agent reconnects.
            await desk.board.wait_for(lambda board: len(board.shown_forms()) == 2)
            assert sorted(desk.registry.keys) == ["alpha", "beta"]
            labels = [(await answer_displayed(desk)).state.params.questions[0].label for _ in "abc"]
            assert sorted(labels) == ["A1", "A2", "B1"]
            async with desk_client(desk.address, "alpha") as alpha:
                waited = (await alpha.call_tool("wait_for_answers", {})).structured_content
            assert sorted(entry["requestId"] for entry in waited["results"]) == sorted(
                [first["requestId"], second["requestId"]]
            )
            async with desk_client(desk.address, "beta") as beta:
                waited = (await beta.call_tool("wait_for_answers", {})).structured_content
            assert [entry["requestId"] for entry in waited["results"]] == [third["requestId"]]


def forwarder(
    tmp_path: Path, url: str, token: str, key: str, *extra: str, file: Path | None = None
) -> StdioServerParameters:
    """``pi-agent-ask mcp --desk URL`` as agent ``key``, the token in its environment."""
    env = {
        **os.environ,
        "PI_AGENT_ASK_DESK_FILE": str(file or tmp_path / "desk.json"),
        "PI_AGENT_ASK_DESK_TOKEN": token,
        "HOME": str(tmp_path),
    }
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", "--desk", url, "--key", key, *extra],
        env=env,
    )


async def test_the_stdio_forwarder_carries_calls_and_progress_to_the_desk(tmp_path: Path) -> None:
    with trio.fail_after(90):
        # The desk's own interval is its default (10 s): the ticks the client sees are the
        # stdio server's, at its --progress-interval.
        async with open_desk(tmp_path) as desk:
            server = forwarder(
                tmp_path,
                desk.address.url,
                desk.address.token,
                "forwarded",
                "--progress-interval",
                "0.1",  # the least the command takes
            )
            async with (
                stdio_client(server) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = await session.list_tools()
                assert "ask_user" in [tool.name for tool in tools.tools]
                receipt = await session.call_tool("ask_user", ask("Queued"))
                assert receipt.structured_content["status"] == "queued"
                shown = await answer_displayed(desk)
                assert shown.key == "forwarded"  # the key travelled in the header
                waited = await session.call_tool("wait_for_answers", {})
                assert [e["requestId"] for e in waited.structured_content["results"]] == [
                    receipt.structured_content["requestId"]
                ]

                ticked = trio.Event()

                async def on_progress(progress: float, total: float | None, message: str | None):
                    ticked.set()

                results: list[Any] = []
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        results.append(
                            await session.call_tool(
                                "ask_user",
                                ask("Blocking", background=False),
                                progress_callback=on_progress,
                            )
                        )

                    nursery.start_soon(call)
                    await ticked.wait()  # progress crossed desk -> forwarder -> client
                    await answer_displayed(desk, {"q": {"values": ["no"]}})
                (result,) = results
                assert result.structured_content["answers"]["q"]["values"] == ["no"]


async def test_the_forwarder_reports_a_desk_that_is_gone_as_a_tool_error(tmp_path: Path) -> None:
    server = forwarder(tmp_path, "http://127.0.0.1:9/mcp", "token", "lost")
    with trio.fail_after(60):
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("ask_user", ask("Nobody"))
            assert result.is_error
            [text] = [block.text for block in result.content]
            assert text.startswith("The pi-agent-ask desk did not answer this call")
            assert "Error" not in text and "Exception" not in text


async def test_the_forwarder_follows_a_restarted_desk(tmp_path: Path) -> None:
    file, state = tmp_path / "desk.json", tmp_path / "state"
    options = {
        "headless": True,
        "state_dir": state,
        "desk_file": file,
        "settings": tmp_path / "s.json",
    }
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            gone = trio.Event()

            async def first_desk(task_status: trio.TaskStatus[Any]) -> None:
                try:
                    await run_desk(**options, task_status=task_status)
                finally:
                    gone.set()

            first = await nursery.start(first_desk)
            server = forwarder(tmp_path, first.address.url, first.address.token, "fwd", file=file)
            async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                receipt = await session.call_tool("ask_user", ask("Before"))
                request_id = receipt.structured_content["requestId"]
                first.cancel()
                await gone.wait()
                async with open_desk(tmp_path, state_dir=state) as desk:
                    assert desk.address.url != first.address.url
                    # The connection broke with the old desk: this call says so (not retried).
                    try:
                        broken = await session.call_tool("wait_for_answers", {})
                        assert broken.is_error
                    except MCPError:
                        pass
                    shown = await answer_displayed(desk)
                    assert shown.key == "fwd"
                    # The next call goes to the new desk, found through the connection file.
                    waited = await session.call_tool("wait_for_answers", {})
                    assert not waited.is_error
                    ids = [entry["requestId"] for entry in waited.structured_content["results"]]
                    assert ids == [request_id]


def desk_command(state: Path, settings: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pi_agent_ask",
        "desk",
        "--headless",
        "--state",
        str(state),
        "--settings",
        str(settings),
    ]


async def test_a_second_desk_on_the_same_state_directory_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    command = desk_command(state, tmp_path / "settings.json")
    first_env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "first.json")}
    second_env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "second.json")}
    with trio.fail_after(90):
        process = await trio.lowlevel.open_process(command, env=first_env, stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None
            assert "listening at" in await read_line(process.stdout)
            # Its own connection file, the same state directory: refused at start.
            second = await trio.run_process(
                command, env=second_env, capture_stdout=True, capture_stderr=True, check=False
            )
        finally:
            process.send_signal(signal.SIGTERM)
            await process.wait()
        assert second.returncode == 2
        assert f"another desk is using the state directory {state}" in second.stderr.decode()
        assert second.stdout == b""
        assert not (tmp_path / "second.json").exists()
        # The lock went with the first desk: a desk starts there again.
        async with open_desk(tmp_path, state_dir=state):
            pass


async def test_a_state_path_that_is_a_file_is_refused_by_name(tmp_path: Path) -> None:
    """``--state`` naming a file: said so, with the path (it was ``[Errno 17] File exists``)."""
    state = tmp_path / "state"
    state.write_text("a file of the person's")
    with trio.fail_after(30):
        with pytest.RaisesGroup(
            pytest.RaisesExc(
                NotADirectoryError,
                match=f"the state directory is a file, not a directory: '{state}'",
            ),
            flatten_subgroups=True,
        ):
            async with open_desk(tmp_path, state_dir=state):
                pass
    assert state.read_text() == "a file of the person's"
