"""``pi-agent-ask mcp`` as a process, driven by the SDK's own stdio client, and the hook.

Each test launches ``python -m pi_agent_ask mcp`` with ``mcp.client.stdio.stdio_client`` in a
private home (agent directory, runtime directory, no desk connection file), so the default
session file, the default key and the hook socket are the real ones.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp.types as types
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from pi_agent_ask.mcp_common.journals import journal_path
from pi_agent_ask.mcp_common.tools import BACKGROUND_ANSWERS
from pi_agent_ask.mcp_server.elicitation import UNUSABLE_TO_AGENT
from pi_agent_ask.mcp_server.router import NO_FORMS_LOG
from tests.test_mcp import ASK, accept, background_of


@attrs.frozen
class Home:
    root: Path
    work: Path
    runtime: Path

    @property
    def state(self) -> Path:
        """The desk's default state directory in this home."""
        return self.root / ".pi" / "agent" / "pi-agent-ask" / "desk"

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.root),
            "PI_CODING_AGENT_DIR": str(self.root / "agent"),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PI_AGENT_ASK_DESK_FILE": str(self.root / "no-desk.json"),
        }


async def read_lines(stdout: trio.abc.ReceiveStream, count: int) -> bytes:
    """What a server process writes on ``stdout`` until ``count`` lines have come (more may
    come in the last chunk); its output ending before that fails the test."""
    received = b""
    while received.count(b"\n") < count:
        chunk = await stdout.receive_some(65536)
        assert chunk, received
        received += chunk
    return received


def hello(
    name: str = "raw", *, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The params of a raw client's ``initialize``."""
    return {
        "protocolVersion": version,
        "capabilities": capabilities or {},
        "clientInfo": {"name": name, "version": "1"},
    }


def opening(name: str = "raw") -> list[str]:
    """A raw client's first two lines on the stdio transport: ``initialize`` (id 0), then
    ``notifications/initialized``."""
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello(name)}
    return [json.dumps(initialize), INITIALIZED]


ORACLE = '"oracle" for question "db"'
INITIALIZED = '{"jsonrpc": "2.0", "method": "notifications/initialized"}'
TEAM_DESKS = "http://team-a.test/mcp"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    work = tmp_path / "project"
    work.mkdir()
    # A short runtime directory: unix socket paths are limited to about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="pia-") as runtime:
        yield Home(tmp_path, work.resolve(), Path(runtime))


@asynccontextmanager
async def server(
    home: Home, *args: str, elicit: Any = None, name: str = "test-client"
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", *args],
        env=home.env(),
        cwd=home.work,
    )
    with (home.root / "server.log").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit,
                client_info=types.Implementation(name=name, version="1"),
            ) as client,
        ):
            await client.initialize()
            yield client


