"""Tests that kill mutants of this session's new routing code (``actors/remote.py``'s
``on_submit`` path and its old ``handle_submit`` path, ``actors/outcomes.record_outcome``)
that the other suites let live. ``docs/mutation-runtime.md`` ("This session's new code
(session 7)") lists the mutants each test kills. Real runtimes, real Trio scheduling, real
session files; no timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import FormInput, NullSurface, Saved, UserCommand, run_form
from pi_agent_ask.actors.runtime import Runtime, open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import (
    EventLog,
    InjectedDiskError,
    WriteGate,
    answer,
    auto_answer,
    branch_types,
    gated_journal,
    payload,
    settings_file,
    submit,
)

GUARD = 10  # seconds; only stops a hang (each test takes well under one)
FLOW = "tool:c1"


async def test_a_submission_made_while_another_is_routed_reaches_the_form_through_the_queue(
    tmp_path: Path,
) -> None:
    """A ``submit-result`` listener that submits again: that submission takes the old way
    (``handle_submit``: the queue's ``FindFlow``, then the form's reply awaited). The form
    still refuses a bad answer (``invalid_answer``, not ``ok``) and takes a good one, and its
    submitter hears ``ok``. Chained so that the order is fixed: "first" and "trigger" are
    refused in their own routing (a kind that does not exist), so "second" and "third", made
    by their listeners, take the old way; "trigger" is not (it comes from the form's task)."""
    bad, good = answer({"a": ["nope"]}), answer({"a": ["a1"]})
    bogus = {"kind": "bogus"}
    then = {"first": ("second", bad), "second": ("trigger", bogus), "trigger": ("third", good)}
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            log = EventLog()
            log.attach(rt.events)

            def chain(result: dict[str, Any]) -> None:
                if result["requestId"] in then:
                    request_id, response = then[result["requestId"]]
                    submit(rt.events, FLOW, response, request_id)

            rt.events.on(ev.SUBMIT_RESULT, chain)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()
            assert (await rt.statistics()).visible == FLOW
            submit(rt.events, FLOW, bogus, "first")
            await trio.testing.wait_all_tasks_blocked()
            results = log.of(ev.SUBMIT_RESULT)
            completed = log.of(ev.COMPLETED)
    assert [(r["requestId"], r["ok"], r.get("error")) for r in results] == [
        ("first", False, "invalid_request"),
        ("second", False, "invalid_answer"),
        ("trigger", False, "invalid_request"),
        ("third", True, None),
    ]
    assert results[-1] == {"version": 1, "requestId": "third", "flowId": FLOW, "ok": True}
    [done] = completed
    assert done["result"]["answers"]["a"]["values"] == ["a1"]


async def answered_in_background(rt: Runtime) -> None:
    """A background ask (``c1``), shown and answered through a ``submit`` as it starts; every
    later form is answered the same way."""
    auto_answer(rt.events, lambda _started: answer({"a": ["a2"]}))
    await rt.call_tool("ask_user", payload("a", background=True), "c1")
    await rt.show_queue()
    await trio.testing.wait_all_tasks_blocked()


async def test_a_background_answer_is_journaled_for_history_and_for_the_queue(
    tmp_path: Path,
) -> None:
    """A background form's outcome writes both completion entries (history's and the
    queue's) in one frame; a foreground one only history's."""
    session = tmp_path / "s.pias"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings_file(tmp_path), surface=NullSurface()
        ) as rt:
            await answered_in_background(rt)
            background = branch_types(session)
            await rt.call_tool("ask_user", payload("a"), "c2")
            foreground = branch_types(session)[len(background) :]
    assert background.count(jr.HISTORY_COMPLETED) == 1
    assert background.count(jr.QUEUE_COMPLETED) == 1
    assert jr.HISTORY_COMPLETED in foreground and jr.QUEUE_COMPLETED not in foreground


async def test_a_submission_refused_in_the_handler_names_its_request_and_flow(
    tmp_path: Path,
) -> None:
    """Once the runtime is open, a submission refused at the boundary hears so in the handler
    itself (before any task runs), with the ids it gave; one that is not an object names none."""
    refused = {"version": 2, "requestId": "r1", "flowId": FLOW, "response": {"kind": "cancel"}}
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            await trio.testing.wait_all_tasks_blocked()  # open
            log = EventLog()
            log.attach(rt.events)
            rt.events.emit(ev.SUBMIT, refused)
            rt.events.emit(ev.SUBMIT, ["not", "an", "object"])
            results = log.of(ev.SUBMIT_RESULT)  # no task ran in between
    assert results == [
        {
            "version": 1,
            "requestId": "r1",
            "flowId": FLOW,
            "ok": False,
            "error": "invalid_request",
            "message": "Submit event version must be 1.",
        },
        {
            "version": 1,
            "requestId": None,
            "flowId": None,
            "ok": False,
            "error": "invalid_request",
            "message": "Submit event must be an object.",
        },
    ]


