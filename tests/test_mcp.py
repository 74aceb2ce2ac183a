"""The MCP tools layer and the local server, driven by the SDK's own client in memory.

Each test runs the real server objects (``open_local``: runtime, ``AgentTools``, elicitation
surface, hook endpoint) and talks to them with ``mcp.client.session.ClientSession`` over the
SDK's in-memory streams, on the test's own Trio loop.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp.types as types
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.shared.memory import create_client_server_memory_streams

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import remote_apply
from pi_agent_ask.form import schemas
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.tools import in_format, tool_definitions_for
from pi_agent_ask.form.types import AskParams, Option, Question
from pi_agent_ask.mcp_common.tools import (
    BACKGROUND_ANSWERS,
    NO_FORMS_HEAD,
    NO_FORMS_TAIL,
    NO_FORMS_WAIT_TEXT,
)
from pi_agent_ask.mcp_server.elicitation import (
    MAX_ATTEMPTS,
    UNUSABLE_KEPT,
    elicitation_schema,
    response_from_elicitation,
)
from pi_agent_ask.mcp_server.hook_command import choose_server, hook_output, take_from
from pi_agent_ask.mcp_server.hook_socket import slug
from pi_agent_ask.mcp_server.stdio import ClientHello, LocalServer, open_local, parse_hello

ASK = {
    "questions": [
        {
            "id": "db",
            "prompt": "Which database?",
            "options": [
                {"label": "Postgres", "value": "pg"},
                {"label": "SQLite", "value": "lite"},
            ],
        }
    ]
}
MULTI_ASK = {
    "title": "Setup",
    "questions": [
        {
            "id": "langs",
            "prompt": "Which languages?",
            "type": "multi",
            "options": [
                {"label": "Python", "value": "py", "recommended": True},
                {"label": "Rust", "value": "rs", "description": "fast"},
            ],
        }
    ],
}

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def accept(content: dict[str, Any]) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


@attrs.define(eq=False)
class Harness:
    client: ClientSession
    local: LocalServer
    completed: list[dict[str, Any]]

    async def call(self, name: str, arguments: dict[str, Any], **kw: Any) -> types.CallToolResult:
        result = await self.client.call_tool(name, arguments, **kw)
        assert isinstance(result, types.CallToolResult)
        return result

    async def wait_completed(self, count: int) -> None:
        while len(self.completed) < count:
            await trio.testing.wait_all_tasks_blocked()


@asynccontextmanager
async def connected(
    tmp_path: Path,
    *,
    elicit: Elicit | None = None,
    progress_interval: float = 10.0,
    settings: dict[str, Any] | None = None,
    hook_dir: Path | None = None,
    key: str = "test-client@here",
    on_failure: Callable[[str], None] | None = None,
) -> AsyncIterator[Harness]:
    settings_file = tmp_path / "settings.json"
    if settings is not None:
        settings_file.write_text(json.dumps(settings))
    hello = ClientHello("test-client", elicitation=elicit is not None)
    with tempfile.TemporaryDirectory(prefix="pia-") as short:
        async with (
            open_local(
                hello,
                key=key,
                session=tmp_path / "agent.pias",
                settings=settings_file,
                cwd=tmp_path,
                progress_interval=progress_interval,
                hook_dir=hook_dir or Path(short),
                on_elicitation_failure=on_failure,
            ) as local,
            create_client_server_memory_streams() as (client_streams, server_streams),
            trio.open_nursery() as nursery,
        ):
            completed: list[dict[str, Any]] = []
            local.runtime.events.on(ev.COMPLETED, completed.append)
            nursery.start_soon(
                functools.partial(
                    local.server.run,
                    server_streams[0],
                    server_streams[1],
                    local.server.create_initialization_options(),
                )
            )
            async with ClientSession(
                client_streams[0], client_streams[1], elicitation_callback=elicit
            ) as client:
                await client.initialize()
                yield Harness(client, local, completed)
            nursery.cancel_scope.cancel()


def background_of(result: types.CallToolResult) -> list[dict[str, Any]]:
    return list((result.structured_content or {}).get(BACKGROUND_ANSWERS, []))


# -- listing -------------------------------------------------------------------------------


async def test_tools_list_carries_the_contract_schemas(tmp_path: Path) -> None:
    settings = {"schemaVersion": 6, "behaviour": {"historyTools": True}}
    with trio.fail_after(30):
        async with connected(tmp_path, settings=settings) as h:
            listed = {tool.name: tool for tool in (await h.client.list_tools()).tools}
    assert list(listed) == [
        "ask_user",
        "wait_for_answers",
        "list_ask_history",
        "read_ask_history",
        "export_ask_history",
    ]
    ask = listed["ask_user"]
    expected_input = schemas.ask_user_input_schema(background=True)
    assert {k: v for k, v in ask.input_schema.items() if k != "type"} == {
        k: v for k, v in expected_input.items() if k != "type"
    }
    assert ask.input_schema["type"] == "object"
    assert ask.output_schema is not None
    assert ask.output_schema["anyOf"] == schemas.ask_user_output_schema()["anyOf"]
    assert ask.output_schema["type"] == "object"  # MCP's rule for a tool schema's root
    wait = listed["wait_for_answers"]
    assert wait.output_schema is not None
    assert wait.output_schema["anyOf"] == schemas.wait_for_answers_output_schema()["anyOf"]
    assert wait.annotations is not None and wait.annotations.read_only_hint is True
    assert listed["export_ask_history"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert listed["list_ask_history"].output_schema is None
    # Titles, hints and exposure are the ones tool_definitions(format="mcp") gives, one table.
    for shape in tool_definitions_for(history_tools=True, question_mode="standard"):
        [mcp_shape] = in_format([shape], "mcp")
        tool = listed[mcp_shape["name"]]
        assert tool.title == mcp_shape["title"]
        assert tool.annotations is not None
        assert (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            == (mcp_shape["annotations"])
        )
        assert tool.meta == mcp_shape["_meta"]


async def test_background_only_mode_lists_no_wait(tmp_path: Path) -> None:
    settings = {"schemaVersion": 6, "behaviour": {"questionMode": "background-only"}}
    with trio.fail_after(30):
        async with connected(tmp_path, settings=settings) as h:
            names = [tool.name for tool in (await h.client.list_tools()).tools]
    assert names == ["ask_user"]


# -- elicitation ---------------------------------------------------------------------------


async def test_foreground_ask_is_answered_through_elicitation(tmp_path: Path) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        return accept({"db": "lite", "db.note": "small data"})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            result = await h.call("ask_user", ASK)
    assert not result.is_error
    structured = result.structured_content
    assert structured is not None
    assert structured["cancelled"] is False
    assert structured["answers"]["db"]["values"] == ["lite"]
    assert structured["answers"]["db"]["note"] == "small data"
    assert "status" not in structured  # an answer, not a receipt
    assert BACKGROUND_ANSWERS not in structured
    [params] = seen
    schema = params.requested_schema  # type: ignore[union-attr]
    assert schema["properties"]["db"]["oneOf"] == [
        {"const": "pg", "title": "Postgres"},
        {"const": "lite", "title": "SQLite"},
    ]
    assert "Which database?" in params.message


async def test_declined_elicitation_dismisses_the_form(tmp_path: Path) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            result = await h.call("ask_user", ASK)
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["cancelled"] is True
    assert result.structured_content["answers"] == {}


async def test_a_value_chosen_twice_counts_once_without_asking_again(tmp_path: Path) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        return accept({"langs": ["rs", "py", "rs"]})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            result = await h.call("ask_user", MULTI_ASK)
    assert result.structured_content is not None
    assert result.structured_content["answers"]["langs"]["values"] == ["py", "rs"]
    assert len(seen) == 1  # never asked again
    schema = seen[0].requested_schema  # type: ignore[union-attr]
    assert "uniqueItems" not in schema["properties"]["langs"]  # what the docs say is sent


async def test_an_answer_the_form_refuses_is_asked_again_with_the_reason(tmp_path: Path) -> None:
    messages: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        if len(messages) == 1:
            # Hostile or confused client: a value that is no option, and the wrong type.
            return accept({"db": "oracle", "db.note": 5})
        return accept({"db": "pg"})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            result = await h.call("ask_user", ASK)
    assert result.structured_content is not None
    assert result.structured_content["answers"]["db"]["values"] == ["pg"]
    assert len(messages) == 2
    assert messages[1].startswith("That answer could not be used:")


async def test_an_answer_refused_every_time_leaves_the_question_pending(tmp_path: Path) -> None:
    """A client whose answers the form refuses on every attempt has not shown the form well:
    that is its failure, told in words, never the person's cancellation; the question stays
    pending for whatever shows forms next (``router.py`` keeps it for a desk)."""
    messages: list[str] = []
    failures: list[str] = []
    returned: list[types.CallToolResult] = []
    settled = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return accept({"db": "oracle"})

    def on_failure(why: str) -> None:
        failures.append(why)
        settled.set()

    async def ask(h: Harness) -> None:
        returned.append(await h.call("ask_user", ASK))
        settled.set()

    with trio.fail_after(30):
        async with (
            connected(tmp_path, elicit=elicit, on_failure=on_failure) as h,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(ask, h)
            await settled.wait()
            await trio.testing.wait_all_tasks_blocked()
            stats = await h.local.runtime.statistics()
            nursery.cancel_scope.cancel()
    assert returned == []  # the call still waits (the router cuts it, saying why)
    assert len(messages) == MAX_ATTEMPTS
    # The person sees nothing in the client after the last refusal: the last try says first
    # what becomes of the question then (here: it waits for a desk).
    last_try = f"This is the last try: if this answer cannot be used either, {UNUSABLE_KEPT}."
    assert [last_try in message for message in messages] == [False] * (MAX_ATTEMPTS - 1) + [True]
    assert h.completed == []  # no outcome: neither answered nor cancelled
    assert len(stats.pending) == 1
    assert failures == [
        f"the answer given in it was refused {MAX_ATTEMPTS} times, the last time because: "
        'Unknown option value "oracle" for question "db"'
    ]


async def test_background_answer_is_appended_to_the_next_result_exactly_once(
    tmp_path: Path,
) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({"langs": ["py", "rs"], "langs.custom": "Go"})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            receipt = await h.call("ask_user", {**MULTI_ASK, "background": True})
            assert receipt.structured_content is not None
            assert receipt.structured_content["status"] == "queued"
            request_id = receipt.structured_content["requestId"]
            await h.wait_completed(1)
            # Any tool call, even a failing one, carries the waiting answer.
            carrier = await h.call("ask_user", {"questions": "nope"})
            after = await h.call("ask_user", {"questions": "nope"})
    assert carrier.is_error
    [entry] = background_of(carrier)
    assert entry["details"]["requestId"] == request_id
    answer = entry["details"]["result"]["answers"]["langs"]
    assert answer["values"][:2] == ["py", "rs"]
    assert answer["customText"] == "Go"
    assert "Python" in entry["text"]
    assert any(
        isinstance(block, types.TextContent) and request_id in block.text
        for block in carrier.content
    )
    assert background_of(after) == []


async def test_wait_for_answers_sends_progress_while_it_waits(tmp_path: Path) -> None:
    progress: list[float] = []
    enough = trio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        if len(progress) >= 3:
            enough.set()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await enough.wait()  # the person answers only after three progress notifications
        return accept({"db": "pg"})

    with trio.fail_after(60):
        async with connected(tmp_path, elicit=elicit, progress_interval=0.01) as h:
            receipt = await h.call("ask_user", {**ASK, "background": True})
            assert receipt.structured_content is not None
            request_id = receipt.structured_content["requestId"]
            waited = await h.call("wait_for_answers", {}, progress_callback=on_progress)
            after = await h.call("wait_for_answers", {})
    assert waited.structured_content is not None
    assert waited.structured_content["status"] == "complete"
    [item] = waited.structured_content["results"]
    assert item["requestId"] == request_id
    assert item["result"]["answers"]["db"]["values"] == ["pg"]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert len(progress) >= 3
    assert background_of(waited) == []
    # Delivered once: a second wait has nothing left to return.
    assert after.structured_content is not None
    assert after.structured_content["results"] == []


async def test_progress_counts_a_fractional_interval_in_its_decimals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``--progress-interval 0.1`` counts 0.1, 0.2, 0.3, ... as written, never with a binary
    float's noise (0.30000000000000004), on one side and on the next one a call moves to
    (the router's count goes on from what the first side sent)."""
    from pi_agent_ask.mcp_common.tools import progress_ticks
    from pi_agent_ask.mcp_server.router import _Progress

    sent: list[float] = []

    async def send(value: float, total: float | None, message: str | None) -> None:
        sent.append(value)

    progress = _Progress(send)
    for _side in range(2):
        progress.next_side()
        with trio.move_on_after(0.75):
            async with progress_ticks(progress.report, 0.1):
                await trio.sleep_forever()
    assert [repr(value) for value in sent] == [f"{n / 10}" for n in range(1, 15)]