async def call(client: ClientSession, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    result = await client.call_tool(name, arguments, **kw)
    assert isinstance(result, types.CallToolResult)
    return result


async def test_stdio_server_lists_tools_and_answers_through_elicitation(home: Home) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({"db": "pg", "db.note": "ok"})

    # A connection file left by a desk that is gone: --desk auto goes on locally.
    stale = {"url": "http://127.0.0.1:9/mcp", "token": "t", "pid": 2**22 + 1}
    (home.root / "no-desk.json").write_text(json.dumps(stale))
    with trio.fail_after(60):
        async with server(home, elicit=elicit) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            result = await call(client, "ask_user", ASK)
    assert names == ["ask_user", "wait_for_answers"]
    assert result.structured_content["answers"]["db"]["values"] == ["pg"]
    # The default journal: the one the desk keeps for this agent key (client name @ working
    # directory), so a desk started later shows its forms.
    key = f"test-client@{home.work}"
    assert journal_path(home.state, key).is_file()


async def test_stdio_without_elicitation_falls_back(home: Home) -> None:
    settings = home.root / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")  # a damaged settings file: defaults, and a notice
    log_file = home.root / "server.log"
    twice = {"questions": [*ASK["questions"], *ASK["questions"]]}  # a duplicate question id
    with trio.fail_after(60):
        async with server(home, "--desk", "off") as client:
            # Calls refused as invalid return no questions as text: the log says nothing of it.
            refused = [await call(client, "ask_user", bad) for bad in ({"questions": 1}, twice)]
            assert NO_FORMS_LOG not in log_file.read_text()
            result = await call(client, "ask_user", ASK)
            wait = await call(client, "wait_for_answers", {})
    assert refused[0].is_error and refused[1].structured_content["error"]["issues"]
    assert result.structured_content["cancelled"] is True
    # The questions as text, and what helps, in MCP's words (the host's TUI mode and
    # ``details.questions`` mean nothing to an MCP client).
    text = plain(result)
    assert "Postgres [pg]" in text
    assert "`pi-agent-ask desk`" in text
    assert wait.is_error
    assert "`pi-agent-ask desk`" in plain(wait)
    log = log_file.read_text()
    assert "pi-agent-ask: Config was invalid" in log  # the notice reached standard error
    assert f"pi-agent-ask: Config file {settings}: not valid JSON: " in log  # which, and why
    assert log.count(NO_FORMS_LOG) == 1  # and the server says the same there


async def test_queued_forms_and_answers_outlive_a_server_restart(home: Home) -> None:
    async def never(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await trio.sleep_forever()
        raise AssertionError

    answered: list[str] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        answered.append(params.message)
        return accept({"db": "lite"})

    with trio.fail_after(90):
        async with server(home, elicit=never) as client:
            receipt = await call(client, "ask_user", {**ASK, "background": True})
        request_id = receipt.structured_content["requestId"]
        # The client restarts: the same key finds the same journal and shows the form again.
        async with server(home, elicit=answer) as client:
            waited = await call(client, "wait_for_answers", {})
    assert answered
    [item] = waited.structured_content["results"]
    assert item["requestId"] == request_id
    assert item["result"]["answers"]["db"]["values"] == ["lite"]


async def test_call_cut_by_the_client_timeout_still_delivers_later(home: Home) -> None:
    release = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await release.wait()
        return accept({"db": "pg"})

    with trio.fail_after(60):
        async with server(home, elicit=elicit) as client:
            await client.list_tools()  # as clients do first (the server opens its runtime)
            with pytest.raises(MCPError):
                # The client's own tool timeout cuts the call (it sends a cancellation); the
                # form is shown by then and waits for the person (``release``).
                await client.call_tool("ask_user", ASK, read_timeout_seconds=2.0)
            await client.send_ping()
            release.set()
            waited = await call(client, "wait_for_answers", {})
            after = await call(client, "wait_for_answers", {})
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]
    assert after.structured_content["results"] == []


async def run_hook(home: Home, payload: dict[str, Any], *extra: str) -> tuple[int, str]:
    done = await trio.run_process(
        [sys.executable, "-m", "pi_agent_ask", "hook", "claude-code", *extra],
        stdin=json.dumps(payload).encode(),
        capture_stdout=True,
        capture_stderr=True,
        env={**home.env(), "PATH": "/usr/bin:/bin"},
        cwd=home.work,
        check=False,
    )
    return done.returncode, done.stdout.decode()


async def test_claude_code_hook_adds_waiting_answers_once(home: Home) -> None:
    second_shown = trio.Event()
    release = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if "Second" in params.message:
            second_shown.set()
            await release.wait()
            return accept({"q": "y"})
        return accept({"db": "pg"})

    second = {
        "questions": [
            {
                "id": "q",
                "label": "Second",
                "prompt": "Again?",
                "options": [{"label": "Yes", "value": "y"}, {"label": "No", "value": "n"}],
            }
        ]
    }
    payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(home.work), "prompt": "hi"}
    with trio.fail_after(90):
        status, nothing = await run_hook(home, payload)
        assert (status, nothing) == (0, "")  # no server: silent
        async with server(home, elicit=elicit, name="claude-code") as client:
            status, empty = await run_hook(home, payload)
            await call(client, "ask_user", {**ASK, "background": True})
            async with trio.open_nursery() as nursery:
                results: list[Any] = []

                async def ask_second() -> None:
                    results.append(await call(client, "ask_user", second))

                nursery.start_soon(ask_second)
                # Forms are shown one at a time: the first one is answered and recorded.
                await second_shown.wait()
                status_1, first = await run_hook(home, payload)
                status_2, repeat = await run_hook(
                    home, {**payload, "hook_event_name": "PostToolUse"}
                )
                release.set()
    assert (status, empty) == (0, "")
    assert (status_1, status_2, repeat) == (0, 0, "")
    output = json.loads(first)
    assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "Postgres" in output["hookSpecificOutput"]["additionalContext"]
    [second_result] = results
    assert second_result.structured_content["answers"]["q"]["values"] == ["y"]
    assert BACKGROUND_ANSWERS not in second_result.structured_content
    assert background_of(second_result) == []


async def test_explicit_desk_without_a_token_is_refused(home: Home) -> None:
    done = await trio.run_process(
        [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", "http://127.0.0.1:9/mcp"],
        stdin=(opening("x")[0] + "\n").encode(),
        capture_stdout=True,
        capture_stderr=True,
        env={**home.env(), "PATH": "/usr/bin:/bin"},
        cwd=home.work,
        check=False,
    )
    assert done.returncode == 2
    assert b"no token" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--key", ""], "The agent key is empty."),
        (["--key", "x" * 201], "The agent key is longer than 200 characters."),
        (["--key", "two\nlines"], "The agent key contains control or invisible characters."),
        (["--progress-interval", "nan"], "--progress-interval must be a number of seconds"),
        (["--progress-interval", "1e-9"], "--progress-interval must be a number of seconds, at"),
        (["--desk", "Off"], "a desk URL must start with http:// or https://, not 'Off'"),
        (["--desk", "localhost:8080"], "a desk URL must start with http:// or https://"),
        (["--desk", "http://a.test/mcp,http://b.test/mcp"], "PI_AGENT_ASK_TOKEN"),
        (
            ["--desk", f"{TEAM_DESKS},http://b.test/mcp", "--session", "s.pias", "--state", "d"],
            "a team's desks take no --session, --state: the store keeps",
        ),
    ],
)
async def test_options_a_server_could_not_serve_with_are_refused_at_start(
    home: Home, option: list[str], said: str
) -> None:
    """A key a desk refuses (it fails every call once a desk runs, naming a header the person
    never set), a progress interval that is no positive number (every waiting call an
    internal error), a --desk that is no URL (every call "the desk did not answer") and
    options a team's desks have no use for (ignored without a word) are usage errors at
    start, before anything is read from the client."""
    team = TEAM_DESKS in " ".join(option)
    done = await trio.run_process(
        [sys.executable, "-m", "pi_agent_ask", "mcp", *option],
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        env={**home.env(), **({"PI_AGENT_ASK_TOKEN": "pia_test"} if team else {})},
        cwd=home.work,
        check=False,
    )
    assert done.returncode == 2
    assert said in done.stderr.decode()
    assert done.stdout == b""


