"""Behaviour of ``ask_user``'s paths the runtime suites did not pin, found by mutation testing
of ``actors/ask.py``.

Each test names the behaviour it pins; ``docs/mutation-runtime.md`` lists the mutants each
one kills. Everything goes through the public runtime (``open_runtime``, tool calls, events,
host hooks, the session file; write faults through the gated journal of
``tests/runtime_support.py``), not through the module's internals.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.persistence import WriteRefused
from pi_agent_ask.persistence.session_file import SessionFile

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
from .test_resume import interrupted_session

ASK_CHAIN = [
    "tool-call",
    "ask:payload",
    "ask:history-request",
    "ask:history-completed",
    "tool-result",
]


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path)


def branch(session: Path) -> list[Any]:
    return list(SessionFile.open(session, readonly=True).branch())


def plain(value: Any) -> Any:
    """A stored entry's data as JSON (the file reads arrays back as tuples)."""
    return json.loads(json.dumps(value))


# -- outside tui: the fallback -------------------------------------------------------------------


@pytest.mark.parametrize("background", [False, True])
async def test_a_non_tui_call_records_the_fallback_as_its_outcome(
    settings: Path, tmp_path: Path, background: bool
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        mode="print", session=session, settings=settings, surface=RecordingSurface()
    ) as rt:
        result = await rt.call_tool("ask_user", payload("a", background=background), "c1")
    entries = branch(session)
    # Even a background call: nothing is queued, so no queue entry records its end.
    assert [e.type for e in entries] == ASK_CHAIN
    request_id = result["details"]["requestId"]
    assert entries[2].data["requestId"] == request_id
    assert plain(entries[3].data) == {
        "version": 1,
        "requestId": request_id,
        "result": result["details"],
    }
    assert result["details"]["cancelled"] is True
    assert plain(entries[4].data["result"]) == result


async def test_a_non_tui_call_cancelled_while_its_fallback_is_written_still_records_it(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    async with (
        gate.open_runtime(
            mode="print", session=session, settings=settings, surface=RecordingSurface()
        ) as rt,
        trio.open_nursery() as n,
    ):
        scope = trio.CancelScope()

        async def ask() -> None:
            with scope:
                await rt.call_tool("ask_user", payload("a"), "c1")

        gate.hold("before")
        n.start_soon(ask)
        await settle()
        assert gate.held_types == ["tool-call"]
        gate.release()  # the request goes on; the fallback's outcome is held
        gate.hold("before")
        await settle()
        assert gate.held_types == ["tool-call", "ask:history-completed"]
        scope.cancel()
        await settle()
        gate.release()
    entries = branch(session)
    assert [e.type for e in entries][:4] == ASK_CHAIN[:4]
    assert entries[3].data["result"]["cancelled"] is True


# -- the started event ---------------------------------------------------------------------------


@pytest.mark.parametrize("call_id", ["c1", None])
async def test_the_started_event_describes_the_form_it_opens(
    tmp_path: Path, call_id: str | None
) -> None:
    settings = settings_file(tmp_path, presentSingleAsMulti=True)
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(ev.STARTED, lambda p: submit(rt.events, p["flowId"], answer({"a": ["a1"]})))
        title = "Pick one" if call_id else None
        result = await rt.call_tool("ask_user", payload("a", title=title), call_id)
    [started] = log.of(ev.STARTED)
    expected: dict[str, Any] = {
        "version": 1,
        "flowId": started["flowId"],
        "askRequestId": result["details"]["requestId"],
        "source": "tool",
        "questions": [
            {
                "id": "a",
                "label": "Q1",
                "prompt": "Question a?",
                "type": "multi",
                "options": [
                    {"value": "a1", "label": "Option a1"},
                    {"value": "a2", "label": "Option a2"},
                ],
            }
        ],
        "createdAt": started["createdAt"],
    }
    if call_id is not None:
        expected["toolCallId"] = call_id
        expected["title"] = title
    assert started == expected


# -- background ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "tail"),
    [
        ("standard", "call wait_for_answers when answers are needed."),
        ("background-only", "the answers will arrive as a background-answer message."),
    ],
)
async def test_a_receipt_says_how_the_answers_will_arrive(
    tmp_path: Path, mode: str, tail: str
) -> None:
    settings = settings_file(tmp_path, questionMode=mode)
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        first = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        second = await rt.call_tool("ask_user", payload("a", "b", background=True), "c2")
    for receipt, pending, ids in ((first, 1, ["a"]), (second, 2, ["a", "b"])):
        request_id = receipt["details"]["requestId"]
        assert receipt["content"] == [
            {
                "type": "text",
                "text": f"Queued ask_user [{request_id}]. {pending} form(s) pending. "
                "This is not an answer. Continue independent work; " + tail,
            }
        ]
        assert receipt["details"] == {
            "status": "queued",
            "requestId": request_id,
            "questionIds": ids,
            "pendingRequests": pending,
        }


