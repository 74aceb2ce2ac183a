"""``pi-agent-ask mcp`` driven by a client that is not Python: the official TypeScript MCP SDK
over stdio (``tests/node/mcp_client.mjs``), installed from the npm registry into the test's
own temporary folder with ``npm ci`` from ``tests/node/package-lock.json`` (the same versions
on every machine). The tools are listed, every ``inputSchema`` and ``outputSchema``
compiles under Ajv's JSON Schema 2020-12 validator, and a background question answered on a
desk reaches the client exactly once. A second client (``tests/node/handover_client.mjs``)
shows forms itself (form elicitation): its answer given after a desk started is the call's
result, never dropped. A third (``tests/node/close_client.mjs``) ends its session while its
form is shown: the call gets its answer in words. Skipped, saying why, only when there is no Node or the
npm registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, answer_displayed, open_desk

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

ROOT = Path(__file__).resolve().parent.parent
NODE = Path(__file__).parent / "node"
CLIENT = NODE / "mcp_client.mjs"
FORM_CLIENT = NODE / "handover_client.mjs"
UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "network")


def install(folder: Path) -> None:
    """``npm ci`` the client's locked packages into ``folder``; skip when npm's registry is
    out of reach (any other failure fails the test)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(NODE / name, folder / name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        if any(word in done.stderr for word in UNREACHABLE):
            pytest.skip(f"the npm registry cannot be reached: {done.stderr.strip()[:300]}")
        raise AssertionError(f"npm ci failed:\n{done.stderr}")


@pytest.fixture(scope="module")
def client_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TypeScript client with its packages, installed once for this module (outside the
    Trio tests' deadline: an install takes its time)."""
    folder = tmp_path_factory.mktemp("ts-client")
    install(folder)
    shutil.copy(CLIENT, folder / "mcp_client.mjs")
    shutil.copy(FORM_CLIENT, folder / "handover_client.mjs")
    shutil.copy(NODE / "close_client.mjs", folder / "close_client.mjs")
    return folder


def client_env(tmp_path: Path, runtime: str, desk_file: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "XDG_RUNTIME_DIR": runtime,
        "PI_AGENT_ASK_DESK_FILE": str(desk_file),
        "PYTHONPATH": str(ROOT),
    }


async def next_event(stream: Any, buffer: list[bytes]) -> dict[str, Any]:
    while b"\n" not in buffer[0]:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise AssertionError(f"the client ended early: {buffer[0]!r}")
        buffer[0] += chunk
    line, buffer[0] = buffer[0].split(b"\n", 1)
    event: dict[str, Any] = json.loads(line)
    return event


async def test_the_typescript_sdk_lists_compiles_and_gets_an_answer_once(
    tmp_path: Path, client_folder: Path
) -> None:
    folder = client_folder
    desk_file = tmp_path / "desk.json"
    with tempfile.TemporaryDirectory(prefix="pia-") as runtime:
        env = client_env(tmp_path, runtime, desk_file)
        command = ["node", "mcp_client.mjs", sys.executable, "--key", "ts-agent"]
        with trio.fail_after(180):
            async with open_desk(tmp_path / "d", desk_file=desk_file) as desk:
                client = await trio.lowlevel.open_process(
                    command,
                    cwd=folder,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                try:
                    assert client.stdin is not None and client.stdout is not None
                    buffer = [b""]
                    listed = await next_event(client.stdout, buffer)
                    queued = await next_event(client.stdout, buffer)
                    shown = await answer_displayed(desk)
                    await client.stdin.send_all(b"answered\n")
                    waited = await next_event(client.stdout, buffer)
                    assert await client.wait() == 0
                finally:
                    if client.returncode is None:
                        client.kill()
                        await client.wait()
    assert listed["tools"] == ["ask_user", "wait_for_answers"]
    assert sorted(listed["compiled"]) == sorted(
        f"{tool}.{key}" for tool in listed["tools"] for key in ("inputSchema", "outputSchema")
    )
    assert shown.key == "ts-agent"
    request_id = queued["receipt"]["requestId"]
    first, second = waited["first"], waited["second"]
    delivered = [
        *(e["details"]["requestId"] for e in queued["receipt"].get("backgroundAnswers", [])),
        *(e["requestId"] for e in first["results"]),
        *(e["requestId"] for e in second["results"]),
        *(e["details"]["requestId"] for e in first.get("backgroundAnswers", [])),
        *(e["details"]["requestId"] for e in second.get("backgroundAnswers", [])),
    ]
    assert delivered == [request_id]  # exactly once
    [item] = first["results"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]
    assert second["status"] == "complete" and second["results"] == []


async def test_the_typescript_sdk_s_own_form_answered_while_a_desk_starts_is_delivered(
    tmp_path: Path, client_folder: Path
) -> None:
    """A client that shows forms itself: the person answers its form after a desk started.
    The answer is the call's result (never dropped), and the desk does not show the form."""
    from pi_agent_ask.mcp_server.router import DRAIN_LOG

    desk_file = tmp_path / "desk.json"
    command = ["node", "handover_client.mjs", sys.executable, "--key", "ts-form-agent"]
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pia-") as runtime, trio.fail_after(180):
        client = await trio.lowlevel.open_process(
            command,
            cwd=client_folder,
            env=client_env(tmp_path, runtime, desk_file),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,  # the server's standard error (the client inherits it)
        )
        try:
            stdin, stdout, stderr = client.stdin, client.stdout, client.stderr
            assert stdin is not None and stdout is not None and stderr is not None
            buffer = [b""]
            events.append(await next_event(stdout, buffer))  # the form is shown
            # The desk's state directory is the server's default (this home's): the journal
            # where the server keeps this agent's forms is the one the desk opens.
            state = tmp_path / ".pi" / "agent" / "pi-agent-ask" / "desk"
            async with open_desk(tmp_path / "d", desk_file=desk_file, state_dir=state) as desk:
                # The server has seen the desk: it says so, or (before) withdrew the form.
                async with trio.open_nursery() as nursery:

                    async def said() -> None:
                        log = b""
                        while DRAIN_LOG.encode() not in log:
                            chunk = await stderr.receive_some(65536)
                            assert chunk, log
                            log += chunk
                        nursery.cancel_scope.cancel()

                    async def withdrawn() -> None:
                        events.append(await next_event(stdout, buffer))
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(said)
                    nursery.start_soon(withdrawn)
                await stdin.send_all(b"answer\n")  # the person answers in the client
                while events[-1]["event"] != "asked":
                    events.append(await next_event(stdout, buffer))
                asked = events[-1]["result"]
                assert asked is not None, events  # the call was cut, not answered
                assert asked["answers"]["db"]["values"] == ["lite"]
                events.append(await next_event(stdout, buffer))  # the wait, on the desk
                assert desk.board.current is None
                agent = desk.registry.get("ts-form-agent")
                assert agent is not None and (await agent.runtime.statistics()).pending == ()
            assert await client.wait() == 0
        finally:
            if client.returncode is None:
                client.kill()
                await client.wait()
    kinds = [event["event"] for event in events]
    assert kinds == ["shown", "asked", "waited"], events
    assert events[2]["result"]["results"] == []


async def test_a_typescript_client_that_ends_its_session_while_a_form_is_shown(
    tmp_path: Path, client_folder: Path
) -> None:
    """The TypeScript SDK ends a session by closing the server's input (and signals a server
    still running 2 s later). A foreground question whose form the client shows then gets its
    answer, in words: the input closed, the question stays queued in the journal named (it
    was cut ``Connection closed``); standard error says the same."""
    command = ["node", "close_client.mjs", sys.executable]
    with tempfile.TemporaryDirectory(prefix="pia-") as runtime, trio.fail_after(180):
        done = await trio.run_process(
            command,
            cwd=client_folder,
            env=client_env(tmp_path, runtime, tmp_path / "desk.json"),
            capture_stdout=True,
            capture_stderr=True,
        )
    [line] = done.stdout.decode().splitlines()
    closed = json.loads(line)
    assert "result" in closed, closed  # the call was answered, not cut "Connection closed"
    result = closed["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "input_closed"
    [request_id] = result["structuredContent"]["pendingRequestIds"]
    assert result["structuredContent"]["sessionFile"].endswith(".pias")
    assert request_id in result["content"][0]["text"]
    assert f"the question (requestId {request_id}) stays queued" in done.stderr.decode()