async def test_desk_auto_forwards_to_a_running_desk_with_the_default_key(home: Home) -> None:
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    desk_file = home.root / "no-desk.json"  # the file the server's environment names
    with trio.fail_after(90):
        async with (
            open_desk(home.root / "desk", desk_file=desk_file) as desk,
            server(home, name="tester") as client,
        ):
            receipt = await call(client, "ask_user", {**ASK, "background": True})
            shown = await answer_displayed(desk)
            waited = await call(client, "wait_for_answers", {})
    assert shown.key == f"tester@{home.work}"
    [item] = waited.structured_content["results"]
    assert item["requestId"] == receipt.structured_content["requestId"]


FORBIDDEN = ("interactive TUI mode", "details.questions", "SSE stream", "ExceptionGroup")


def plain(result: types.CallToolResult) -> str:
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    for words in FORBIDDEN:
        assert words not in text, text
    return text


async def test_a_desk_started_after_the_server_gets_its_kept_forms_and_waits(home: Home) -> None:
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    desk_file = home.root / "no-desk.json"
    with trio.fail_after(90):
        async with server(home, name="early") as client:
            # No desk, no elicitation: the form is kept, and the text says what helps.
            kept = await call(client, "ask_user", ASK)
            text = plain(kept)
            assert not kept.is_error
            assert text.startswith("No pi-agent-ask desk is running")
            assert "`pi-agent-ask desk`" in text
            request_id = kept.structured_content["requestId"]
            assert request_id in text
            log = (home.root / "server.log").read_text()
            assert "run `pi-agent-ask desk` in a terminal to answer it" in log
            async with trio.open_nursery() as nursery:
                waited: list[types.CallToolResult] = []

                done = trio.Event()

                async def wait() -> None:
                    waited.append(await call(client, "wait_for_answers", {}))
                    done.set()

                nursery.start_soon(wait)
                # The desk starts while the agent waits: no call of the agent is needed for
                # its kept form to appear there, and the wait goes on on the desk.
                async with open_desk(
                    home.root / "d", state_dir=home.state, desk_file=desk_file
                ) as desk:
                    shown = await answer_displayed(desk)
                    assert shown.key == f"early@{home.work}"
                    await done.wait()
    [result] = waited
    plain(result)
    [item] = result.structured_content["results"]
    assert item["requestId"] == request_id
    assert item["result"]["answers"]["db"]["values"] == ["pg"]


async def test_a_desk_that_stops_hands_its_forms_to_the_client_at_once(home: Home) -> None:
    """A client that shows forms itself, its question on a desk that then stops: the form
    comes to the client as soon as the server is back on its own runtime, without waiting for
    the agent's next call (an agent that ended its turn makes none)."""
    from pi_agent_ask.desk.testing import open_desk

    desk_file = home.root / "no-desk.json"
    shown = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        return accept({"db": "pg"})

    with trio.fail_after(90):
        async with server(home, elicit=elicit, name="idle") as client:
            async with open_desk(home.root / "d", state_dir=home.state, desk_file=desk_file):
                # The server notices the desk (the connection file) and forwards to it.
                await call(client, "ask_user", {**ASK, "background": True})
                assert not shown.is_set()
            await shown.wait()  # no call of the agent meanwhile
            waited = await call(client, "wait_for_answers", {})
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]


