"""Interrupted foreground asks reopen on startup, resume and fork (000 §Interrupted ask resume)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import (
    EventLog,
    RecordingSurface,
    answer,
    payload,
    settings_file,
    settle,
    submit,
)


def interrupted_session(
    path: Path,
    *,
    call_id: str = "call-7",
    with_payload: bool = True,
    arguments: dict[str, Any] | None = None,
    extra: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
) -> str:
    """A session whose last ask_user call was interrupted (no result): what a crash leaves."""
    arguments = arguments or payload("scope", "tone", title="Plan")
    params = validate_ask_params(arguments).params
    assert params is not None
    request = AskRequest("req-original", params, False, "2026-11-30T00:00:00.000Z", call_id)
    with SessionFile.open(path) as session:
        session.append(
            "tool-call", {"toolCallId": call_id, "name": "ask_user", "arguments": arguments}
        )
        if with_payload:
            session.append(jr.PAYLOAD, jr.payload_entry(params, call_id, request.created_at))
        session.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))
        for entry_type, data in extra:
            session.append(entry_type, data)
    return request.request_id


def notices(rt: Any) -> list[str]:
    out = []
    while True:
        try:
            out.append(rt.notices.receive_nowait())
        except trio.WouldBlock:
            return out


@asynccontextmanager
async def starting_up(
    session: Path, tmp_path: Path, *, surface: RecordingSurface | None = None, **options: Any
) -> AsyncIterator[tuple[Any, EventLog]]:
    """The runtime started on ``session`` with an event log attached from the start (before
    the recovered form's events), once it settled."""
    async with open_runtime(
        session=session,
        settings=settings_file(tmp_path),
        surface=surface or RecordingSurface(),
        **options,
    ) as rt:
        log = EventLog()
        log.attach(rt.events)
        await settle()
        yield rt, log


async def test_an_interrupted_form_reopens_and_its_answer_follows_up(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)
    surface = RecordingSurface()
    async with starting_up(session, tmp_path, surface=surface) as (rt, log):
        [started] = log.of(ev.STARTED)
        assert started["source"] == "ask:resume"
        assert started["toolCallId"] == "call-7"
        assert started["askRequestId"] == "req-original"
        assert notices(rt) == ["Reopening unanswered ask_user form: 2 question(s)."]
        submit(rt.events, "tool:call-7", answer({"scope": ["scope1"], "tone": ["tone2"]}))
        await settle()
        message = rt.wakeups.receive_nowait()
    assert message["customType"] == "ask:resume-answer"
    assert message["role"] == "user"
    assert "Q1: Option scope1" in message["content"]
    assert message["details"]["requestId"] == "req-original"
    entries = SessionFile.open(session, readonly=True).branch()
    types = [e.type for e in entries]
    assert types[-3:] == ["ask:history-completed", "ask:pending-dismissed", "ask:resume-answer"]
    completed = entries[types.index("ask:history-completed")]
    assert completed.data["requestId"] == "req-original"
    # A second startup does not reopen it.
    async with starting_up(session, tmp_path) as (rt, log):
        assert log.of(ev.STARTED) == []


async def test_a_busy_agent_gets_the_recovered_answer_at_the_boundary(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        rt.agent_started()
        await settle()
        submit(rt.events, "tool:call-7", answer({"scope": ["scope2"]}))
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        [message] = await rt.turn_boundary()
        assert message["details"]["result"]["answers"]["scope"]["values"] == ["scope2"]
        assert await rt.turn_boundary() == []


async def test_cancelling_a_recovered_form_dismisses_it_without_a_message(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        await settle()
        submit(rt.events, "tool:call-7", {"kind": "cancel"})
        await settle()
        assert notices(rt)[-1] == "Unanswered ask_user form dismissed."
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == []
    types = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    assert types[-2:] == ["ask:history-completed", "ask:pending-dismissed"]


async def test_without_a_payload_the_original_arguments_are_used(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session, with_payload=False, arguments=payload("only"))
    async with starting_up(session, tmp_path) as (_rt, log):
        [started] = log.of(ev.STARTED)
        assert [q["id"] for q in started["questions"]] == ["only"]


@pytest.mark.parametrize(
    "extra",
    [
        [
            (
                "tool-result",
                {"toolCallId": "call-7", "name": "ask_user", "result": {"isError": True}},
            )
        ],
        [("ask:pending-dismissed", {"toolCallId": "call-7"})],
        [("ask:queued", {"version": 1, "requestId": "x", "toolCallId": "call-7", "params": {}})],
    ],
    ids=["has-result", "dismissed", "background"],
)
async def test_resolved_calls_are_not_reopened(tmp_path: Path, extra: Any) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session, extra=extra)
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as _rt:
        await settle()
    assert surface.shown == []


@pytest.mark.parametrize("reason", ["reload", "new", "tree"])
async def test_recovery_runs_only_on_startup_resume_and_fork(tmp_path: Path, reason: str) -> None:
    session = tmp_path / "s.pas"
    empty = tmp_path / "empty.pas"
    async with open_runtime(
        session=empty, settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        pass
    interrupted_session(session)
    surface = RecordingSurface()
    async with open_runtime(session=empty, settings=settings_file(tmp_path), surface=surface) as rt:
        if reason == "new":
            await rt.change_session("new", session)
        elif reason == "reload":
            await rt.change_session("reload")
        else:
            await rt.change_session("tree", None)
        await settle()
        assert surface.shown == []
        await rt.change_session("resume", session)
        await settle()
        assert surface.shown == ["tool:call-7"]


async def test_non_tui_sessions_do_not_reopen(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)
    async with starting_up(session, tmp_path, mode="print") as (_rt, log):
        assert log.of(ev.STARTED) == []


async def test_the_ask_commands_runtime_does_not_reopen(tmp_path: Path) -> None:
    """``ask`` is one call (docs/cli.md): it does not reopen an earlier interrupted one, which
    stays unresolved in the session, untouched, for the host that asked it."""
    from pi_agent_ask.ui.runtime import open_one_call_runtime

    session = tmp_path / "s.pas"
    interrupted_session(session)
    before = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    surface = RecordingSurface()
    async with open_one_call_runtime(
        session, settings_file(tmp_path), tmp_path, surface=surface
    ) as rt:
        log = EventLog()
        log.attach(rt.events)
        await settle()
        assert log.of(ev.STARTED) == [] and surface.shown == []
        assert notices(rt) == []
    assert [e.type for e in SessionFile.open(session, readonly=True).branch()] == before


async def test_a_session_change_closes_the_recovered_form_without_dismissing_it(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    other = tmp_path / "other.pas"
    interrupted_session(session)
    surface = RecordingSurface()
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=surface
    ) as rt:
        await settle()
        await rt.change_session("new", other)
        await settle()
        assert surface.visible is None
    types = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    assert "ask:pending-dismissed" not in types


async def recorded_completion(tmp_path: Path, response: dict[str, Any]) -> dict[str, Any]:
    """The ``ask:history-completed`` data of a real foreground ask ended with ``response``,
    re-keyed to ``req-original``: what the journal holds when the person answered and the
    interruption came before the tool result was written."""
    scratch = tmp_path / "scratch.pas"
    async with (
        open_runtime(
            session=scratch, settings=settings_file(tmp_path), surface=RecordingSurface()
        ) as rt,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(rt.call_tool, "ask_user", payload("scope", "tone", title="Plan"), "x")
        await settle()
        submit(rt.events, "tool:x", response)
    [entry] = [
        e
        for e in SessionFile.open(scratch, readonly=True).branch()
        if e.type == jr.HISTORY_COMPLETED
    ]
    return {**entry.data, "requestId": "req-original"}


async def test_an_answer_recorded_before_the_interruption_is_delivered_not_asked_again(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    completion = await recorded_completion(
        tmp_path, answer({"scope": ["scope2"], "tone": ["tone1"]})
    )
    interrupted_session(session, extra=[(jr.HISTORY_COMPLETED, completion)])
    surface = RecordingSurface()
    async with starting_up(session, tmp_path, surface=surface) as (rt, log):
        assert log.of(ev.STARTED) == []  # no form: the person already answered
        assert surface.states == {}
        assert notices(rt) == [
            "Delivering an ask_user answer recorded before the interruption: 2 question(s)."
        ]
        message = rt.wakeups.receive_nowait()
    assert message["customType"] == "ask:resume-answer"
    assert message["details"]["requestId"] == "req-original"
    assert message["details"]["result"]["answers"]["scope"]["values"] == ["scope2"]
    entries = SessionFile.open(session, readonly=True).branch()
    types = [e.type for e in entries]
    assert types.count(jr.HISTORY_REQUEST) == 1  # the original key, no second request
    assert types.count(jr.HISTORY_COMPLETED) == 1
    assert types[-2:] == ["ask:pending-dismissed", "ask:resume-answer"]
    # Delivered once: a second startup neither reopens nor delivers again.
    async with starting_up(session, tmp_path) as (rt, log):
        assert log.of(ev.STARTED) == []
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == []


async def test_a_form_dismissed_before_the_interruption_stays_dismissed(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    completion = await recorded_completion(tmp_path, {"kind": "cancel"})
    interrupted_session(session, extra=[(jr.HISTORY_COMPLETED, completion)])
    async with starting_up(session, tmp_path) as (rt, log):
        assert log.of(ev.STARTED) == []
        assert notices(rt) == ["Unanswered ask_user form dismissed."]
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == []
    types = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    assert types[-1] == "ask:pending-dismissed"