async def test_foreground_ask_sends_progress_while_the_person_thinks(tmp_path: Path) -> None:
    progress: list[float] = []
    enough = trio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        if len(progress) >= 2:
            enough.set()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await enough.wait()
        return accept({"db": "pg"})

    with trio.fail_after(60):
        async with connected(tmp_path, elicit=elicit, progress_interval=0.01) as h:
            result = await h.call("ask_user", ASK, progress_callback=on_progress)
    assert result.structured_content is not None
    assert result.structured_content["answers"]["db"]["values"] == ["pg"]
    assert len(progress) >= 2


async def test_cut_foreground_call_answer_arrives_later_exactly_once(tmp_path: Path) -> None:
    shown = trio.Event()
    release = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        await release.wait()
        return accept({"db": "pg"})

    with trio.fail_after(60):
        async with connected(tmp_path, elicit=elicit) as h:
            cut: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    cut.append(await h.call("ask_user", ASK))

                nursery.start_soon(ask)
                await shown.wait()
                nursery.cancel_scope.cancel()  # the client gives up: it sends a cancellation
            assert cut == []
            # The server has read the cancellation once it answers a later request.
            await h.client.send_ping()
            await trio.testing.wait_all_tasks_blocked()
            assert h.completed == []
            release.set()  # the person answers the form the agent no longer waits for
            waited = await h.call("wait_for_answers", {})
            again = await h.call("wait_for_answers", {})
            stats = await h.local.runtime.statistics()
    assert waited.structured_content is not None
    assert waited.structured_content["status"] == "complete"
    [item] = waited.structured_content["results"]
    assert item["result"]["answers"]["db"]["values"] == ["pg"]
    assert background_of(waited) == []
    assert again.structured_content is not None
    assert again.structured_content["results"] == []
    assert stats.delivered == 1 and stats.pending == ()


