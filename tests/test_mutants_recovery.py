"""Session changes and interrupted-call recovery, as mutation testing of ``actors/recovery.py``
and ``actors/session.py`` found them unpinned.

``docs/mutation-actors.md`` lists the mutants each test kills. Everything goes through the
public runtime (``open_runtime``, ``change_session``, tool calls, events, the session file),
except ``open_session_file``, whose contract (the journal's fold) no runtime output shows.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.actors.session import SessionJournal, open_session_file
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile, SessionFileError

from .runtime_support import (
    EventLog,
    InjectedDiskError,
    RecordingSurface,
    WriteGate,
    answer,
    gated_journal,
    payload,
    settings_file,
    settle,
    submit,
)
from .test_resume import interrupted_session, recorded_completion

GUARD = 30  # seconds; only stops a hang
CREATED = "2026-11-30T00:00:00.000Z"


def notices(rt: Any) -> list[str]:
    out = []
    while True:
        try:
            out.append(rt.notices.receive_nowait())
        except trio.WouldBlock:
            return out


def types(path: Path) -> list[str]:
    return [e.type for e in SessionFile.open(path, readonly=True).branch()]


def entries(path: Path, entry_type: str) -> list[Any]:
    return [e.data for e in SessionFile.open(path, readonly=True).branch() if e.type == entry_type]


def interrupted(
    path: Path,
    *,
    arguments: dict[str, Any] | None = None,
    request_id: str | None = "req-original",
    parent: str | None = None,
    with_payload: bool = True,
) -> None:
    """A session whose last foreground ``ask_user`` call (``call-7``) got no result."""
    arguments = arguments or payload("scope", "tone")
    params = validate_ask_params(arguments).params
    assert params is not None
    call: dict[str, Any] = {"toolCallId": "call-7", "name": "ask_user", "arguments": arguments}
    if parent is not None:
        call["parentToolCallId"] = parent
    with SessionFile.open(path) as session:
        session.append("tool-call", call)
        if with_payload:
            session.append(jr.PAYLOAD, jr.payload_entry(params, "call-7", CREATED))
        if request_id is not None:
            request = AskRequest(request_id, params, False, CREATED, "call-7", parent)
            session.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))


def damaged(path: Path) -> None:
    """A session file with one whole entry and a torn frame after it."""
    with SessionFile.open(path) as session:
        session.append("note", {"text": "kept"})
    with path.open("ab") as file:
        file.write(b"\x93torn frame")


# -- the follow-up message of a recovered answer -----------------------------------------------


async def test_a_recovered_answer_names_its_call_and_its_unselected_noted_option(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await settle()
        response = {
            "kind": "answer",
            "answers": {"scope": {"values": ["scope1"], "optionNotes": {"scope2": "maybe later"}}},
        }
        submit(rt.events, "tool:call-7", response)
        await settle()
        message = rt.wakeups.receive_nowait()
    assert message["details"]["toolCallId"] == "call-7"
    assert message["details"]["requestId"] == "req-original"
    # The params name the option by its label ("Option scope2"), not its value.
    assert " / Option scope2 (not selected) note: maybe later" in message["content"]
    assert isinstance(message["content"], str)
    [written] = entries(session, jr.RESUME_ANSWER)
    assert written["details"]["toolCallId"] == "call-7"


# -- recovery of an interrupted call -----------------------------------------------------------


async def test_a_reopened_call_keeps_its_creation_time_and_its_one_request_entry(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.change_session("resume", session)
        await settle()
        [started] = log.of(ev.STARTED)
        assert started["createdAt"] == CREATED
        submit(rt.events, "tool:call-7", answer({"scope": ["scope1"]}))
        await settle()
    requests = entries(session, jr.HISTORY_REQUEST)
    assert [r["requestId"] for r in requests] == ["req-original"]  # not journaled again
    [completed] = entries(session, jr.HISTORY_COMPLETED)
    assert completed["requestId"] == "req-original"


async def test_a_call_reopened_before_its_request_was_journaled_gets_a_fresh_key(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session, request_id=None, parent="parent-3")
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.change_session("resume", session)
        await settle()
        [started] = log.of(ev.STARTED)
        request_id = started["askRequestId"]
        assert str(uuid.UUID(request_id)) == request_id
        assert started["createdAt"] != CREATED  # nothing recorded it: the time of the reopen
        submit(rt.events, "tool:call-7", answer({"scope": ["scope2"]}))
        await settle()
        message = rt.wakeups.receive_nowait()
    assert message["details"]["requestId"] == request_id
    [request] = entries(session, jr.HISTORY_REQUEST)
    assert request["requestId"] == request_id
    assert request["toolCallId"] == "call-7"
    assert request["parentToolCallId"] == "parent-3"
    assert request["background"] is False
    assert request["source"] == "ask:resume"
    assert [q["id"] for q in request["questions"]] == ["scope", "tone"]
    [completed] = entries(session, jr.HISTORY_COMPLETED)
    assert completed["requestId"] == request_id


@pytest.mark.parametrize("with_payload", [True, False], ids=["payload", "arguments"])
async def test_a_reopened_single_question_follows_present_single_as_multi(
    tmp_path: Path, with_payload: bool
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session, with_payload=with_payload)
    surface = RecordingSurface()
    settings = settings_file(tmp_path, presentSingleAsMulti=True)
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        await settle()
        assert surface.states["tool:call-7"].types == ("multi", "multi")
        del rt


async def test_a_recovered_form_cut_off_by_a_session_change_records_no_outcome(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await settle()
        await rt.change_session("new", tmp_path / "other.pas")
        await settle()
    # It is still interrupted: the next startup reopens it, under its key.
    assert types(session)[-1] == jr.HISTORY_REQUEST
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings_file(tmp_path), surface=surface):
        await settle()
        assert surface.visible == "tool:call-7"


async def test_a_recovered_form_that_cannot_reopen_says_why(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted(session, request_id=None)
    with gated_journal(WriteGate()) as gate:
        gate.fail_next(jr.HISTORY_REQUEST, InjectedDiskError("the disk went away"))
        async with open_runtime(
            session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
        ) as rt:
            await settle()
            assert notices(rt) == [
                "Reopening unanswered ask_user form: 2 question(s).",
                "Could not reopen unanswered ask_user form: the disk went away",
            ]


async def test_a_refused_resume_recovers_nothing_on_the_branch_it_stays_on(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    not_a_session = tmp_path / "notes.txt"
    not_a_session.write_text("these are notes\n")
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await settle()
        assert surface.shown == ["tool:call-7"]
        with pytest.raises(SessionFileError):
            await rt.change_session("resume", not_a_session)
        await settle()
        # A failed switch rebuilds as a reload: the call is left for the next startup.
        assert surface.shown == ["tool:call-7"]
        assert surface.visible is None


# -- session changes -----------------------------------------------------------------------------


async def test_an_unknown_session_change_reason_is_named(tmp_path: Path) -> None:
    async with open_runtime(settings=settings_file(tmp_path), surface=RecordingSurface()) as rt:
        with pytest.raises(ValueError) as raised:
            await rt.change_session("restart")
    assert str(raised.value) == (
        "reason must be one of startup, resume, fork, new, reload, tree, not 'restart'"
    )


async def test_each_damage_report_is_a_notice_once(tmp_path: Path) -> None:
    first, second = tmp_path / "first.pas", tmp_path / "second.pas"
    damaged(first)
    damaged(second)
    good = tmp_path / "good.pas"
    with SessionFile.open(good) as session:
        session.append("note", {"text": "fine"})
    async with open_runtime(
        session=first, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        [at_start] = notices(rt)
        assert at_start.startswith(f"{first}: kept 1 entries; ")
        await rt.change_session("resume", second)
        [switched] = notices(rt)
        assert switched.startswith(f"{second}: kept 1 entries; ")
        # A clean file, a reload of the (now cut) file and a fork report nothing.
        await rt.change_session("resume", good)
        await rt.change_session("reload")
        await rt.change_session("fork", tmp_path / "fork.pas")
        await rt.change_session("fork", None)
        assert notices(rt) == []


async def test_a_file_damaged_under_the_runtime_is_reported_on_reload(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        with session.open("ab") as file:
            file.write(b"\x93torn frame")
        await rt.change_session("reload")
        [report] = notices(rt)
        assert report.startswith(f"{session}: kept ")
        assert " cut: " in report
        # Resuming the file the runtime is on re-reads it the same way.
        with session.open("ab") as file:
            file.write(b"\x93torn again")
        await rt.change_session("resume", session)
        [report] = notices(rt)
        assert report.startswith(f"{session}: kept ")
        assert " cut: " in report


async def test_a_fork_continues_the_branch_in_the_new_file(tmp_path: Path) -> None:
    session, fork = tmp_path / "s.pas", tmp_path / "fork.pas"
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        await rt.change_session("fork", fork)
        await settle()
        assert surface.visible == "tool:b1"  # the pending form came along
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await settle()
    assert types(fork).count(jr.QUEUED) == 1
    assert jr.HISTORY_COMPLETED in types(fork)
    assert jr.HISTORY_COMPLETED not in types(session)  # the old file is left as it was


async def test_resuming_a_file_from_an_in_memory_session_opens_it(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    surface = RecordingSurface()
    async with open_runtime(settings=settings_file(tmp_path), surface=surface) as rt:
        await rt.change_session("resume", session)
        await settle()
        assert surface.visible == "tool:call-7"


async def test_a_session_change_cancelled_mid_switch_keeps_the_queue_writing(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    with (
        trio.fail_after(GUARD),
        gated_journal(WriteGate()) as gate,
    ):
        async with open_runtime(
            session=session, settings=settings_file(tmp_path), surface=surface
        ) as rt:
            await rt.call_tool("ask_user", payload("a", background=True), "b1")
            await settle()
            gate.hold("before")
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(rt.change_session, "reload")
                    await settle()
                    # The form's draft is saved first (quiesce); the switch is held next.
                    assert gate.held_types == [jr.DRAFT]
                    gate.release()
                    gate.hold("before")
                    await settle()
                    assert gate.held_types == [jr.DRAFT, "switch:reload"]
                    scope.cancel()
                    gate.release()  # the cancellation came first: the switch never ran
            await settle()
            # The rebuild ran all the same: the queue is back, on a writer that works.
            assert surface.visible == "tool:b1"
            submit(rt.events, "tool:b1", answer({"a": ["a2"]}))
            await settle()
            stats = await rt.statistics()
            assert stats.completed == 1
    assert jr.HISTORY_COMPLETED in types(session)


def test_a_session_file_keeps_the_journal_fold(tmp_path: Path) -> None:
    with open_session_file(tmp_path / "s.pas") as on_disk:
        assert on_disk.projection is JOURNAL
        on_disk.fold()
    with open_session_file(None) as in_memory:
        assert in_memory.projection is JOURNAL
        in_memory.fold()


# -- the queue rebuilt from the branch ---------------------------------------------------------


async def test_a_restored_form_keeps_the_settings_the_background_flag_and_its_draft(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path, confirmDismissWhenDirty=False)
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await rt.call_tool("ask_user", payload("b", background=True), "b2")
        await settle()
        assert await rt.send_command("tool:b1", fs.NextOption())
        await settle()
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        await settle()
        with_draft = surface.states["tool:b1"]
        assert with_draft.cursors[0] == 1  # the draft came back
        assert with_draft.background is True
        assert with_draft.settings.confirm_dismiss_when_dirty is False
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await settle()
        fresh = surface.states["tool:b2"]  # no draft: a new form
        assert fresh.background is True
        assert fresh.settings.confirm_dismiss_when_dirty is False


async def test_a_draft_that_no_longer_fits_is_dropped_with_a_notice(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "b1")
    request_id = receipt["details"]["requestId"]
    with SessionFile.open(session) as file:
        file.append(jr.DRAFT, {"requestId": request_id, "form": {"version": 999}})
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await settle()
        assert notices(rt) == [
            f"A saved draft could not be restored; the form reopens empty: {request_id}"
        ]
        assert surface.states["tool:b1"].background is True


async def test_a_delivered_answer_is_not_delivered_again_after_a_reload(tmp_path: Path) -> None:
    async with open_runtime(settings=settings_file(tmp_path), surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await settle()
        assert rt.wakeups.receive_nowait()["customType"] == "ask:background-answer"
        await rt.change_session("reload")
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == []


async def test_an_answer_recovered_but_not_delivered_wakes_the_agent(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    completion = await recorded_completion(
        tmp_path,
        {
            "kind": "answer",
            "answers": {"scope": {"values": ["scope1"], "optionNotes": {"scope2": "later"}}},
        },
    )
    # Dismissed, then the crash: the answer never reached the agent.
    interrupted_session(
        session,
        extra=[
            (jr.HISTORY_COMPLETED, completion),
            (jr.PENDING_DISMISSED, {"toolCallId": "call-7"}),
        ],
    )
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await settle()
        message = rt.wakeups.receive_nowait()  # idle: a wake, not a wait for the boundary
    assert message["customType"] == jr.RESUME_ANSWER
    assert message["details"]["toolCallId"] == "call-7"
    assert message["details"]["requestId"] == "req-original"
    assert " / Option scope2 (not selected) note: later" in message["content"]


async def test_a_recovered_form_left_open_at_exit_reopens_next_time(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ):
        await settle()
    assert jr.HISTORY_COMPLETED not in types(session)  # no cancellation recorded for it
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings_file(tmp_path), surface=surface):
        await settle()
        assert surface.visible == "tool:call-7"


async def test_the_journal_appends_a_compaction_summary(tmp_path: Path) -> None:
    path = tmp_path / "s.pas"
    async with trio.open_nursery() as nursery:
        journal = await SessionJournal.start(nursery, open_session_file(path))
        entry = await journal.compact("the story so far")
        assert entry.data["summary"] == "the story so far"
        assert [e.data for e in await journal.branch()] == [entry.data]
        journal.close()
    [stored] = SessionFile.open(path, readonly=True).branch()
    assert stored.data["summary"] == "the story so far"


async def test_a_request_another_writer_marked_delivered_before_its_answer_stays_delivered(
    tmp_path: Path,
) -> None:
    """A branch this runtime never writes, but another writer of the format may: a delivery
    mark (``ask:background-answer``) for a request with no completion before it. The mark is
    the branch's word that the request's answer went out, so the restored request is
    delivered: its answer, once given, is recorded and never handed out a second time."""
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "b1")
    request_id = receipt["details"]["requestId"]
    with SessionFile.open(session) as file:
        file.append(
            jr.BACKGROUND_ANSWER,
            {
                "role": "user",
                "customType": jr.BACKGROUND_ANSWER,
                "content": "answered by the other writer",
                "details": {"requestId": request_id},
            },
        )
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        await settle()
        assert "tool:b1" in surface.states  # not settled: its form is back
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == []
    [completed] = entries(session, jr.QUEUE_COMPLETED)
    assert completed["requestId"] == request_id and completed["result"] is not None
    assert len(entries(session, jr.BACKGROUND_ANSWER)) == 1  # the other writer's mark alone