async def test_progress_of_a_wait_that_moves_to_a_desk_keeps_increasing(home: Home) -> None:
    """MCP requires each progress value of a request to be larger than the one before: a
    ``wait_for_answers`` that goes on on a desk started meanwhile does not count again from
    the start."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    desk_file = home.root / "no-desk.json"
    progress: list[float] = []
    ticks = trio.Condition()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        async with ticks:
            progress.append(value)
            ticks.notify_all()

    async def ticked(count: int) -> None:
        async with ticks:
            while len(progress) < count:
                await ticks.wait()

    with trio.fail_after(90):
        async with server(home, "--progress-interval", "0.2", name="counting") as client:
            await call(client, "ask_user", {**ASK, "background": True})
            async with trio.open_nursery() as nursery:
                done = trio.Event()

                async def wait() -> None:
                    await call(client, "wait_for_answers", {}, progress_callback=on_progress)
                    done.set()

                nursery.start_soon(wait)
                await ticked(3)  # counted by the server itself
                async with open_desk(
                    home.root / "d", state_dir=home.state, desk_file=desk_file
                ) as desk:
                    before = len(progress)
                    await ticked(before + 3)  # counted while the wait is on the desk
                    await answer_displayed(desk)
                    await done.wait()
    assert all(a < b for a, b in itertools.pairwise(progress)), progress


async def test_a_killed_desk_is_a_plain_sentence_and_its_forms_wait_for_the_next(
    home: Home,
) -> None:
    import signal
    import subprocess

    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    desk_file = home.root / "no-desk.json"
    command = [
        sys.executable,
        "-m",
        "pi_agent_ask",
        "desk",
        "--headless",
        "--state",
        str(home.state),
        "--settings",
        str(home.root / "desk-settings.json"),
    ]
    with trio.fail_after(120):
        desk_process = await trio.lowlevel.open_process(
            command, env={**home.env(), "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE
        )
        try:
            assert desk_process.stdout is not None
            assert b"listening at" in await desk_process.stdout.receive_some(4096)
            async with server(home, name="late") as client:
                first = await call(client, "ask_user", {**ASK, "background": True})
                assert first.structured_content["status"] == "queued"
                async with trio.open_nursery() as nursery:
                    waited: list[types.CallToolResult] = []

                    async def wait() -> None:
                        waited.append(await call(client, "wait_for_answers", {}))

                    nursery.start_soon(wait)
                    await trio.sleep(0.5)  # the wait is on the desk now
                    desk_process.send_signal(signal.SIGKILL)
                    await desk_process.wait()
                [cut] = waited
                assert cut.is_error
                assert plain(cut).startswith("The pi-agent-ask desk did not answer this call")
                # Later calls: the server's own runtime keeps the forms for the next desk.
                second = await call(client, "ask_user", {**ASK, "background": True})
                assert not second.is_error and "`pi-agent-ask desk`" in plain(second)
                async with open_desk(
                    home.root / "d2", state_dir=home.state, desk_file=desk_file
                ) as desk:
                    answered = [await answer_displayed(desk) for _ in range(2)]
                    assert {shown.key for shown in answered} == {f"late@{home.work}"}
                    result = await call(client, "wait_for_answers", {})
        finally:
            if desk_process.returncode is None:
                desk_process.kill()
                await desk_process.wait()
    ids = sorted(item["requestId"] for item in result.structured_content["results"])
    assert ids == sorted(
        [first.structured_content["requestId"], second.structured_content["requestId"]]
    )


async def test_hooks_work_with_a_long_agent_directory_and_no_runtime_dir(home: Home) -> None:
    agent = home.root / ("a-rather-long-directory-name-for-the-agent" * 3) / "agent"
    env = {**home.env(), "PI_CODING_AGENT_DIR": str(agent)}
    del env["XDG_RUNTIME_DIR"]

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({"db": "pg"})

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pi_agent_ask", "mcp"], env=env, cwd=home.work
    )
    payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(home.work), "prompt": "hi"}
    with trio.fail_after(60), (home.root / "server.log").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit,
                client_info=types.Implementation(name="claude-code", version="1"),
            ) as client,
        ):
            await client.initialize()
            await call(client, "ask_user", {**ASK, "background": True})
            await client.send_ping()
            done = await trio.run_process(
                [sys.executable, "-m", "pi_agent_ask", "hook", "claude-code"],
                stdin=json.dumps(payload).encode(),
                capture_stdout=True,
                env={**env, "PATH": "/usr/bin:/bin"},
                cwd=home.work,
            )
    assert "hooks are off" not in (home.root / "server.log").read_text()
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Postgres" in context


async def test_an_elicitation_the_client_fails_is_not_a_cancellation(home: Home) -> None:
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> Any:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the handler crashed")

    desk_file = home.root / "no-desk.json"
    with trio.fail_after(90):
        async with server(home, elicit=elicit, name="failing") as client:
            result = await call(client, "ask_user", ASK)
            # The client's failure is said as such: not "User cancelled", not an answer.
            text = plain(result)
            assert result.is_error
            assert "question form could not be used" in text
            assert "the handler crashed" in text and "cancelled" not in text.lower()
            # From now on forms are kept for a desk, and the first one was never lost.
            later = await call(client, "ask_user", {**ASK, "background": True})
            assert "`pi-agent-ask desk`" in plain(later)
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=desk_file
            ) as desk:
                answered = [await answer_displayed(desk) for _ in range(2)]
                waited = await call(client, "wait_for_answers", {})
    assert {shown.key for shown in answered} == {f"failing@{home.work}"}
    results = waited.structured_content["results"]
    assert len(results) == 2
    assert all(item["result"]["cancelled"] is False for item in results)
    log = (home.root / "server.log").read_text()
    assert "form could not be used (its elicitation request failed: the handler crashed)" in log


async def test_with_desk_off_a_form_the_client_fails_goes_back_to_the_agent(home: Home) -> None:
    """``--desk off``: no desk will come, so a client whose form cannot be used (its answer
    refused every time) leaves the questions to the agent, and every word says so: never
    "run `pi-agent-ask desk`" for a server that never uses one. The person hears it on the
    last try, the agent in the call's result, and the next ask_user returns its questions
    as text (it waited for a form nothing would show). The journal says so too: the question
    ends as not asked (an error outcome), where it stayed waiting, for a later server to show
    again after the agent had asked it in the conversation (or to keep waiting for ever).

    So do the background questions queued behind it, never sent to the client: each ends as
    not asked, and the agent hears of each once, with the failed call's result, together with
    the answer given in the client just before (not delivered yet): the json side that serves
    after it delivers no background answers, so they would have waited for ever."""
    from pi_agent_ask.mcp_server.elicitation import not_asked, refused_too_often
    from pi_agent_ask.persistence import history
    from pi_agent_ask.persistence.projection import JOURNAL
    from pi_agent_ask.persistence.session_file import SessionFile

    messages: list[str] = []
    release = trio.Event()
    queued = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if "Which database first?" in params.message:
            await release.wait()
            return accept({"db": "pg"})
        messages.append(params.message)
        return accept({"db": "oracle"})

    async def progress(value: float, total: float | None, message: str | None) -> None:
        queued.set()  # the foreground question waits (behind the first one)

    def background(prompt: str) -> dict[str, Any]:
        return {"questions": [{**ASK["questions"][0], "prompt": prompt}], "background": True}

    failed: list[Any] = []
    with trio.fail_after(60):
        async with server(
            home, "--desk", "off", "--progress-interval", "0.1", elicit=elicit
        ) as client:
            first = await call(client, "ask_user", background("Which database first?"))
            async with trio.open_nursery() as nursery:

                async def foreground() -> None:
                    failed.append(await call(client, "ask_user", ASK, progress_callback=progress))

                nursery.start_soon(foreground)
                await queued.wait()
                behind = [
                    await call(client, "ask_user", background(prompt))
                    for prompt in ("Which cache?", "Which queue?")
                ]
                release.set()
            later = await call(client, "ask_user", ASK)
    answered = first.structured_content["requestId"]
    kept = [receipt.structured_content["requestId"] for receipt in behind]
    journal = journal_path(home.state, f"test-client@{home.work}")
    with SessionFile.open(journal, readonly=True, create=False, projection=JOURNAL) as session:
        source = history.source_of_session(session)
        records = history.list_history(source)["records"]
        status = {record["requestId"]: record["status"] for record in records}
        [asked] = set(status) - {answered, *kept, later.structured_content["requestId"]}
        record = history.read_history(source, asked, "db")["record"]
    why = not_asked(refused_too_often(f"Unknown option value {ORACLE}."))
    assert record["error"] == why
    assert [status[request_id] for request_id in (answered, asked, *kept)] == [
        "answered",
        "error",
        "error",
        "error",
    ]
    assert sorted(status.values()).count("cancelled") == 1  # the text fallback's
    assert len(messages) == 3  # the failed form's tries; nothing after it reached the client
    assert f"if this answer cannot be used either, {UNUSABLE_TO_AGENT}." in messages[-1]
    [result] = failed
    text = plain(result)
    assert result.is_error and "question form could not be used" in text
    assert "--desk off" in text and "ask the user these questions yourself" in text
    assert "journal records the question as not asked" in text
    assert "`pi-agent-ask desk`" not in text and "wait_for_answers" not in text
    delivered = {item["details"]["requestId"]: item["details"] for item in background_of(result)}
    assert set(delivered) == {answered, *kept}
    assert delivered[answered]["result"]["answers"]["db"]["values"] == ["pg"]
    assert [delivered[request_id]["error"] for request_id in kept] == [why, why]
    assert all(f"Background answer [{request_id}]" in text for request_id in delivered)
    assert all(background_of(receipt) == [] for receipt in behind)
    assert background_of(later) == []  # each once
    assert later.structured_content["cancelled"] is True
    assert "Postgres [pg]" in plain(later)
    log = (home.root / "server.log").read_text()
    assert "with --desk off nothing else shows forms" in log
    assert "questions are kept for a desk" not in log


async def test_a_kept_ask_with_a_background_that_is_not_a_boolean_is_refused(home: Home) -> None:
    settings = home.root / "agent" / "extensions" / "pi-agent-ask.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    with trio.fail_after(60):
        # No desk and no elicitation: forms are kept for a desk, yet the arguments are the
        # model's and must pass the schema as anywhere else.
        async with server(home) as client:
            refused = await call(client, "ask_user", {**ASK, "background": "yes"})
            listed = await call(client, "list_ask_history", {})
    assert refused.is_error
    assert "background: must be boolean, not string" in plain(refused)
    assert listed.structured_content["total"] == 0  # nothing was queued


async def test_a_long_answer_reaches_the_agent_through_the_forwarder(home: Home) -> None:
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    # A typed answer of 400 KB (a pasted log) comes back in the text, in the compact answers
    # and in the full result: one message of more than 1 MiB from the desk.
    long_text = "line of a pasted log\n" * 20_000
    with trio.fail_after(90):
        async with (
            open_desk(home.root / "desk", desk_file=home.root / "no-desk.json") as desk,
            server(home) as client,
        ):
            await call(client, "ask_user", {**ASK, "background": True})
            await answer_displayed(desk, {"db": {"customText": long_text}})
            waited = await call(client, "wait_for_answers", {})
    plain(waited)
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["db"]["customText"] == long_text.strip()


async def test_a_call_too_large_for_the_desk_is_refused_in_words_through_the_forwarder(
    home: Home,
) -> None:
    from pi_agent_ask.desk.testing import open_desk

    huge = {"questions": [{"id": "q", "prompt": "p" * 5_000_000, "options": [{"value": "v"}]}]}
    with trio.fail_after(90):
        async with (
            open_desk(home.root / "desk", desk_file=home.root / "no-desk.json"),
            server(home) as client,
        ):
            with pytest.raises(MCPError, match="larger than the 4194304 bytes"):
                await client.call_tool("ask_user", huge)
            after = await call(client, "ask_user", {**ASK, "background": True})
    assert after.structured_content["pendingRequests"] == 1  # the same desk, nothing else asked
    assert "Traceback" not in (home.root / "server.log").read_text()


async def test_every_message_the_sdk_cannot_read_is_answered(home: Home) -> None:
    """Lines the SDK's stdio transport cannot read (it drops them) get a JSON-RPC error, so
    no client waits forever for the answer to a request it sent."""
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}'
    lone = '{"name": "ask_user", "arguments": {"questions": [{"id": "a\\ud800b"}]}}'
    deep = '{"name": "ask_user", "arguments": {"questions": %s}}' % ("[" * 300 + "]" * 300)
    lines = [
        *opening(),
        "this is not JSON",
        call % (1, lone),
        call % (2, deep),
        '[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]',
        '{"id": 4, "method": "ping"}',
        '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x\\udc00"}',
        '{"jsonrpc": "2.0", "id": 5, "method": "ping"}',
    ]
    with trio.fail_after(60), (home.root / "server.log").open("w") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", "off"],
            stdin=-1,
            stdout=-1,
            stderr=log,
            env=home.env(),
            cwd=home.work,
        )
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all("".join(line + "\n" for line in lines).encode())
        received = await read_lines(process.stdout, 7)
        await process.stdin.aclose()
        assert await process.wait() == 0
    answers = [json.loads(line) for line in received.splitlines()]
    errors = {a["id"]: a["error"] for a in answers if "error" in a and a["id"] is not None}
    parse, batch = (a["error"] for a in answers if a["id"] is None)
    assert [a["id"] for a in answers if "result" in a] == [0, 5]  # the ping after them all
    assert parse["code"] == -32700 and parse["message"].startswith("Parse error: ")
    assert batch["code"] == -32600 and "batch" in batch["message"]
    assert errors[1]["code"] == -32600
    assert "params.arguments.questions[0].id: is not valid Unicode" in errors[1]["message"]
    assert errors[2]["code"] == -32600
    assert "is nested deeper than 64 levels" in errors[2]["message"]
    assert errors[4]["code"] == -32600 and "JSON-RPC 2.0" in errors[4]["message"]
    assert (home.root / "server.log").read_text() == ""


async def raw_exchange(
    home: Home, lines: list[str], answers: int, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Send ``lines`` (UTF-8) to ``pi-agent-ask mcp --desk off`` and read ``answers`` lines
    back (``env``: added to the home's environment)."""
    with trio.fail_after(60), (home.root / "server.log").open("w") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", "off"],
            stdin=-1,
            stdout=-1,
            stderr=log,
            env={**home.env(), **(env or {})},
            cwd=home.work,
        )
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all("".join(line + "\n" for line in lines).encode())
        received = await read_lines(process.stdout, answers)
        await process.stdin.aclose()
        assert await process.wait() == 0
    return [json.loads(line) for line in received.splitlines()]