async def test_cut_foreground_answer_rides_the_next_tool_result(tmp_path: Path) -> None:
    shown = trio.Event()
    release = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        await release.wait()
        return accept({"db": "lite"})

    with trio.fail_after(60):
        async with connected(tmp_path, elicit=elicit) as h:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(h.call, "ask_user", ASK)
                await shown.wait()
                nursery.cancel_scope.cancel()
            await h.client.send_ping()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            await h.wait_completed(1)
            carrier = await h.call("ask_user", {"questions": []})
            after = await h.call("ask_user", {"questions": []})
    [entry] = background_of(carrier)
    assert entry["details"]["result"]["answers"]["db"]["values"] == ["lite"]
    assert background_of(after) == []


# -- the fallback --------------------------------------------------------------------------


async def test_without_elicitation_the_fallback_answers_in_mcp_words(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with connected(tmp_path) as h:
            foreground = await h.call("ask_user", ASK)
            background = await h.call("ask_user", {**ASK, "background": True})
            wait = await h.call("wait_for_answers", {})
    for result in (foreground, background):
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["cancelled"] is True
        text = result.content[0]
        assert isinstance(text, types.TextContent)
        assert "Postgres [pg]" in text.text
        # What helps over MCP, not the host's words (no TUI mode, no ``details`` here).
        assert text.text.count(NO_FORMS_HEAD) == 1
        assert text.text.endswith(NO_FORMS_TAIL)
        assert "`pi-agent-ask desk`" in text.text
        assert "TUI" not in text.text
        assert "details." not in text.text
    assert wait.is_error
    assert isinstance(wait.content[0], types.TextContent)
    assert wait.content[0].text == NO_FORMS_WAIT_TEXT


# -- hostile input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("ask_user", {}),
        ("ask_user", {"questions": [{"id": 1}]}),
        ("ask_user", {"questions": [{"prompt": "x" * 100_000, "options": "no"}]}),
        ("ask_user", {"questions": [], "background": "yes"}),
        ("wait_for_answers", {"unexpected": [1, 2]}),
        ("read_ask_history", {"requestId": 5}),
        ("no_such_tool", {"a": 1}),
        ("", {}),
    ],
)
async def test_malformed_calls_are_tool_errors_and_the_server_lives(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            result = await h.call(name, arguments)
            tools = await h.client.list_tools()
    if name == "wait_for_answers":
        # It takes no arguments: a key given is refused, not ignored (docs/tools.md).
        assert result.is_error and isinstance(result.content[0], types.TextContent)
        assert "unexpected: is not a known argument" in result.content[0].text
    elif result.is_error:
        assert isinstance(result.content[0], types.TextContent)
    else:
        # A semantic failure is the contract's invalid-input result, not a tool error.
        assert result.structured_content is not None
        assert result.structured_content["error"]["issues"]
    assert [tool.name for tool in tools.tools][:1] == ["ask_user"]


# -- the hook endpoint ---------------------------------------------------------------------


async def test_hook_takes_waiting_answers_once(tmp_path: Path) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({"db": "pg"})

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            path = h.local.hook_path
            assert path is not None
            assert path.stat().st_mode & 0o777 == 0o600
            assert path.name == f"{slug('test-client@here')}.sock"
            meta = json.loads(path.with_suffix(".json").read_text())
            assert meta["key"] == "test-client@here"
            assert meta["cwd"] == str(tmp_path)
            assert await trio.to_thread.run_sync(take_from, path) == []
            await h.call("ask_user", {**ASK, "background": True})
            await h.wait_completed(1)
            taken = await trio.to_thread.run_sync(take_from, path)
            again = await trio.to_thread.run_sync(take_from, path)
            after = await h.call("ask_user", {"questions": []})
        assert not path.exists()  # the socket goes with the server
    [message] = taken
    assert message["customType"] == "ask:background-answer"
    assert message["details"]["result"]["answers"]["db"]["values"] == ["pg"]
    assert again == []
    assert background_of(after) == []
    output = hook_output("PostToolUse", taken)
    assert output is not None
    assert output["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "Postgres" in output["hookSpecificOutput"]["additionalContext"]
    assert hook_output("PostToolUse", []) is None


def test_the_hook_command_gives_up_on_a_server_that_does_not_answer(tmp_path: Path) -> None:
    # A server that took the connection but never replies (stuck, or stopped with SIGSTOP):
    # the command ends with nothing taken once its deadline passed, and never waits longer.
    import socket
    import threading

    path = tmp_path / "stuck.sock"
    taken: list[list[dict[str, Any]]] = []
    # In a thread of its own, so that a command that waited forever fails here, not hangs.
    asking = threading.Thread(target=lambda: taken.append(take_from(path, 0.2)), daemon=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)  # the connection waits in the backlog, never accepted
        asking.start()
        asking.join(timeout=5)
        assert taken == [[]]
    assert take_from(tmp_path / "gone.sock", timeout=0.2) == []  # no server at all


def test_hook_chooses_the_server_with_the_nearest_shared_ancestor() -> None:
    a = (Path("a.sock"), {"ancestors": [50, 40, 10]})
    b = (Path("b.sock"), {"ancestors": [60, 30, 10]})
    assert choose_server([a, b], [70, 30, 10]) == Path("b.sock")
    assert choose_server([a, b], [80, 40, 10]) == Path("a.sock")
    assert choose_server([], [1]) is None


# -- pure parts ----------------------------------------------------------------------------


def test_hello_reads_name_and_form_elicitation() -> None:
    def init(capabilities: dict[str, Any], name: Any = "claude-code") -> str:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"capabilities": capabilities, "clientInfo": {"name": name}},
            }
        )

    assert parse_hello(init({"elicitation": {}})) == ClientHello("claude-code", True)
    assert parse_hello(init({"elicitation": {"form": {}}})).elicitation is True
    assert parse_hello(init({"elicitation": {"url": {}}})).elicitation is False
    assert parse_hello(init({})) == ClientHello("claude-code", False)
    assert parse_hello(init({}, name=7)).name == "mcp-client"
    assert parse_hello("not json") == ClientHello()
    assert parse_hello(json.dumps([1, 2])) == ClientHello()
    assert parse_hello(None) == ClientHello()


