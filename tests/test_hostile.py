"""Hostile input through the public surface: each refusal is a clear error, the runtime stays
up, and nothing acknowledged is lost (issue 10, items 1-3; docs/errors.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime, validate_ask_params
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.persistence import WriteRefused
from pi_agent_ask.form import untrusted
from pi_agent_ask.persistence import session_values
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import EventLog, answer, payload, settings_file, submit

SURROGATE = json.loads('"\\ud800"')


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path, historyTools=True)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def entry_types(session: Path) -> list[str]:
    with SessionFile.open(session, readonly=True) as opened:
        return [entry.type for entry in opened.branch()]


# -- the boundary itself ------------------------------------------------------------------


def test_the_boundary_names_the_place_and_the_reason() -> None:
    refusal = untrusted.check({"questions": [{"note": "ok" + SURROGATE}]})
    assert refusal == untrusted.Refusal(
        "questions[0].note", "is not valid Unicode: a lone surrogate U+D800 at character 2"
    )
    assert untrusted.check({"a": nested(10_000)}) == untrusted.Refusal(
        "a" + "[0]" * 63, "is nested deeper than 64 levels"
    )
    assert untrusted.check({"x y": {b"k": 1}}) == untrusted.Refusal(
        '["x y"]', "has a key that is not a string"
    )
    assert untrusted.check("x" * (untrusted.MAX_TEXT_CHARS + 1)) is not None
    assert untrusted.check({"text": "NUL \x00 C1 \x9b bidi \u202e ok"}) is None
    assert untrusted.scrub_text("a" + SURROGATE + "b") == "a\ufffdb"


# -- 1. lone surrogates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        {"note": "why" + SURROGATE},
        {"customText": SURROGATE},
        {"values": ["a1"], "optionNotes": {"a1": SURROGATE}},
    ],
)
async def test_a_submitted_surrogate_is_an_invalid_answer_and_the_runtime_stays_up(
    settings: Path, tmp_path: Path, field: dict[str, Any]
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.agent_started()  # the answer waits for the next turn boundary
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        request_id = receipt["details"]["requestId"]
        await trio.testing.wait_all_tasks_blocked()
        flow = log.of(ev.STARTED)[0]["flowId"]
        submit(rt.events, flow, {"kind": "answer", "answers": {"a": field}}, request_id="bad")
        await trio.testing.wait_all_tasks_blocked()
        [refused] = log.of(ev.SUBMIT_RESULT)
        assert refused["ok"] is False and refused["error"] == "invalid_answer"
        assert "lone surrogate U+D800" in refused["message"]
        # The form is still waiting, and a good answer still lands.
        submit(rt.events, flow, answer({"a": ["a1"]}), request_id="good")
        await trio.testing.wait_all_tasks_blocked()
        assert log.of(ev.SUBMIT_RESULT)[1]["ok"] is True
        [message] = await rt.turn_boundary()
        assert message["details"]["requestId"] == request_id
    assert "ask:history-completed" in entry_types(session)


async def test_a_surrogate_in_tool_arguments_is_a_tool_error_and_records_nothing(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    arguments = payload("a") | {"unknownKey": SURROGATE}
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        result = await rt.call_tool("ask_user", arguments, "c1")
        again = await rt.call_tool("list_ask_history", {}, "c2")
    assert result == {
        "content": [
            {
                "type": "text",
                "text": 'Validation failed for tool "ask_user":\n'
                "  - unknownKey: is not valid Unicode: a lone surrogate U+D800 at character 0",
            }
        ],
        "isError": True,
    }
    assert "isError" not in again
    assert entry_types(session) == ["tool-call", "tool-result"]  # only the second call


def test_validate_reports_a_surrogate_as_an_issue() -> None:
    validation = validate_ask_params({"questions": [{"id": "a", "prompt": SURROGATE}]})
    assert not validation.ok and validation.schema_error
    [issue] = validation.issues
    assert issue.path == "questions[0].prompt"
    assert "lone surrogate U+D800" in issue.message


class Provider:
    id = "hostile-ui"
    version = 1

    def __init__(self, response: Any) -> None:
        self.response = response

    async def open(self, request: dict[str, Any]) -> Any:
        await trio.lowlevel.checkpoint()
        return self.response


async def test_an_external_ui_returning_a_surrogate_is_a_tool_error(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    provider = Provider({"kind": "answer", "answers": {"a": {"values": ["a1"], "note": SURROGATE}}})
    async with open_runtime(session=session, mode="rpc", settings=settings) as rt:
        rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))
        result = await rt.call_tool("ask_user", payload("a"), "c1")
        assert result["isError"] is True
        assert result["content"][0]["text"] == (
            "External ask UI returned an invalid response: response answers.a.note: is not "
            "valid Unicode: a lone surrogate U+D800 at character 0."
        )
        assert (await rt.call_tool("list_ask_history", {}, "c2"))["details"]["total"] == 1
    assert entry_types(session)[-1] == "tool-result"


# -- 2. deep nesting -----------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["ask_user", "list_ask_history", "wait_for_answers"])
async def test_deep_nesting_in_any_argument_is_refused_without_recursion(
    settings: Path, tmp_path: Path, tool: str
) -> None:
    async with open_runtime(
        session=tmp_path / "s.pas", settings=settings, surface=NullSurface()
    ) as rt:
        result = await rt.call_tool(tool, {"deep": nested(2_000)}, "c1")
    assert result["isError"] is True
    assert "is nested deeper than 64 levels" in result["content"][0]["text"]


async def test_deep_nesting_in_a_submit_is_an_invalid_answer(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await trio.testing.wait_all_tasks_blocked()
        flow = log.of(ev.STARTED)[0]["flowId"]
        response = {"kind": "answer", "answers": {"a": {"values": ["a1"], "x": nested(5_000)}}}
        submit(rt.events, flow, response)
        await trio.testing.wait_all_tasks_blocked()
        [refused] = log.of(ev.SUBMIT_RESULT)
        assert refused["error"] == "invalid_answer"
        assert "nested deeper than 64 levels" in refused["message"]


# -- 3. every call ends as a result or a tool error ------------------------------------------


async def test_a_nul_byte_in_an_export_path_is_a_tool_error(settings: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        result = await rt.call_tool("export_ask_history", {"path": "out\x00.md"}, "c1")
        assert result == {
            "content": [{"type": "text", "text": "export_ask_history failed: embedded null byte"}],
            "isError": True,
        }
        assert "isError" not in await rt.call_tool("list_ask_history", {}, "c2")
    assert entry_types(session) == ["tool-call", "tool-result"] * 2


async def test_an_entry_over_the_frame_limit_is_a_tool_error(
    settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The limit is 256 MiB; lowered here so the test need not build such a call.
    monkeypatch.setattr(session_values, "MAX_FRAME_BYTES", 4096)
    session = tmp_path / "s.pas"
    big = payload("a") | {"title": "t" * 3000}
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        result = await rt.call_tool("ask_user", big, "c1")
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert text.startswith("ask_user failed: the session file refused the entry: ")
        assert "entry too large" in text
        assert "isError" not in await rt.call_tool("list_ask_history", {}, "c2")
    assert entry_types(session)[-2:] == ["tool-call", "tool-result"]


async def test_the_persistence_actor_refuses_an_unencodable_entry_and_goes_on(
    tmp_path: Path,
) -> None:
    from pi_agent_ask.actors.persistence import run_persistence

    session = SessionFile.open(tmp_path / "s.pas")
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(run_persistence, session)
        async with handle:
            for bad in ({"text": SURROGATE}, {"deep": nested(5_000)}, {"odd": object()}):
                with pytest.raises(WriteRefused):
                    await handle.append("x", bad)
            with pytest.raises(WriteRefused):
                await handle.append_many([("ok", {}), ("bad", {"text": SURROGATE})])
            await handle.append("ok", {"n": 1})
    assert entry_types(tmp_path / "s.pas") == ["ok"]


async def test_a_submit_racing_the_end_of_a_flow_still_gets_its_submit_result(
    settings: Path,
) -> None:
    # The provider and a submission sent when the flow started race: either the submission
    # is applied first (the flow's answer) or it is still in the flow's inbox when the
    # provider's cancel ends the flow and nobody reads it any more. Either way it gets exactly
    # one submit-result, and the result agrees with it (told flow_not_found, never hanging).
    provider = Provider({"kind": "cancel"})
    async with open_runtime(mode="rpc", settings=settings) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))
        rt.events.on(
            ev.STARTED, lambda started: submit(rt.events, started["flowId"], answer({"a": ["a1"]}))
        )
        result = await rt.call_tool("ask_user", payload("a"), "c1")
        await trio.testing.wait_all_tasks_blocked()
        [late] = log.of(ev.SUBMIT_RESULT)
    if result["details"]["cancelled"]:
        assert late["ok"] is False and late["error"] == "flow_not_found"
    else:
        assert late["ok"] is True
        assert result["details"]["answers"]["a"]["values"] == ["a1"]


async def test_a_tool_call_too_large_to_record_leaves_no_entry(
    settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_values, "MAX_FRAME_BYTES", 4096)
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        result = await rt.call_tool("ask_user", payload("a") | {"title": "t" * 5000}, "c1")
        assert result["isError"] is True
        assert "'tool-call' entry not written" in result["content"][0]["text"]
    assert entry_types(session) == []


async def test_typed_bytes_that_are_not_utf8_are_stored_as_replacement_characters(
    settings: Path, tmp_path: Path
) -> None:
    # prompt_toolkit decodes such bytes as lone surrogates (surrogateescape).
    from pi_agent_ask.form import state as fs

    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await trio.testing.wait_all_tasks_blocked()
        flow = log.of(ev.STARTED)[0]["flowId"]
        for command in (fs.OpenQuestionNote(), fs.EditorChanged("caf\udcc3"), fs.EditorSubmit()):
            assert await rt.send_command(flow, command)
        await rt.user_message("hello \udcff")  # hides the panel: the draft is saved
        await trio.testing.wait_all_tasks_blocked()
    with SessionFile.open(session, readonly=True) as opened:
        branch = opened.branch()
    assert [e.data["text"] for e in branch if e.type == "user-message"] == ["hello \ufffd"]
    [*_, draft] = [e for e in branch if e.type == "ask:draft"]
    assert draft.data["form"]["drafts"][0]["note"] == "caf\ufffd"


async def test_the_nesting_bound_is_the_same_for_call_tool_and_validate(settings: Path) -> None:
    # 64 levels in the arguments themselves: just within the bound, so a schema error, as validate says.
    arguments = {"questions": [{"id": nested(61)}]}
    assert untrusted.check(arguments) is None
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        result = await rt.call_tool("ask_user", arguments, "c1")
    assert "nested deeper" not in result["content"][0]["text"]
    assert "questions[0].id: must be string" in result["content"][0]["text"]


class SilentProvider:
    id = "silent-ui"
    version = 1

    async def open(self, request: dict[str, Any]) -> Any:
        await trio.sleep_forever()


async def test_a_second_submission_left_in_an_ended_flows_inbox_is_told_flow_not_found(
    settings: Path,
) -> None:
    # Both submissions reach the flow's inbox when it starts (routed at once); the first ends
    # the flow, so nobody reads the second: closing the inbox answers it flow_not_found.
    async with open_runtime(mode="rpc", settings=settings) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](SilentProvider()))

        def twice(started: dict[str, Any]) -> None:
            submit(rt.events, started["flowId"], answer({"a": ["a1"]}))
            submit(rt.events, started["flowId"], answer({"a": ["a2"]}))

        rt.events.on(ev.STARTED, twice)
        result = await rt.call_tool("ask_user", payload("a"), "c1")
        await trio.testing.wait_all_tasks_blocked()
        first, second = log.of(ev.SUBMIT_RESULT)
    assert result["details"]["answers"]["a"]["values"] == ["a1"]
    assert first["ok"] is True
    assert second["ok"] is False and second["error"] == "flow_not_found"