async def test_requests_the_sdk_refuses_say_what_is_wrong(home: Home) -> None:
    """The SDK answers params that do not fit the protocol, and any request before
    ``initialize``, with a bare ``Invalid request parameters``; the client is told where and
    why instead, and the server goes on."""
    request = '{"jsonrpc": "2.0", "id": %d, "method": "%s", "params": %s}'
    lines = [
        request % (1, "tools/list", "{}"),
        request % (2, "initialize", json.dumps(hello())),
        INITIALIZED,
        request % (3, "tools/call", '{"name": "ask_user", "arguments": [1, 2]}'),
        request % (4, "tools/call", '{"arguments": {}}'),
        request % (5, "tools/call", '{"name": 5}'),
        request % (6, "ping", "{}"),
    ]
    answers = {answer["id"]: answer for answer in await raw_exchange(home, lines, 6)}
    assert answers[2]["result"]["serverInfo"]["name"] == "pi-agent-ask"
    assert answers[6]["result"] == {}
    early = answers[1]["error"]
    assert early["code"] == -32602
    assert "initialize" in early["message"], early
    wrong = {n: answers[n]["error"] for n in (3, 4, 5)}
    assert {error["code"] for error in wrong.values()} == {-32602}
    assert "params.arguments: Input should be a valid object" in wrong[3]["message"]
    assert "params.name: Field required" in wrong[4]["message"]
    assert "params.name: Input should be a valid string" in wrong[5]["message"]
    assert wrong[3]["data"] == {
        "issues": [{"path": "params.arguments", "message": "Input should be a valid object"}]
    }
    assert (home.root / "server.log").read_text() == ""