def test_elicitation_mapping_round_trips_single_multi_custom_and_notes() -> None:
    params = AskParams(
        questions=(
            Question(
                id="one",
                label="One",
                prompt="Pick",
                type="single",
                options=(Option("a", "A"), Option("b", "B", description="bee")),
            ),
            Question(
                id="many",
                label="Many",
                prompt="Pick several",
                type="multi",
                options=(Option("x", "X", recommended=True), Option("y", "Y")),
            ),
        )
    )
    presented = ("single", "multi")
    schema = elicitation_schema(params, presented)
    properties = schema["properties"]
    assert properties["one"]["type"] == "string"
    assert "B: bee" in properties["one"]["description"]
    assert properties["many"]["type"] == "array"
    assert properties["many"]["items"]["anyOf"][0] == {"const": "x", "title": "X (recommended)"}
    assert set(properties) == {"one", "one.custom", "one.note", "many", "many.custom", "many.note"}
    assert "required" not in schema
    result = accept({"one.custom": "neither", "many": ["x", "y"], "many.note": "both"})
    assert response_from_elicitation(params, presented, result) == {
        "kind": "answer",
        "answers": {
            "one": {"customText": "neither"},
            "many": {"values": ["x", "y"], "note": "both"},
        },
    }
    empty = response_from_elicitation(params, presented, accept({"one": "", "many": []}))
    assert empty == {"kind": "answer", "answers": {}}
    cancel = types.ElicitResult(action="cancel")
    assert response_from_elicitation(params, presented, cancel) == {"kind": "cancel"}


