"""Default agent keys of ``pi-agent-ask mcp`` as people run them: two agents of one client in
one directory at the same time, each a real server process driven by the SDK's stdio client,
keep apart on a desk and without one; a restarted agent finds its own journal again."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, answer_displayed, open_desk, yes_no_form

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """The agents' working directory, with a short runtime directory for their hook sockets
    (unix socket paths are limited to about 100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="pia-") as runtime:
        work = tmp_path / "project"
        work.mkdir()
        (work / ".runtime").symlink_to(runtime)
        yield work


def environment(tmp_path: Path, project: Path) -> dict[str, str]:
    """Desk file and home under ``tmp_path``, the runtime directory ``project``'s."""
    env = {
        **os.environ,
        "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json"),
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "XDG_RUNTIME_DIR": str((project / ".runtime").resolve()),
    }
    env.pop("PI_AGENT_ASK_DESK_TOKEN", None)
    return env


def server(tmp_path: Path, project: Path, *extra: str) -> StdioServerParameters:
    """``pi-agent-ask mcp``, started in ``project``, its state under ``tmp_path``."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", "--state", str(tmp_path / "state"), *extra],
        env=environment(tmp_path, project),
        cwd=str(project),
    )


@asynccontextmanager
async def agent(params: StdioServerParameters, name: str = "twin") -> AsyncIterator[ClientSession]:
    """One agent: the server process and the SDK's client session on it, as client ``name``."""
    info = types.Implementation(name=name, version="1")
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield session


async def queued(session: ClientSession, label: str) -> str:
    receipt = await session.call_tool("ask_user", yes_no_form(label, background=True))
    assert receipt.structured_content is not None, receipt
    assert receipt.structured_content["status"] == "queued"
    return str(receipt.structured_content["requestId"])


async def waited(session: ClientSession) -> list[str]:
    result = await session.call_tool("wait_for_answers", {})
    assert result.structured_content is not None, result
    return [entry["requestId"] for entry in result.structured_content["results"]]


async def test_two_agents_of_one_client_in_one_directory_keep_their_answers_apart_on_a_desk(
    tmp_path: Path, project: Path
) -> None:
    params = server(tmp_path, project)
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, agent(params) as first, agent(params) as second:
            mine = await queued(first, "First")
            theirs = await queued(second, "Second")
            shown = [await answer_displayed(desk), await answer_displayed(desk)]
            labels = [form.state.params.questions[0].label for form in shown]
            assert labels == ["First", "Second"]
            # Each wait gets its own agent's answer, never the other's.
            assert await waited(second) == [theirs]
            assert await waited(first) == [mine]
            # Two agents on the desk, two keys: the first keeps the default key, the
            # second gets the next free one.
            assert shown[0].key == f"twin@{project}"
            assert shown[1].key == f"twin #2@{project}"


async def test_twins_without_a_desk_keep_their_own_questions_and_a_restart_finds_its_own(
    tmp_path: Path, project: Path
) -> None:
    """No desk and no elicitation: each twin keeps its question in its own journal (the second
    was refused before, the first holding the one journal of their shared key). The second
    restarts while the first runs: it claims the second key again, so the answer to the
    question it kept before the restart reaches it, and the first's reaches the first."""
    params = server(tmp_path, project)
    with trio.fail_after(120):
        async with agent(params) as first:
            async with agent(params) as second:
                mine = await queued(first, "First")
                before_restart = await queued(second, "Second")
            async with agent(params) as restarted, open_desk(tmp_path) as desk:
                shown = {}
                for _form in range(2):
                    form = await answer_displayed(desk)
                    shown[form.state.params.questions[0].label] = form.key
                assert await waited(restarted) == [before_restart]
                assert await waited(first) == [mine]
    assert shown == {"First": f"twin@{project}", "Second": f"twin #2@{project}"}


async def test_an_explicit_key_is_shared_on_purpose(tmp_path: Path, project: Path) -> None:
    """Two servers given one ``--key`` are one agent on the desk, as the person asked: one
    queue, each answer reaching whichever asks first, once."""
    params = server(tmp_path, project, "--key", "team-bot")
    with trio.fail_after(120):
        async with (
            open_desk(tmp_path) as desk,
            agent(params) as first,
            agent(params, "other") as second,
        ):
            asked = [await queued(first, "First"), await queued(second, "Second")]
            keys = {(await answer_displayed(desk)).key for _form in asked}
            assert keys == {"team-bot"}
            assert sorted(await waited(second)) == sorted(asked)
            assert await waited(first) == []