async def test_standard_input_is_read_as_utf_8_whatever_the_locale(home: Home) -> None:
    """MCP's stdio messages are UTF-8; a server started in a locale that is not (here the
    plain C locale, with Python's switch to UTF-8 turned off) reads them as UTF-8 all the
    same, and answers in UTF-8."""
    ask = {**ASK, "questions": [{**ASK["questions"][0], "prompt": "Café 日本?"}]}
    call = {"name": "ask_user", "arguments": ask}
    lines = [
        *opening(),
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, ensure_ascii=False
        ),
    ]
    legacy = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    answers = await raw_exchange(home, lines, 2, env=legacy)
    result = answers[1]["result"]
    assert not result["isError"], result
    assert "Café 日本?" in result["content"][0]["text"]


async def test_a_client_of_the_2025_06_18_protocol_gets_forms_it_can_show(home: Home) -> None:
    """Elicitation came with protocol 2025-06-18, whose form fields are strings, numbers,
    booleans and string enums (``enum`` with ``enumNames``); titled choices (``oneOf``) and
    multi-select arrays came later. A client that negotiated 2025-06-18 gets each choice of a
    single-select question as an enum and each option of a multi-select one as a boolean,
    and its answer is the person's answer."""
    older = hello("older", version="2025-06-18", capabilities={"elicitation": {}})
    ask = {
        "questions": [
            ASK["questions"][0],
            {
                "id": "langs",
                "prompt": "Which languages?",
                "type": "multi",
                "options": [
                    {"label": "Python", "value": "py", "recommended": True},
                    {"label": "Rust", "value": "rs"},
                    {"label": "Go", "value": "go"},
                ],
            },
        ]
    }
    with trio.fail_after(60), (home.root / "server.log").open("w") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp", "--desk", "off"],
            stdin=-1,
            stdout=-1,
            stderr=log,
            env=home.env(),
            cwd=home.work,
        )
        assert process.stdin is not None and process.stdout is not None
        buffer = [b""]

        async def send(message: dict[str, Any]) -> None:
            assert process.stdin is not None
            await process.stdin.send_all(json.dumps(message).encode() + b"\n")

        async def receive() -> dict[str, Any]:
            assert process.stdout is not None
            while b"\n" not in buffer[0]:
                chunk = await process.stdout.receive_some(65536)
                assert chunk, buffer[0]
                buffer[0] += chunk
            line, buffer[0] = buffer[0].split(b"\n", 1)
            received: dict[str, Any] = json.loads(line)
            return received

        await send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": older})
        assert (await receive())["result"]["protocolVersion"] == "2025-06-18"
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "ask_user", "arguments": ask}
        await send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        request = await receive()
        assert request["method"] == "elicitation/create"
        properties = request["params"]["requestedSchema"]["properties"]
        content = {"db": "lite", "langs.1": True, "langs.2": False, "langs.3": True}
        await send(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": content},
            }
        )
        result = (await receive())["result"]
        await process.stdin.aclose()
        assert await process.wait() == 0
    assert properties["db"] == {
        "type": "string",
        "title": "Q1",
        "description": "Which database?",
        "enum": ["pg", "lite"],
        "enumNames": ["Postgres", "SQLite"],
    }
    assert properties["langs.1"] == {
        "type": "boolean",
        "title": "Q2: Python (recommended)",
        "description": "Which languages?",
    }
    assert properties["langs.3"] == {"type": "boolean", "title": "Q2: Go"}
    assert "langs" not in properties
    for field in properties.values():
        assert field["type"] in ("string", "number", "integer", "boolean"), field
        assert "oneOf" not in field, field
    answers = result["structuredContent"]["answers"]
    assert answers["db"]["values"] == ["lite"]
    assert answers["langs"]["values"] == ["py", "go"]