async def test_an_answer_taken_by_another_boundary_goes_to_its_waiting_call(
    tmp_path: Path,
) -> None:
    """A hook (or another call) that takes the boundary while a foreground ask waits for its
    answer hands that answer to the ask: the ask still returns it as its own result."""
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime
    from pi_agent_ask.mcp_common.tools import AgentTools

    with trio.fail_after(30):
        async with open_runtime(
            mode="tui", surface=NullSurface(), settings=tmp_path / "settings.json"
        ) as runtime:
            started: list[dict[str, Any]] = []
            completed: list[dict[str, Any]] = []
            runtime.events.on(ev.STARTED, started.append)
            runtime.events.on(ev.COMPLETED, completed.append)
            with AgentTools(runtime) as tools:
                results: list[types.CallToolResult] = []
                taken: list[list[dict[str, Any]]] = []
                async with trio.open_nursery() as nursery:

                    async def ask() -> None:
                        results.append(await tools.call_tool("ask_user", ASK))

                    async def take() -> None:
                        taken.append(await tools.take_background_messages())

                    nursery.start_soon(ask)
                    while not started:
                        await trio.testing.wait_all_tasks_blocked()
                    assert tools.awaited_requests == {started[0]["askRequestId"]}
                    # Another boundary is under way: the hook queues behind it, first.
                    async with tools._boundary_lock:
                        nursery.start_soon(take)
                        await trio.testing.wait_all_tasks_blocked()
                        runtime.events.emit(
                            ev.SUBMIT,
                            {
                                "version": 1,
                                "requestId": "r1",
                                "flowId": started[0]["flowId"],
                                "response": {
                                    "kind": "answer",
                                    "answers": {"db": {"values": ["pg"]}},
                                },
                            },
                        )
                        while not completed:
                            await trio.testing.wait_all_tasks_blocked()
                        await trio.testing.wait_all_tasks_blocked()
    assert taken == [[]]
    assert tools.awaited_requests == frozenset()
    [result] = results
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["answers"]["db"]["values"] == ["pg"]