def completions(session: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, plain(e.data))
        for e in branch(session)
        if e.type in ("ask:history-completed", "ask:queue-completed")
    ]


async def test_a_background_form_whose_surface_fails_ends_with_an_error_the_agent_hears(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        rt.agent_started()  # busy: the outcome waits for a boundary
        log = EventLog()
        log.attach(rt.events)
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1", "p1")
        await settle()
        assert surface.visible == "tool:c1"
        await rt.surface_failed("gone")
        await settle()
        assert rt.notices.receive_nowait() == "The question form could not be shown: gone"
        stats = await rt.statistics()
        assert stats.pending == () and stats.visible is None
        [message] = await rt.turn_boundary()
    request_id = receipt["details"]["requestId"]
    assert message["content"] == f"Background answer [{request_id}]:\nQuestion form failed: gone"
    assert message["details"] == {
        "requestId": request_id,
        "parentToolCallId": "p1",
        "error": "gone",
    }
    body = {"requestId": request_id, "error": "gone"}
    assert completions(session) == [
        ("ask:history-completed", {"version": 1, **body}),
        ("ask:queue-completed", body),
    ]
    assert log.of(ev.COMPLETED) == []  # an error is no result to announce


async def test_a_background_answer_the_file_refuses_ends_with_an_error_the_agent_hears(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    gate = WriteGate()
    refused = WriteRefused("ask:history-completed", ValueError("too large"))
    async with gate.open_runtime(session=session, settings=settings, surface=surface) as rt:
        rt.agent_started()
        log = EventLog()
        log.attach(rt.events)
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1", "p1")
        await settle()
        gate.fail_next("ask:history-completed", refused)
        submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        await settle()
        assert gate.failed_types == ["ask:history-completed"]
        stats = await rt.statistics()
        assert stats.pending == () and surface.visible is None
        [message] = await rt.turn_boundary()
    request_id = receipt["details"]["requestId"]
    error = (
        "The answer could not be recorded: "
        "'ask:history-completed' entry not written: ValueError: too large"
    )
    assert message["content"] == (
        f"Background answer [{request_id}]:\nQuestion form failed: {error}"
    )
    assert message["details"] == {"requestId": request_id, "parentToolCallId": "p1", "error": error}
    body = {"requestId": request_id, "error": error}
    assert completions(session) == [
        ("ask:history-completed", {"version": 1, **body}),
        ("ask:queue-completed", body),
    ]
    assert log.of(ev.COMPLETED) == []


async def test_a_background_answer_lost_to_the_disk_reopens_with_what_was_entered(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    gate = WriteGate()
    async with gate.open_runtime(session=session, settings=settings, surface=surface) as rt:
        rt.agent_started()
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", "b", background=True), "c1", "p1")
        await settle()
        gate.fail_next("ask:history-completed", InjectedDiskError(errno.ENOSPC, "full"))
        submit(rt.events, "tool:c1", answer({"a": ["a2"], "b": ["b1"]}))
        await settle()
        assert rt.notices.receive_nowait() == (
            "The answer could not be saved to the session file ([Errno 28] full); the "
            "question stays open with what you entered: submit it again."
        )
        assert surface.shown == ["tool:c1", "tool:c1"]
        reopened = surface.states["tool:c1"]
        assert reopened.outcome is None
        assert [d.selected for d in reopened.drafts] == [(1,), (0,)]
        stats = await rt.statistics()
        assert len(stats.pending) == 1 and stats.completed == 0
        assert log.of(ev.COMPLETED) == []
        assert await rt.turn_boundary() == []
    assert completions(session) == []


# -- a reopened form -----------------------------------------------------------------------------


async def test_a_reopened_form_whose_surface_fails_is_dismissed_and_not_reopened_again(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        await settle()
        assert surface.visible == "tool:call-7"
        await rt.surface_failed("gone")
        await settle()
    entries = branch(session)
    assert [e.type for e in entries][-2:] == ["ask:history-completed", "ask:pending-dismissed"]
    assert plain(entries[-2].data) == {"version": 1, "requestId": "req-original", "error": "gone"}
    assert plain(entries[-1].data) == {"toolCallId": "call-7"}
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        await settle()
    assert surface.shown == []


# -- a foreground form ---------------------------------------------------------------------------


async def test_behaviour_settings_read_at_open_reach_a_foreground_form(tmp_path: Path) -> None:
    settings = settings_file(
        tmp_path, autoSubmitWhenAnsweredWithoutNotes=True, confirmDismissWhenDirty=False
    )
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt, trio.open_nursery() as n:
        n.start_soon(rt.call_tool, "ask_user", payload("a"), "c1")
        await settle()
        form = surface.states["tool:c1"]
        n.cancel_scope.cancel()
    assert form.settings.auto_submit_when_answered_without_notes is True
    assert form.settings.confirm_dismiss_when_dirty is False


# -- the background request's one write ----------------------------------------------------------

QUEUED_CHAIN = ["tool-call", "ask:payload", "ask:history-request", "ask:queued", "tool-result"]


async def test_a_background_ask_cancelled_while_it_is_queued_is_recorded_once_with_its_receipt(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    async with gate.open_runtime(
        session=session, settings=settings, surface=RecordingSurface()
    ) as rt:
        async with trio.open_nursery() as n:
            scope = trio.CancelScope()
            out: dict[str, Any] = {}

            async def ask() -> None:
                with scope:
                    out["receipt"] = await rt.call_tool(
                        "ask_user", payload("a", background=True), "c1"
                    )

            gate.hold("before")
            n.start_soon(ask)
            await settle()
            assert gate.held_types == ["tool-call"]
            scope.cancel()
            await settle()
            gate.release()
        stats = await rt.statistics()
        assert len(stats.pending) == 1
    entries = [e for e in branch(session) if e.type != "ask:draft"]  # the draft at disposal
    assert [e.type for e in entries] == QUEUED_CHAIN
    assert plain(entries[-1].data["result"]) == out["receipt"]


async def test_a_background_ask_made_while_the_session_changes_is_not_queued(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    gate = WriteGate()
    async with (
        gate.open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt,
        trio.open_nursery() as n,
    ):
        gate.hold("before")
        n.start_soon(rt.change_session, "new")
        await settle()
        # The switch waits at the gate: the old branch's writer is revoked already.
        assert gate.held_types == ["switch:new"]
        result = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        gate.release()
        await settle()
        stats = await rt.statistics()
    assert result == {
        "content": [{"type": "text", "text": "Question form interrupted"}],
        "isError": True,
    }
    assert stats.pending == ()
    assert branch(session) == []


@contextmanager
def held_reads() -> Iterator[dict[str, Any]]:
    """Once armed, the next journal read, when performed, sets ``state["reached"]`` and waits
    until ``state["release"]`` is set: a session change's rebuild then sits between its read
    and the queue's restore."""
    from pi_agent_ask.actors.session import SessionJournal

    read = SessionJournal.read
    state: dict[str, Any] = {"armed": False, "reached": trio.Event(), "release": trio.Event()}

    async def held_read(self: Any, reader: Any) -> Any:
        out = await read(self, reader)
        if state["armed"]:
            state["armed"] = False
            state["reached"].set()
            await state["release"].wait()
        return out

    with mock.patch.object(SessionJournal, "read", held_read):
        yield state


async def test_a_background_ask_made_while_the_queue_is_rebuilt_is_never_a_lost_receipt(
    settings: Path, tmp_path: Path
) -> None:
    # Found by mutation testing (``_background`` 28): the call used to meet the new branch's
    # writer while the rebuild's read was done and the queue not yet restored. It was written,
    # enqueued and given a receipt ("1 form(s) pending"), then the restore (which holds only
    # what the read found) dropped it: never shown, until the next start. Now the call meets
    # the revoked writer until the queue is restored, as during the switch: interrupted, and
    # nothing is written.
    session = tmp_path / "s.pas"
    with held_reads() as reads:
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            async with trio.open_nursery() as n:
                reads["armed"] = True
                n.start_soon(rt.change_session, "reload")
                await reads["reached"].wait()  # the rebuild's read is done; the restore waits
                result = await rt.call_tool("ask_user", payload("a", background=True), "c1")
                reads["release"].set()
            await settle()
            stats = await rt.statistics()
            later = await rt.call_tool("ask_user", payload("b", background=True), "c2")
    assert result == {
        "content": [{"type": "text", "text": "Question form interrupted"}],
        "isError": True,
    }
    assert stats.pending == ()
    assert later["details"]["pendingRequests"] == 1
    requests = [e.data for e in branch(session) if e.type == "ask:history-request"]
    assert [r["requestId"] for r in requests] == [later["details"]["requestId"]]


# -- the call's checks and the request's entries -------------------------------------------------

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.mark.parametrize(("title", "named"), [("Plan", "Plan"), ("  ", None)])
async def test_an_invalid_ask_names_its_title_when_it_is_text(
    settings: Path, title: Any, named: str | None
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("ask_user", {"title": title, "questions": []}, "c1")
    assert result["content"][0]["text"] == (
        "Invalid ask_user payload:\n- questions: At least one question is required"
    )
    assert result["details"].get("title") == named
    assert result["details"]["error"]["kind"] == "invalid_input"


async def test_background_only_mode_drops_a_stale_background_key_and_queues_the_call(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path, questionMode="background-only")
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("ask_user", {**payload("a"), "background": "later"}, "c1")
    assert result["details"]["status"] == "queued"
    [entry] = [e for e in branch(session) if e.type == "ask:payload"]
    assert entry.data["params"]["background"] is True


@pytest.mark.parametrize(
    ("mode", "background", "source"),
    [
        ("tui", True, "background"),
        ("tui", False, "tool"),
        ("print", True, "tool"),
    ],
)
async def test_a_requests_entries_name_its_call_time_and_source(
    settings: Path, tmp_path: Path, mode: str, background: bool, source: str
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        mode=mode, session=session, settings=settings, surface=RecordingSurface()
    ) as rt:
        log = EventLog()
        log.attach(rt.events)
        if not background:
            rt.events.on(
                ev.STARTED, lambda p: submit(rt.events, p["flowId"], answer({"a": ["a1"]}))
            )
        result = await rt.call_tool("ask_user", payload("a", background=background), "c1", "p1")
        if background and mode == "tui":
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
            await settle()
    entries = {e.type: plain(e.data) for e in branch(session)}
    request_id = result["details"]["requestId"]
    stored = entries["ask:payload"]
    assert stored["sourceEntryId"] == "c1"
    assert re.fullmatch(ISO, stored["timestamp"])
    assert stored["params"]["questions"][0]["id"] == "a"
    request = entries["ask:history-request"]
    assert (request["requestId"], request["createdAt"]) == (request_id, stored["timestamp"])
    assert (request["source"], request["background"]) == (source, background)
    assert (request["toolCallId"], request["parentToolCallId"]) == ("c1", "p1")
    if mode == "tui":
        [started] = log.of(ev.STARTED)
        assert (started["source"], started["createdAt"]) == (source, stored["timestamp"])
        [completed] = log.of(ev.COMPLETED)
        assert completed["source"] == source


async def test_a_background_answer_whose_error_outcome_is_refused_too_reopens_with_it(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    gate = WriteGate()
    async with gate.open_runtime(session=session, settings=settings, surface=surface) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        for _ in range(2):  # the answer, then the error outcome standing in for it
            gate.fail_next(
                "ask:history-completed",
                WriteRefused("ask:history-completed", ValueError("too large")),
            )
        submit(rt.events, "tool:c1", answer({"a": ["a2"]}))
        await settle()
        assert gate.failed_types == ["ask:history-completed"] * 2
        assert surface.shown == ["tool:c1", "tool:c1"]
        reopened = surface.states["tool:c1"]
        assert reopened.outcome is None
        assert [d.selected for d in reopened.drafts] == [(1,)]
        stats = await rt.statistics()
        assert len(stats.pending) == 1 and stats.completed == 0
        # Answered again, with the file taking it now: recorded and delivered.
        submit(rt.events, "tool:c1", answer({"a": ["a2"]}))
        await settle()
        [message] = await rt.turn_boundary()
    assert "Option a2" in message["content"]
    assert [t for t, _ in completions(session)] == ["ask:history-completed", "ask:queue-completed"]