async def test_a_request_whose_id_is_no_string_or_integer_is_answered(home: Home) -> None:
    """The SDK reads ``{"id": null, "method": "ping"}`` (or an id that is a number with a
    fraction, a boolean, an object) as a notification and drops it: its client would wait
    forever. It gets ``-32600`` with ``id`` null instead (MCP: an id is a string or an
    integer, never null); real notifications still get nothing."""
    lines = [
        *opening(),
        '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
        '{"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}',
        '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}',
        '{"jsonrpc": "2.0", "id": 2, "method": "ping"}',
    ]
    answers = await raw_exchange(home, lines, 6)
    assert answers[0]["id"] == 0 and answers[-1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    refused = answers[1:-1]
    assert [answer["id"] for answer in refused] == [None] * 4
    for answer in refused:
        assert answer["error"]["code"] == -32600
        assert "id" in answer["error"]["message"], answer


async def test_a_client_killed_during_a_call_ends_the_server_quietly(home: Home) -> None:
    """A client that dies while a call waits (its pipes close under the server, which still
    answers the call "Connection closed") is an ordinary end: exit 0, nothing on standard
    error but the server's own lines, and the question kept for a desk."""
    import subprocess

    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}'
    lines = [
        *opening("doomed"),
        call % (1, json.dumps({"name": "ask_user", "arguments": {**ASK, "background": True}})),
        call % (2, '{"name": "wait_for_answers", "arguments": {}}'),
    ]
    with trio.fail_after(90):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=home.env(),
            cwd=home.work,
        )
        assert process.stdin and process.stdout and process.stderr
        await process.stdin.send_all("".join(line + "\n" for line in lines).encode())
        # initialize and the receipt; the wait goes on
        await read_lines(process.stdout, 2)
        await process.stdout.aclose()
        await process.stdin.aclose()
        said = b""
        while chunk := await process.stderr.receive_some(65536):
            said += chunk
        assert await process.wait() == 0, said.decode()
        for line in said.decode().splitlines():
            assert line.startswith("pi-agent-ask: "), said.decode()
        async with open_desk(home.root / "d", state_dir=home.state) as desk:
            shown = await answer_displayed(desk)
    assert shown.key == f"doomed@{home.work}"


async def test_a_second_server_of_one_key_keeps_no_question_it_cannot_keep(home: Home) -> None:
    """Two servers given one ``--key`` share a journal, which the first server holds. With no
    desk and no elicitation the second cannot keep a question where a desk will find it: it
    says so instead of queuing it in memory, where no desk ever sees it. (Without ``--key``
    the second takes a key of its own: ``test_mcp_agent_keys.py``.)"""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    shared = ("--key", "twin")
    with trio.fail_after(90):
        async with server(home, *shared) as first, server(home, *shared) as second:
            kept = await call(first, "ask_user", {**ASK, "background": True})
            refused = await call(second, "ask_user", {**ASK, "background": True})
            assert refused.is_error
            text = plain(refused)
            assert "Nothing was asked" in text and "`pi-agent-ask desk`" in text
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk:
                await answer_displayed(desk)
                later = await call(second, "ask_user", {**ASK, "background": True})
                await answer_displayed(desk)
                waited = await call(first, "wait_for_answers", {})
    # One key, one queue: each answer reaches whichever of the two asks first, once.
    ids = [item["requestId"] for item in waited.structured_content["results"]]
    ids += [entry["details"]["requestId"] for entry in background_of(later)]
    assert sorted(ids) == sorted(
        [kept.structured_content["requestId"], later.structured_content["requestId"]]
    )