# -- elicitation answers against the form's own checks (property) ------------------------


_values = st.text(alphabet="abcxyz", min_size=1, max_size=3)


@st.composite
def _params(draw: st.DrawFn) -> AskParams:
    count = draw(st.integers(1, 3))
    questions = []
    for index in range(count):
        values = draw(st.lists(_values, min_size=1, max_size=4, unique=True))
        questions.append(
            Question(
                id=f"q{index}",
                label=f"Q{index}",
                prompt="?",
                type=draw(st.sampled_from(["single", "multi"])),
                options=tuple(Option(v, v.upper()) for v in values),
            )
        )
    return AskParams(questions=tuple(questions))


_field_value = st.one_of(
    st.none(), st.text(max_size=5), st.integers(), st.booleans(), st.lists(_values, max_size=4)
)


@given(params=_params(), data=st.data())
def test_any_elicitation_content_is_an_answer_or_a_clear_refusal(
    params: AskParams, data: st.DataObject
) -> None:
    keys = [q.id + suffix for q in params.questions for suffix in ("", ".custom", ".note")]
    content = data.draw(st.dictionaries(st.sampled_from([*keys, "junk"]), _field_value, max_size=6))
    form = fs.new_form(params, fs.FormSettings())
    presented = tuple(form.types)
    assert set(elicitation_schema(params, presented)["properties"]) == set(keys)
    response = response_from_elicitation(params, presented, accept(content))
    state, problem = remote_apply(form, response)
    if problem is None:
        assert state.outcome is not None and not state.outcome.cancelled
    else:
        assert problem[0] == "invalid_answer" and problem[1]
        assert state.outcome is None