def test_a_numbered_default_key_of_a_long_directory_stays_a_key(tmp_path: Path) -> None:
    """The run number fits in the 200 characters a key may have, after the shortened
    directory and its digest; the claims of one process are told apart as well."""
    from pi_agent_ask.mcp_common.journals import (
        MAX_KEY_LENGTH,
        check_key,
        claim_default_key,
        default_key,
    )

    deep = "/" + "/".join(["a-folder-of-the-project"] * 12)
    first = default_key("claude-code", deep)
    numbered = default_key("claude-code", deep, 12)
    assert len(first) == len(numbered) == MAX_KEY_LENGTH
    assert numbered.startswith("claude-code #12@…")
    assert numbered.rsplit("#", 1)[1] == first.rsplit("#", 1)[1]  # the whole one's digest
    check_key(numbered)
    claims = [claim_default_key(tmp_path, "claude-code", deep) for _ in range(3)]
    try:
        keys = [key for key, _fd in claims]
        assert keys == [
            first,
            default_key("claude-code", deep, 2),
            default_key("claude-code", deep, 3),
        ]
        os.close(claims[1][1])  # the second server ends: its key is the next one claimed
        claims[1] = claim_default_key(tmp_path, "claude-code", deep)
        assert claims[1][0] == keys[1]
    finally:
        for _key, fd in claims:
            os.close(fd)


async def read_event(stream: trio.abc.ReceiveStream, buffer: bytearray) -> dict[str, Any]:
    while b"\n" not in buffer:
        chunk = await stream.receive_some(65536)
        assert chunk, f"the session ended early: {bytes(buffer)!r}"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    event: dict[str, Any] = json.loads(line)
    return event


@pytest.mark.parametrize("with_desk", [False, True], ids=["no desk", "desk"])
async def test_two_claude_code_sessions_in_one_directory_each_hook_takes_its_own_answer(
    tmp_path: Path, project: Path, with_desk: bool
) -> None:
    """Two Claude Code sessions (stand-ins: ``tests/claude_stand_in.py``) in one project, each
    hook takes its own session's answers: with no desk from its own server, with a desk through
    its server from the desk's runtime of its own key. Before, the second server shared the
    first's key and served no hooks: the second session's hook took the first one's answers
    (and with a desk, the first hook took both sessions' answers)."""
    env = {**environment(tmp_path, project), "PYTHONPATH": str(ROOT)}
    with trio.fail_after(120):
        async with contextlib.AsyncExitStack() as stack:
            desk = await stack.enter_async_context(open_desk(tmp_path)) if with_desk else None
            sessions = [await stand_in(stack, [label], project, env) for label in ("Alpha", "Beta")]
            await each_says(sessions, "asked")
            if desk is not None:
                for _form in range(4):
                    await answer_displayed(desk)
            else:
                await each_says(sessions, "answered")
            contexts = await hook_contexts(sessions)
    assert_kept_apart(contexts)


Session = tuple[trio.Process, bytearray]
"""A stand-in Claude Code session (``tests/claude_stand_in.py``) and what it wrote but was
not read yet."""


async def stand_in(
    stack: contextlib.AsyncExitStack, args: list[str], cwd: Path, env: dict[str, str]
) -> Session:
    """A stand-in session with ``args`` (its label first), ended with ``stack``."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.claude_stand_in", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=cwd,
        env=env,
    )
    stack.push_async_callback(ended, process)
    return process, bytearray()


async def each_says(sessions: list[Session], name: str) -> None:
    """Each session's next event is ``name``."""
    for process, buffer in sessions:
        assert process.stdout is not None
        assert (await read_event(process.stdout, buffer))["event"] == name


async def hook_contexts(sessions: list[Session]) -> list[Any]:
    """Each session runs its hook once: the context each hook added (``None``: nothing)."""
    contexts = []
    for process, buffer in sessions:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all(b"go\n")
        event = await read_event(process.stdout, buffer)
        assert event["event"] == "hook"
        contexts.append(event["context"])
    return contexts


def assert_kept_apart(contexts: list[Any]) -> None:
    """Alpha's hook added Alpha's answers only, Beta's Beta's only."""
    alpha, beta = contexts
    assert alpha is not None and "Alpha, question 1?" in alpha and "Beta" not in alpha
    assert beta is not None and "Beta, question 1?" in beta and "Alpha" not in beta


async def ended(process: trio.Process) -> None:
    with trio.CancelScope(shield=True):
        if process.stdin is not None:
            await process.stdin.aclose()
        await process.wait()
