"""Behaviour the runtime suites did not pin, found by mutation testing of ``actors/``.

Each test names the behaviour it pins; ``docs/mutation-runtime.md`` lists the mutants each
one kills. Everything goes through the public runtime (``open_runtime``, tool calls, events,
host hooks, the session file), not through the modules' internals.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.session_file import SessionFile
from pi_agent_ask.persistence.settings import load_settings

from .runtime_support import (
    EventLog,
    InjectedDiskError,
    RecordingSurface,
    WriteGate,
    answer,
    payload,
    settings_file,
    settle,
    submit,
)
from .session_frames import decode_payload


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path)


def branch(session: Path) -> list[Any]:
    return list(SessionFile.open(session, readonly=True).branch())


# -- host hooks ---------------------------------------------------------------------------------


async def test_a_command_for_a_flow_that_is_not_shown_is_not_delivered(settings: Path) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        assert await rt.send_command("tool:nobody", fs.NextOption()) is False
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "ask_user", payload("a"), "c1")
            await settle()
            assert await rt.send_command("tool:c1", fs.NextOption()) is True
            assert await rt.send_command("tool:c2", fs.NextOption()) is False
            n.cancel_scope.cancel()


async def test_a_failed_surface_ends_the_visible_form_and_every_later_one_with_an_error(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    out: dict[str, Any] = {}
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        async with trio.open_nursery() as n:

            async def ask() -> None:
                out["first"] = await rt.call_tool("ask_user", payload("a"), "c1")

            n.start_soon(ask)
            await settle()
            assert surface.visible == "tool:c1"
            await rt.surface_failed("the terminal went away")
        later = await rt.call_tool("ask_user", payload("b"), "c2")
        notice = rt.notices.receive_nowait()
    failed = "Question form failed: the terminal went away"
    assert out["first"]["isError"] is True
    assert out["first"]["content"][0]["text"] == failed
    assert later["isError"] is True
    assert later["content"][0]["text"] == failed
    assert notice == "The question form could not be shown: the terminal went away"
    entries = branch(session)
    requests = [e.data["requestId"] for e in entries if e.type == "ask:history-request"]
    completions = [e.data for e in entries if e.type == "ask:history-completed"]
    assert [c.get("error") for c in completions] == ["the terminal went away"] * 2
    assert [c["requestId"] for c in completions] == requests


# -- wait_for_answers ---------------------------------------------------------------------------


async def test_a_refused_second_wait_leaves_the_first_one_waiting(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        out: dict[str, Any] = {}
        async with trio.open_nursery() as n:

            async def wait() -> None:
                out["wait"] = await rt.call_tool("wait_for_answers", {}, "w1")

            n.start_soon(wait)
            await settle()
            second = await rt.call_tool("wait_for_answers", {}, "w2")
            assert second["isError"] is True
            await settle()
            stats = await rt.statistics()
            assert stats.waiting
            assert any(owner.startswith("wait:") for owner in stats.herdr_owners)
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
    details = out["wait"]["details"]
    assert details["status"] == "complete"
    assert details["requestIds"] == [receipt["details"]["requestId"]]


@pytest.mark.parametrize("parent", [None, "p1"])
async def test_a_wait_is_journaled_as_its_call_then_its_result(
    settings: Path, tmp_path: Path, parent: str | None
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("wait_for_answers", {}, "w1", parent)
    call, done = branch(session)
    expected = {"toolCallId": "w1", "name": "wait_for_answers", "arguments": {}}
    if parent is not None:
        expected["parentToolCallId"] = parent
    assert (call.type, call.data) == ("tool-call", expected)
    assert done.type == "tool-result"
    assert (done.data["toolCallId"], done.data["name"]) == ("w1", "wait_for_answers")
    assert done.data["result"]["content"][0]["text"] == result["content"][0]["text"]


# -- remote submissions -------------------------------------------------------------------------


async def submit_results(settings: Path, *events: Any) -> list[dict[str, Any]]:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        for event in events:
            rt.events.emit(ev.SUBMIT, event)
        await settle()
    return log.of(ev.SUBMIT_RESULT)


async def test_a_refused_submission_names_the_request_and_flow_it_answers(settings: Path) -> None:
    [result] = await submit_results(
        settings, {"version": 2, "requestId": "r1", "flowId": "tool:c1", "response": {}}
    )
    assert result == {
        "version": 1,
        "requestId": "r1",
        "flowId": "tool:c1",
        "ok": False,
        "error": "invalid_request",
        "message": "Submit event version must be 1.",
    }


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ({"requestId": "r\ud800", "flowId": "tool:c1"}, "Submit event requestId: "),
        ({"requestId": "r1", "flowId": "tool:\ud800"}, "Submit event flowId: "),
    ],
)
async def test_submission_ids_that_are_not_valid_text_are_an_invalid_request(
    settings: Path, ids: dict[str, str], message: str
) -> None:
    event = {"version": 1, **ids, "response": {"kind": "cancel"}}
    [result] = await submit_results(settings, event)
    assert result["error"] == "invalid_request"
    assert result["message"].startswith(message)


async def test_a_response_that_is_not_valid_text_is_an_invalid_answer_at_its_path(
    settings: Path,
) -> None:
    response = {"kind": "answer", "answers": {"a": {"values": ["\ud800"]}}}
    [result] = await submit_results(
        settings, {"version": 1, "requestId": "r1", "flowId": "tool:c1", "response": response}
    )
    assert result["error"] == "invalid_answer"
    assert result["message"].startswith("Submit response.answers.a.values[0]: ")


async def test_a_submission_for_no_active_flow_names_its_request_and_flow(settings: Path) -> None:
    [result] = await submit_results(
        settings, {"version": 1, "requestId": "r1", "flowId": "tool:c9", "response": answer({})}
    )
    assert result == {
        "version": 1,
        "requestId": "r1",
        "flowId": "tool:c9",
        "ok": False,
        "error": "flow_not_found",
        "message": "Ask flow is not active.",
    }


# -- outcomes -----------------------------------------------------------------------------------


async def test_an_aborted_form_records_a_cancelled_result_with_its_id_and_presented_types(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with (
        open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt,
        trio.open_nursery() as n,
    ):
        n.start_soon(rt.call_tool, "ask_user", payload("a"), "c1")
        await settle()
        assert await rt.send_command("tool:c1", fs.ChangeQuestionType())
        await settle()
        n.cancel_scope.cancel()
    entries = branch(session)
    assert [e.type for e in entries] == [
        "tool-call",
        "ask:payload",
        "ask:history-request",
        "ask:history-completed",
        "tool-result",
    ]
    request_id = entries[2].data["requestId"]
    completed = entries[3].data
    assert completed["requestId"] == request_id
    assert completed["result"]["requestId"] == request_id
    assert completed["result"]["cancelled"] is True
    assert [q["presentedType"] for q in completed["result"]["questions"]] == ["multi"]


async def test_an_answer_reports_the_type_the_form_presented(settings: Path) -> None:
    out: dict[str, Any] = {}
    async with (
        open_runtime(settings=settings, surface=RecordingSurface()) as rt,
        trio.open_nursery() as n,
    ):

        async def ask() -> None:
            out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")

        n.start_soon(ask)
        await settle()
        assert await rt.send_command("tool:c1", fs.ChangeQuestionType())
        await settle()
        submit(rt.events, "tool:c1", answer({"a": ["a1", "a2"]}))
    details = out["result"]["details"]
    assert [q["presentedType"] for q in details["questions"]] == ["multi"]
    assert details["answers"]["a"]["values"] == ["a1", "a2"]


@pytest.mark.parametrize("tool_call_id", ["c1", None])
async def test_the_completed_event_names_the_flow_request_call_and_source(
    settings: Path, tool_call_id: str | None
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(
            ev.STARTED, lambda started: submit(rt.events, started["flowId"], answer({"a": ["a1"]}))
        )
        result = await rt.call_tool("ask_user", payload("a"), tool_call_id)
    [started] = log.of(ev.STARTED)
    [completed] = log.of(ev.COMPLETED)
    expected = {
        "version": 1,
        "flowId": started["flowId"],
        "askRequestId": result["details"]["requestId"],
        "source": "tool",
        "result": result["details"],
        "completedAt": completed["completedAt"],
    }
    if tool_call_id is not None:
        expected["toolCallId"] = tool_call_id
    assert completed == expected
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", completed["completedAt"])


class HangingProvider:
    """An external UI whose ``open`` waits until it is cancelled."""

    id = "test-ui"
    version = 1

    def __init__(self) -> None:
        self.cancelled = False

    async def open(self, request: dict[str, Any]) -> Any:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled = True
            raise


async def test_an_external_call_cut_off_by_a_session_change_is_announced_cancelled(
    settings: Path,
) -> None:
    provider = HangingProvider()
    out: dict[str, Any] = {}
    async with open_runtime(mode="rpc", settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(ev.EXTERNAL_UI, lambda c: c["connect"](provider))
        async with trio.open_nursery() as n:

            async def ask() -> None:
                out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")

            n.start_soon(ask)
            await settle()
            await rt.change_session("new")
    assert provider.cancelled
    assert out["result"]["isError"] is True
    assert out["result"]["content"][0]["text"] == "Question form interrupted"
    [completed] = log.of(ev.COMPLETED)
    assert completed["flowId"] == "tool:c1"
    assert completed["result"]["cancelled"] is True


async def test_an_external_call_that_outlives_its_runtime_still_ends_as_cancelled(
    settings: Path,
) -> None:
    # The call runs in a task of the host's, not inside the runtime's block: when it is
    # cancelled after the runtime closed, its journal is gone, and the call still ends as
    # cancelled (and says so) instead of failing on the closed journal.
    provider = HangingProvider()
    out: dict[str, Any] = {}
    async with trio.open_nursery() as host:
        async with open_runtime(mode="rpc", settings=settings, surface=RecordingSurface()) as rt:
            log = EventLog()
            log.attach(rt.events)
            rt.events.on(ev.EXTERNAL_UI, lambda c: c["connect"](provider))

            async def ask() -> None:
                try:
                    out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")
                except BaseException as error:
                    # Only cancellation, maybe wrapped by a nursery of the call's.
                    group = BaseExceptionGroup("", [error])
                    out["cancelled"] = group.split(trio.Cancelled)[1] is None
                    raise

            host.start_soon(ask)
            await settle()
        host.cancel_scope.cancel()
    assert provider.cancelled
    assert out == {"cancelled": True}
    [completed] = log.of(ev.COMPLETED)
    assert completed["result"]["cancelled"] is True


# -- tool dispatch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "text"),
    [
        (5, {}, 'Validation failed for tool "?":\n  - name: must be a string'),
        ("a\ud800", {}, 'Validation failed for tool "?":\n  - name: '),
        ("ask_user", "\ud800", 'Validation failed for tool "ask_user":\n  - root: '),
    ],
)
async def test_a_call_that_cannot_be_stored_is_refused_and_says_where(
    settings: Path, tmp_path: Path, name: Any, arguments: Any, text: str
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool(name, arguments, "c1")
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(text)
    assert branch(session) == []


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        (("c\ud800", None), 'Validation failed for tool "ask_user":\n  - toolCallId: '),
        (("c1", "p\ud800"), 'Validation failed for tool "ask_user":\n  - parentToolCallId: '),
    ],
)
async def test_call_ids_that_cannot_be_stored_are_refused_by_name(
    settings: Path, tmp_path: Path, ids: tuple[str, str | None], text: str
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("ask_user", payload("a"), *ids)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(text)
    assert branch(session) == []


async def test_a_call_after_the_runtime_closed_says_the_runtime_is_closing(
    settings: Path,
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        pass
    result = await rt.call_tool("wait_for_answers", {}, "w1")
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(
        "wait_for_answers failed: the runtime is closing ("
    )


async def test_a_disk_failure_without_a_message_is_named_by_its_type(
    settings: Path, tmp_path: Path
) -> None:
    gate = WriteGate()
    gate.fail_next("tool-call", InjectedDiskError())
    async with gate.open_runtime(
        session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
    ) as rt:
        result = await rt.call_tool("wait_for_answers", {}, "w1")
    assert result == {
        "content": [{"type": "text", "text": "wait_for_answers failed: InjectedDiskError"}],
        "isError": True,
    }


async def test_a_refused_call_entry_leaves_nothing_on_the_branch(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    gate.fail_next("tool-call", WriteRefused("tool-call", ValueError("too large")))
    async with gate.open_runtime(
        session=session, settings=settings, surface=RecordingSurface()
    ) as rt:
        result = await rt.call_tool("wait_for_answers", {}, "w1")
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "wait_for_answers failed: the session file refused the entry: "
        "'tool-call' entry not written: ValueError: too large"
    )
    assert branch(session) == []


async def test_an_ask_is_journaled_with_its_call_in_one_frame(
    settings: Path, tmp_path: Path
) -> None:
    # One frame: a crash leaves the call with its request, or neither.
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
    data = session.read_bytes()
    chains = []
    offset = 0
    while offset < len(data):
        length, _crc = struct.unpack_from(">II", data, offset)
        frame = decode_payload(data[offset + 8 : offset + 8 + length])
        offset += 8 + length
        if isinstance(frame, dict) and ("batch" in frame or "type" in frame):
            chains.append([item["type"] for item in frame.get("batch", [frame])])
    assert chains[0][:3] == ["tool-call", "ask:payload", "ask:history-request"]


async def test_a_background_answer_keeps_the_parent_call_of_its_ask(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        rt.events.on(ev.STARTED, lambda p: submit(rt.events, p["flowId"], answer({"a": ["a1"]})))
        await rt.call_tool("ask_user", payload("a", background=True), "c1", "parent-1")
        await settle()
        [message] = await rt.turn_boundary()
    assert message["details"]["parentToolCallId"] == "parent-1"


@pytest.mark.parametrize("name", ["nope", "wait_for_answers"])
async def test_a_call_made_while_the_session_changes_says_it_was_interrupted(
    settings: Path, tmp_path: Path, name: str
) -> None:
    texts = {
        "nope": "Tool call interrupted: the session changed.",
        "wait_for_answers": "Question wait interrupted",
    }
    gate = WriteGate()
    async with (
        gate.open_runtime(
            session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
        ) as rt,
        trio.open_nursery() as n,
    ):
        gate.hold("before")
        n.start_soon(rt.change_session, "reload")
        await settle()
        # The switch waits at the gate: the old branch's journal is revoked already.
        assert gate.held_types == ["switch:reload"]
        result = await rt.call_tool(name, {}, "c1")
        gate.release()
    assert result == {"content": [{"type": "text", "text": texts[name]}], "isError": True}


async def test_the_journaled_result_of_a_call_is_the_result_it_returned(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("nope", {}, "c1")
    assert result["content"][0]["text"] == "Tool 'nope' is not available."
    _call, done = branch(session)
    assert done.type == "tool-result"
    assert done.data["result"]["content"][0]["text"] == "Tool 'nope' is not available."


@pytest.mark.parametrize(
    "error",
    [
        InjectedDiskError("disk gone"),
        WriteRefused("tool-result", ValueError("too large")),
        PersistenceClosedError("closing"),
    ],
)
async def test_a_result_that_cannot_be_journaled_is_still_returned(
    settings: Path, tmp_path: Path, error: Exception
) -> None:
    gate = WriteGate()
    gate.fail_next("tool-result", error)
    async with gate.open_runtime(
        session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
    ) as rt:
        result = await rt.call_tool("nope", {}, "c1")
    assert gate.failed_types == ["tool-result"]
    assert result == {
        "content": [{"type": "text", "text": "Tool 'nope' is not available."}],
        "isError": True,
    }


async def test_a_call_cancelled_while_its_result_is_written_still_records_it(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    out: dict[str, Any] = {}
    async with gate.open_runtime(
        session=session, settings=settings, surface=RecordingSurface()
    ) as rt:
        gate.hold("before")
        async with trio.open_nursery() as n:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    out["result"] = await rt.call_tool("nope", {}, "c1")

            n.start_soon(call)
            await settle()
            assert gate.held_types == ["tool-call"]
            gate.release()  # the call entry goes on; the result's write is held
            gate.hold("before")
            await settle()
            assert gate.held_types == ["tool-call", "tool-result"]
            scope.cancel()
            await settle()
            gate.release()
    assert out["result"]["content"][0]["text"] == "Tool 'nope' is not available."
    assert [e.type for e in branch(session)] == ["tool-call", "tool-result"]


# -- settings and the question mode -------------------------------------------------------------


async def test_behaviour_settings_read_at_open_reach_the_form(tmp_path: Path) -> None:
    settings = settings_file(
        tmp_path,
        autoSubmitWhenAnsweredWithoutNotes=True,
        confirmDismissWhenDirty=False,
        presentSingleAsMulti=True,
    )
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        form = surface.states["tool:c1"]
    assert form.settings.auto_submit_when_answered_without_notes is True
    assert form.settings.confirm_dismiss_when_dirty is False
    assert form.types == ("multi",)


async def test_applied_settings_keep_the_question_mode_and_the_history_tools(
    tmp_path: Path,
) -> None:
    settings = settings_file(tmp_path, questionMode="background-only", historyTools=True)
    (tmp_path / "other").mkdir()
    other = settings_file(tmp_path / "other")  # standard, no history tools
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        names = rt.tool_names()
        assert "wait_for_answers" not in names and "list_ask_history" in names
        rt.apply_settings(load_settings(other))
        assert rt.tool_names() == names
        # The mode is saved to the settings file applied last.
        assert await rt.set_question_mode("standard")
    assert json.loads(other.read_text())["behaviour"]["questionMode"] == "standard"
    assert json.loads(settings.read_text())["behaviour"]["questionMode"] == "background-only"


async def test_the_question_mode_switches_both_ways_and_refuses_other_modes(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def confirm(message: str) -> bool:
        asked.append(message)
        return True

    async with open_runtime(settings=settings_file(tmp_path), surface=RecordingSurface()) as rt:
        rt.agent_started()
        with pytest.raises(
            ValueError,
            match=r"^question mode must be 'standard' or 'background-only', not 'other'$",
        ):
            await rt.set_question_mode("other")
        assert await rt.set_question_mode("background-only", confirm=confirm)
        assert "wait_for_answers" not in rt.tool_names()
        assert await rt.set_question_mode("standard", confirm=confirm)
        assert "wait_for_answers" in rt.tool_names()
    tail = (
        " mode changes the agent's tools, so the next model request cannot reuse the cached "
        "prompt. Switch anyway?"
    )
    assert asked == ["Switching to background-only" + tail, "Switching to standard" + tail]


async def test_a_failed_mode_save_is_a_notice_that_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    async with open_runtime(settings=blocker / "settings.json", surface=RecordingSurface()) as rt:
        assert not await rt.set_question_mode("background-only")
        notices = []
        with pytest.raises(trio.WouldBlock):
            while True:
                notices.append(rt.notices.receive_nowait())
    assert notices[-1].startswith("Unable to save ask config at")
    assert str(blocker / "settings.json") in notices[-1]


async def test_a_trusted_project_that_keeps_its_mode_is_named_in_a_notice(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    override = project / ".pi" / "extensions" / "pi-agent-ask.json"
    override.parent.mkdir(parents=True)
    override.write_text(json.dumps({"behaviour": {"questionMode": "background-only"}}))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "trustedProjects": [str(project)]}))
    async with open_runtime(settings=settings, surface=RecordingSurface(), cwd=project) as rt:
        assert "wait_for_answers" not in rt.tool_names()
        assert await rt.set_question_mode("standard")
        assert "wait_for_answers" not in rt.tool_names()
        assert rt.notices.receive_nowait() == (
            "Saved question mode standard; this project's trusted settings keep "
            "background-only in effect here."
        )
        assert await rt.set_question_mode("background-only")
        with pytest.raises(trio.WouldBlock):
            rt.notices.receive_nowait()


# -- the runtime core ---------------------------------------------------------------------------


async def test_a_foreground_ask_cancelled_while_its_request_is_written_ends_as_cancelled(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    async with (
        gate.open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt,
        trio.open_nursery() as n,
    ):
        gate.hold("before")
        scope = trio.CancelScope()

        async def ask() -> None:
            with scope:
                await rt.call_tool("ask_user", payload("a"), "c1")

        n.start_soon(ask)
        await settle()
        assert gate.held_types == ["tool-call"]
        scope.cancel()
        await settle()
        gate.release()
    entries = branch(session)
    assert [e.type for e in entries] == [
        "tool-call",
        "ask:payload",
        "ask:history-request",
        "ask:history-completed",
        "tool-result",
    ]
    assert entries[3].data["result"]["cancelled"] is True


async def test_a_session_change_after_the_runtime_closed_is_a_closed_runtime_error(
    settings: Path, tmp_path: Path
) -> None:
    async with open_runtime(
        session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
    ) as rt:
        pass
    with pytest.raises(PersistenceClosedError):
        await rt.change_session("reload")


# -- ask_user -----------------------------------------------------------------------------------


async def test_a_foreground_answer_names_a_noted_option_that_was_not_chosen(
    settings: Path,
) -> None:
    response = {
        "kind": "answer",
        "answers": {"a": {"values": ["a1"], "optionNotes": {"a2": "too slow"}}},
    }
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.events.on(ev.STARTED, lambda p: submit(rt.events, p["flowId"], response))
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert "Option a2" in result["content"][0]["text"]


async def test_a_background_ask_cancelled_while_its_request_is_written_is_still_queued(
    settings: Path, tmp_path: Path
) -> None:
    gate = WriteGate()
    async with (
        gate.open_runtime(
            session=tmp_path / "s.pas", settings=settings, surface=RecordingSurface()
        ) as rt,
        trio.open_nursery() as n,
    ):
        gate.hold("before")
        scope = trio.CancelScope()

        async def ask() -> None:
            with scope:
                await rt.call_tool("ask_user", payload("a", background=True), "c1")

        n.start_soon(ask)
        await settle()
        assert gate.held_types == ["tool-call"]
        scope.cancel()
        await settle()
        gate.release()
        await settle()
        stats = await rt.statistics()
        assert len(stats.pending) == 1
        assert stats.visible == "tool:c1"


async def test_a_foreground_form_cancelled_while_open_records_its_cancellation(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    async with (
        gate.open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt,
        trio.open_nursery() as n,
    ):
        scope = trio.CancelScope()

        async def ask() -> None:
            with scope:
                await rt.call_tool("ask_user", payload("a"), "c1")

        n.start_soon(ask)
        await settle()
        gate.hold("before")
        scope.cancel()
        await settle()
        assert gate.held_types == ["ask:history-completed"]
        gate.release()
    completed = [e.data for e in branch(session) if e.type == "ask:history-completed"]
    assert [c["result"]["cancelled"] for c in completed] == [True]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("nope", {}), ("ask_user", {"questions": []})],  # not available; an invalid ask
)
async def test_a_journaled_result_names_the_tool_it_answers(
    settings: Path, tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool(name, arguments, "c1")
    call, done = branch(session)
    assert (call.type, call.data["name"]) == ("tool-call", name)
    assert done.type == "tool-result"
    assert (done.data["toolCallId"], done.data["name"]) == ("c1", name)
    assert json.loads(json.dumps(done.data["result"])) == result