@given(params=_params(), data=st.data())
def test_choices_made_in_the_elicitation_form_are_the_answers(
    params: AskParams, data: st.DataObject
) -> None:
    form = fs.new_form(params, fs.FormSettings())
    presented = tuple(form.types)
    content: dict[str, Any] = {}
    for question, kind in zip(params.questions, presented, strict=True):
        values = [option.value for option in question.options]
        if kind == "multi":
            content[question.id] = data.draw(st.lists(st.sampled_from(values), unique=True))
        else:
            content[question.id] = data.draw(st.sampled_from(values))
        content[question.id + ".note"] = data.draw(st.text(alphabet="nope ", max_size=4))
    response = response_from_elicitation(params, presented, accept(content))
    state, problem = remote_apply(form, response)
    assert problem is None
    assert state.outcome is not None


async def test_hook_endpoint_refuses_junk_and_goes_on(tmp_path: Path) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept({"db": "pg"})

    async def exchange(path: Path, data: bytes) -> bytes:
        stream = await trio.open_unix_socket(str(path))
        received = b""
        async with stream:
            try:
                await stream.send_all(data)
                while chunk := await stream.receive_some(65536):
                    received += chunk
            except trio.BrokenResourceError:
                pass  # the server hung up on an oversized request (reset with unread data)
        return received

    with trio.fail_after(30):
        async with connected(tmp_path, elicit=elicit) as h:
            path = h.local.hook_path
            assert path is not None
            await h.call("ask_user", {**ASK, "background": True})
            await h.wait_completed(1)
            assert b"unknown request" in await exchange(path, b"not json\n")
            assert b"unknown request" in await exchange(path, b'{"op": "give"}\n')
            assert b"unknown request" in await exchange(path, b"[1]\n")
            assert await exchange(path, b"x" * 200_000) == b""  # too long: closed unanswered
            taken = await trio.to_thread.run_sync(
                take_from, path
            )  # the answer waited through all of it
    [message] = taken
    assert message["details"]["result"]["answers"]["db"]["values"] == ["pg"]


