"""Remote answers routed in the ``submit`` handler (``actors/remote.py``): the queue's committed
state names the form, the response goes straight into its inbox, and the form's own answer is
the ``submit-result``. Real runtimes and real Trio scheduling; no timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import (
    FLOW_NOT_ACTIVE,
    FormInput,
    NullSurface,
    RemoteResponse,
    Saved,
    close_inbox,
    run_form,
)
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params

from .runtime_support import EventLog, answer, payload, settings_file, submit

GUARD = 60  # seconds; only stops a hang


async def test_a_routed_answer_is_told_its_result_before_the_flow_completes(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pias"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session, settings=settings_file(tmp_path), surface=NullSurface()
        ) as rt:
            rt.agent_started()  # busy: the answer waits for the turn boundary
            log = EventLog()
            log.attach(rt.events)
            rt.events.on(
                ev.STARTED, lambda s: submit(rt.events, s["flowId"], answer({"a": ["a2"]}), "r1")
            )
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()
            order = [name for name, _ in log.events if name in (ev.SUBMIT_RESULT, ev.COMPLETED)]
            [result] = log.of(ev.SUBMIT_RESULT)
            [completed] = log.of(ev.COMPLETED)
            [message] = await rt.turn_boundary()
    assert order == [ev.SUBMIT_RESULT, ev.COMPLETED]
    assert result == {"version": 1, "requestId": "r1", "flowId": "tool:c1", "ok": True}
    assert completed["result"]["answers"]["a"]["values"] == ["a2"]
    assert message["details"]["result"]["answers"]["a"]["values"] == ["a2"]


async def test_submissions_beyond_a_full_inbox_wait_for_room_and_each_hears_once(
    tmp_path: Path,
) -> None:
    # 80 submissions reach the form at once: 64 fit its inbox, the others wait in tasks of
    # their own. The invalid ones are refused one by one; whichever valid one the form reads
    # first answers it; every submission hears exactly one result.
    count = 80
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            log = EventLog()
            log.attach(rt.events)

            def flood(started: dict[str, Any]) -> None:
                for n in range(count - 1):
                    submit(rt.events, started["flowId"], answer({"a": ["nope"]}), f"bad{n}")
                submit(rt.events, started["flowId"], answer({"a": ["a1"]}), "good")

            rt.events.on(ev.STARTED, flood)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()
            results = log.of(ev.SUBMIT_RESULT)
            [completed] = log.of(ev.COMPLETED)
    assert sorted(r["requestId"] for r in results) == sorted(
        [f"bad{n}" for n in range(count - 1)] + ["good"]
    )
    by_id = {r["requestId"]: r for r in results}
    assert by_id["good"]["ok"] is True
    assert completed["result"]["answers"]["a"]["values"] == ["a1"]
    for n in range(count - 1):
        bad = by_id[f"bad{n}"]
        assert bad["ok"] is False and bad["error"] in ("invalid_answer", "flow_not_found")
    # The first 64 were in the inbox before the good one: each was read and refused.
    assert all(by_id[f"bad{n}"]["error"] == "invalid_answer" for n in range(64))


async def test_a_submission_for_a_hidden_form_is_flow_not_found_at_once(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            log = EventLog()
            log.attach(rt.events)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await trio.testing.wait_all_tasks_blocked()  # open, and the form shown
            assert (await rt.statistics()).visible == "tool:c1"
            await rt.defer_queue()
            # The form may not have stopped yet (its scope is cancelled): this one reaches its
            # inbox, or finds no flow, and is told flow_not_found either way.
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}), "early")
            await trio.testing.wait_all_tasks_blocked()
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}), "late")
            # Routed in the handler: the late one's result is there before any task ran.
            early, late = log.of(ev.SUBMIT_RESULT)
            assert (early["requestId"], late["requestId"]) == ("early", "late")
            for result in (early, late):
                assert result["ok"] is False and result["error"] == "flow_not_found"
            assert len((await rt.statistics()).pending) == 1


async def test_a_cancelled_form_reads_nothing_more_from_its_inbox() -> None:
    # The input is waiting, but the form's scope is cancelled: it is not applied (a deferred
    # form answers nothing), and closing the inbox tells its submitter flow_not_found.
    validation = validate_ask_params(payload("a"))
    assert validation.params is not None
    form = fs.new_form(validation.params, fs.FormSettings(), background=True)
    commands, inbox = trio.open_memory_channel[FormInput](64)
    replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
    commands.send_nowait(RemoteResponse(answer({"a": ["a1"]}), replies))
    changes: list[fs.FormState] = []

    async def on_change(state: fs.FormState, _saved: Saved | None) -> None:
        changes.append(state)

    final = None
    with trio.CancelScope() as scope:
        scope.cancel()
        final = await run_form(
            flow_id="tool:c1",
            state=form,
            inbox=inbox,
            commands=commands,
            surface=NullSurface(),
            on_change=on_change,
        )
    assert final is None and scope.cancelled_caught and not changes
    close_inbox(inbox)
    assert reply.receive_nowait() == FLOW_NOT_ACTIVE


async def test_a_client_that_resubmits_from_its_result_listener_never_nests_the_handler(
    tmp_path: Path,
) -> None:
    """A naive client retries from inside its ``submit-result`` listener, many times over: each
    retry made while a submission is being routed takes a task of its own, so the handler never
    nests (nested, the retries end in a ``RecursionError`` and the last submission hears
    nothing), and every submission hears exactly once."""
    retries = 2_000
    heard: list[str] = []
    errors: list[BaseException] = []
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.events.on_error = lambda _channel, error: errors.append(error)

            def again(result: dict[str, Any]) -> None:
                heard.append(result["requestId"])
                if len(heard) < retries:
                    submit(rt.events, "tool:none", answer({"a": ["a1"]}), f"r{len(heard)}")

            rt.events.on(ev.SUBMIT_RESULT, again)
            submit(rt.events, "tool:none", answer({"a": ["a1"]}), "r0")
            while len(heard) < retries:
                before = len(heard)
                await trio.testing.wait_all_tasks_blocked()
                if len(heard) == before:
                    break  # nothing more will come
    assert errors == []
    assert heard == [f"r{n}" for n in range(retries)]