async def test_an_agent_in_a_directory_with_non_ascii_letters_uses_the_desk(home: Home) -> None:
    """The default key names the working directory, which may hold any letters, and HTTP
    headers are ASCII: the key goes percent-encoded (``X-Pi-Agent-Ask-Key-UTF8``), and the desk
    reads the same key the server's own journal has, so kept forms move to the desk."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    work = home.work / "café-日本"
    work.mkdir()
    home = attrs.evolve(home, work=work)
    with trio.fail_after(90):
        async with server(home, name="tester") as client:
            kept = await call(client, "ask_user", {**ASK, "background": True})
            async with open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk:
                first = await answer_displayed(desk)
                forwarded = await call(client, "ask_user", {**ASK, "background": True})
                assert not forwarded.is_error, plain(forwarded)
                second = await answer_displayed(desk)
                waited = await call(client, "wait_for_answers", {})
    assert first.key == second.key == f"tester@{work}"
    ids = [item["requestId"] for item in waited.structured_content["results"]]
    ids += [entry["details"]["requestId"] for entry in background_of(forwarded)]
    assert sorted(ids) == sorted(
        [kept.structured_content["requestId"], forwarded.structured_content["requestId"]]
    )


async def test_an_agent_deep_in_the_file_tree_uses_the_desk(home: Home) -> None:
    """The default key names the working directory, whose path can be longer than a key may
    be: the key keeps the client's name and the end of the path, and the desk takes it."""
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    work = home.work / ("a-rather-deep-directory-name/" * 8) / "project"
    work.mkdir(parents=True)
    home = attrs.evolve(home, work=work)
    with trio.fail_after(90):
        async with (
            open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk,
            server(home, name="tester") as client,
        ):
            asked = await call(client, "ask_user", {**ASK, "background": True})
            assert not asked.is_error, plain(asked)
            shown = await answer_displayed(desk)
            waited = await call(client, "wait_for_answers", {})
    assert len(shown.key) <= 200
    assert shown.key.startswith("tester@…") and shown.key.split("#")[0].endswith("/project")
    [item] = waited.structured_content["results"]
    assert item["requestId"] == asked.structured_content["requestId"]


async def test_an_agent_in_a_directory_named_with_a_tab_uses_the_desk(home: Home) -> None:
    from pi_agent_ask.desk.testing import answer_displayed, open_desk

    work = home.work / "tab\there"
    work.mkdir()
    home = attrs.evolve(home, work=work)
    with trio.fail_after(90):
        async with (
            open_desk(
                home.root / "d", state_dir=home.state, desk_file=home.root / "no-desk.json"
            ) as desk,
            server(home, name="tester") as client,
        ):
            asked = await call(client, "ask_user", {**ASK, "background": True})
            assert not asked.is_error, plain(asked)
            shown = await answer_displayed(desk)
    assert shown.key == f"tester@{home.work.parent}/tab?here"  # what no key may hold, as ?


async def test_an_export_through_the_desk_lands_in_the_agents_directory(home: Home) -> None:
    """A relative export path is relative to the agent's working directory, also when the
    desk (a process with a working directory of its own) writes the file."""
    from pi_agent_ask.desk.testing import open_desk

    settings = home.root / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    (home.work / "notes").mkdir()
    with trio.fail_after(90):
        async with (
            open_desk(home.root / "d", desk_file=home.root / "no-desk.json", settings=settings),
            server(home) as client,
        ):
            await call(client, "ask_user", {**ASK, "background": True})
            exported = await call(client, "export_ask_history", {"path": "notes/asked.md"})
    assert not exported.is_error, plain(exported)
    assert exported.structured_content["path"] == str(home.work / "notes" / "asked.md")
    assert "Which database?" in (home.work / "notes" / "asked.md").read_text()


async def test_a_desk_that_stops_under_calls_leaves_plain_words_in_the_log(home: Home) -> None:
    """The agent's calls say what happened; the log (the client shows it) has the server's
    sentences, not the SDK's tracebacks of the connections the desk closed."""
    from pi_agent_ask.desk.testing import open_desk

    desk_file = home.root / "no-desk.json"
    results: list[types.CallToolResult] = []
    with trio.fail_after(90):
        async with server(home) as client:
            for attempt in range(2):
                async with (
                    open_desk(home.root / f"d{attempt}", desk_file=desk_file) as desk,
                    trio.open_nursery() as nursery,
                ):

                    async def ask() -> None:
                        results.append(await call(client, "ask_user", ASK))

                    nursery.start_soon(ask)
                    await desk.board.wait_for(lambda board: board.current is not None)
                    desk.cancel()
            later = await call(client, "ask_user", {**ASK, "background": True})
    assert all("desk stopped while this call waited" in plain(result) for result in results)
    assert "`pi-agent-ask desk`" in plain(later)
    log = (home.root / "server.log").read_text()
    assert "Traceback" not in log, log


async def test_a_desk_that_refuses_the_token_is_said_so(home: Home) -> None:
    """``--desk URL`` with a token of an earlier start of that desk: every call says the desk
    refused the token (not that it stopped), and listing the tools fails in the same words."""
    from pi_agent_ask.desk.testing import open_desk

    with trio.fail_after(90):
        async with open_desk(home.root / "d", desk_file=home.root / "desk.json") as desk:
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "pi_agent_ask", "mcp", "--desk", desk.address.url],
                env={**home.env(), "PI_AGENT_ASK_DESK_TOKEN": "an-old-token"},
                cwd=home.work,
            )
            with (home.root / "server.log").open("a") as log:
                async with (
                    stdio_client(params, errlog=log) as (read, write),
                    ClientSession(read, write) as client,
                ):
                    await client.initialize()
                    with pytest.raises(MCPError, match="refused this server's token"):
                        await client.list_tools()
                    refused = await call(client, "ask_user", {**ASK, "background": True})
    assert refused.is_error
    assert "refused this server's token" in plain(refused) and "Nothing was asked" in plain(refused)