async def test_hook_endpoint_leaves_answers_with_images_for_a_tool_result() -> None:
    from pi_agent_ask.mcp_server import hook

    plain = {"customType": "ask:background-answer", "content": "A", "details": {}}
    with_image = {
        "customType": "ask:background-answer",
        "content": [
            {"type": "text", "text": "B"},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
        ],
        "details": {},
    }

    @attrs.define
    class Taken:
        given_back: list[list[dict[str, Any]]] = attrs.field(factory=list)
        asked_text_only: list[bool] = attrs.field(factory=list)

        async def take_background_messages(self, *, text_only: bool) -> list[dict[str, Any]]:
            self.asked_text_only.append(text_only)
            return [plain] if text_only else [plain, with_image]

        async def give_back(self, messages: list[dict[str, Any]]) -> None:
            self.given_back.append(messages)

    tools = Taken()
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hook._serve_one, hook.local_take(tools), server)
            await client.send_all(b'{"op": "take"}\n')
            reply = b""
            while chunk := await client.receive_some(65536):
                reply += chunk
    assert json.loads(reply) == {"messages": [plain]}
    assert tools.asked_text_only == [True]  # the image answer stays queued, untaken
    assert tools.given_back == []


def test_hook_command_is_silent_without_a_server_or_with_junk(tmp_path: Path) -> None:
    import io

    from pi_agent_ask.mcp_server.hook_command import run_claude_code_hook

    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    for stdin in ("", "not json", "[1, 2]", '{"hook_event_name": "PostToolUse", "cwd": 5}'):
        out = io.StringIO()
        assert run_claude_code_hook(io.StringIO(stdin), out, env=env) == 0
        assert out.getvalue() == ""


def test_hook_finds_servers_by_key_else_by_claude_in_the_same_directory(tmp_path: Path) -> None:
    from pi_agent_ask.mcp_server.hook_command import _candidates

    def server(name: str, **info: Any) -> None:
        (tmp_path / f"{name}.json").write_text(json.dumps(info))

    server("a", key="claude-code@/p", client="claude-code", cwd="/p")
    server("b", key="mine", client="other", cwd="/p")
    server("c", key="codex@/p", client="codex", cwd="/p")
    server("d", key="Claude Desktop@/q", client="Claude Desktop", cwd="/q")
    # A second Claude Code session in /p at once: its server took the next key.
    server("f", key="claude-code #2@/p", base="claude-code@/p", client="claude-code", cwd="/p")
    (tmp_path / "e.json").write_text("{broken")
    names = lambda found: sorted(path.stem for path, _info in found)  # noqa: E731
    assert names(_candidates(tmp_path, "mine", "/p")) == ["b"]
    assert names(_candidates(tmp_path, "claude-code@/p", "/p")) == ["a", "f"]
    # No key matches: a Claude client in the hook's directory, never another client's.
    assert names(_candidates(tmp_path, "claude-code@/q", "/q")) == ["d"]
    assert names(_candidates(tmp_path, "claude-code@/r", "/r")) == []