async def test_a_submission_made_before_the_runtime_opened_hears_nothing_until_it_has(
    tmp_path: Path,
) -> None:
    """Before the first checkpoint of the runtime's body nothing is emitted: a submission
    made then (refused at the boundary) hears its result from a task of its own, later."""
    refused = {"version": 2, "requestId": "r1", "flowId": FLOW, "response": {"kind": "cancel"}}
    log = EventLog()
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            log.attach(rt.events)
            rt.events.emit(ev.SUBMIT, refused)
            assert log.of(ev.SUBMIT_RESULT) == []
            await trio.testing.wait_all_tasks_blocked()
            [result] = log.of(ev.SUBMIT_RESULT)
    assert (result["requestId"], result["error"]) == ("r1", "invalid_request")


async def test_a_submission_for_a_waiting_form_is_not_given_to_the_visible_one(
    tmp_path: Path,
) -> None:
    """Two background asks: only the first is shown. An answer for the second (queued, not
    visible) is ``flow_not_found`` and reaches neither form; the visible one still takes its
    own answer."""
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            log = EventLog()
            log.attach(rt.events)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.call_tool("ask_user", payload("a", background=True), "c2")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()
            assert (await rt.statistics()).visible == FLOW
            submit(rt.events, "tool:c2", answer({"a": ["a2"]}), "wrong")
            await trio.testing.wait_all_tasks_blocked()
            assert log.of(ev.COMPLETED) == []
            submit(rt.events, FLOW, answer({"a": ["a1"]}), "right")
            await trio.testing.wait_all_tasks_blocked()
            results = log.of(ev.SUBMIT_RESULT)
            completed = log.of(ev.COMPLETED)
    assert [(r["requestId"], r["ok"], r.get("error")) for r in results] == [
        ("wrong", False, "flow_not_found"),
        ("right", True, None),
    ]
    assert results[0] == {
        "version": 1,
        "requestId": "wrong",
        "flowId": "tool:c2",
        "ok": False,
        "error": "flow_not_found",
        "message": "Ask flow is not active.",
    }
    assert completed[0]["flowId"] == FLOW
    assert completed[0]["result"]["answers"]["a"]["values"] == ["a1"]


async def test_a_completion_is_journaled_with_its_format_version(tmp_path: Path) -> None:
    """The history's completion entry carries ``version: 1`` (the on-disk format other
    readers of the session file rely on); the queue's carries the same body without it."""
    session = tmp_path / "s.pias"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings_file(tmp_path), surface=NullSurface()
        ) as rt:
            await answered_in_background(rt)
    with SessionFile.open(session, readonly=True) as file:
        data = {entry.type: entry.data for entry in file.branch()}
    history, queue = data[jr.HISTORY_COMPLETED], data[jr.QUEUE_COMPLETED]
    assert sorted(history) == ["requestId", "result", "version"]
    assert history["version"] == 1
    assert queue == {key: value for key, value in history.items() if key != "version"}


async def test_a_form_whose_inbox_ends_returns_its_last_draft() -> None:
    """Every sender gone (the inbox ends) without an outcome: the form returns the state it
    reached, the draft its owner keeps, after reading what was already waiting."""
    validation = validate_ask_params(payload("a"))
    assert validation.params is not None
    form = fs.new_form(validation.params, fs.FormSettings(), background=True)
    commands, inbox = trio.open_memory_channel[FormInput](64)
    commands.send_nowait(UserCommand(fs.NextOption()))
    commands.close()
    changes: list[fs.FormState] = []

    async def on_change(state: fs.FormState, _saved: Saved | None) -> None:
        changes.append(state)

    with trio.fail_after(GUARD):
        final = await run_form(
            flow_id=FLOW,
            state=form,
            inbox=inbox,
            commands=commands,
            surface=NullSurface(),
            on_change=on_change,
        )
    assert len(changes) == 1
    assert final is changes[0] and final != form and final.outcome is None


async def test_a_defer_whose_panel_write_fails_leaves_the_form_open(tmp_path: Path) -> None:
    """The person defers a background form (Esc), but the panel's entry cannot be written:
    the defer did not happen, so the form stays open as it was: not ended and shown again."""
    gate = WriteGate()
    with gated_journal(gate), trio.fail_after(GUARD):
        async with open_runtime(
            session=tmp_path / "s.pias", settings=settings_file(tmp_path), surface=NullSurface()
        ) as rt:
            log = EventLog()
            log.attach(rt.events)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()
            assert len(log.of(ev.STARTED)) == 1
            gate.fail_next("ask:panel", InjectedDiskError("disk gone"))
            assert await rt.send_command(FLOW, fs.Cancel()) is True
            await trio.testing.wait_all_tasks_blocked()
            assert gate.failed_types == ["ask:panel"]
            assert (await rt.statistics()).visible == FLOW
            assert len(log.of(ev.STARTED)) == 1
            submit(rt.events, FLOW, answer({"a": ["a1"]}), "after")
            await trio.testing.wait_all_tasks_blocked()
            [result] = log.of(ev.SUBMIT_RESULT)
    assert result["ok"] is True
