"""``pi_agent_ask.aio``: the runtime inside ``asyncio.run``, Trio in guest mode underneath.

Each test is a plain function running an asyncio body (pytest is in ``trio_mode``); the hooks
are exercised through real actors, answers come through ``submit`` events or key presses.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import trio
from prompt_toolkit.input import create_pipe_input

import pi_agent_ask
import pi_agent_ask.aio as aio
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .aio_support import LOOPS, AsyncTerminal, Flows, run, settings_file, settle
from .runtime_support import payload
from .test_resume import interrupted_session


def opened(tmp_path: Path, **keywords: Any) -> Any:
    if "settings" not in keywords:
        keywords["settings"] = settings_file(tmp_path, historyTools=True)
    keywords.setdefault("surface", pi_agent_ask.NullSurface())
    keywords.setdefault("cwd", tmp_path)
    return aio.open_runtime(**keywords)


def nothing_left_running() -> None:
    """No asyncio task but this one, and no Trio task of the package: in guest mode the Trio
    run has ended; on a trio-asyncio loop only the loop's own tasks are left."""
    assert asyncio.all_tasks() == {asyncio.current_task()}
    if not trio.lowlevel.in_trio_run():
        return
    names: list[str] = []
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        if task is None:
            continue
        names.append(task.name)
        pending.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    assert [name for name in names if "pi_agent_ask" in name] == []


async def history_statuses(rt: aio.Runtime) -> list[str]:
    listed = await rt.call_tool("list_ask_history", {}, "h")
    return [record["status"] for record in listed["structuredContent"]["records"]]


# -- hooks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_foreground_call_is_answered_through_submit(tmp_path: Path, loop: str) -> None:
    async def main() -> dict[str, Any]:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            call = asyncio.create_task(rt.call_tool("ask_user", payload("a"), "c1"))
            started = await flows.answer_next(a=["a2"])
            result = await call
            assert started["toolCallId"] == "c1" and started["source"] == "tool"
            assert [c["askRequestId"] for c in flows.completed] == [started["askRequestId"]]
            assert flows.results[0]["ok"] is True
        nothing_left_running()
        return result

    result = run(main, loop)
    assert result["structuredContent"]["answers"]["a"]["values"] == ["a2"]
    assert result["details"]["answers"]["a"]["values"] == ["a2"]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_message_given_back_comes_back_at_the_next_boundary(tmp_path: Path, loop: str) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            rt.agent_started()
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await flows.answer_next(a=["a1"])
            await settle(rt)
            [message] = await rt.turn_boundary(text_only=True)
            await rt.give_back([message])
            assert await rt.turn_boundary() == [message]
            assert await rt.turn_boundary() == []
            with pytest.raises(ValueError, match="not one a turn boundary hands out"):
                await rt.give_back([{"customType": "other"}])
        nothing_left_running()

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_background_answers_arrive_once_at_a_boundary_or_as_a_wake(
    tmp_path: Path, loop: str
) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            rt.agent_started()
            receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1")
            assert receipt["structuredContent"]["status"] == "queued"
            await flows.answer_next(a=["a1"])
            await settle(rt)
            [message] = await rt.turn_boundary()
            assert message["customType"] == "ask:background-answer"
            assert message["details"]["result"]["answers"]["a"]["values"] == ["a1"]
            assert await rt.turn_boundary() == []

            await rt.call_tool("ask_user", payload("b", background=True), "c2")
            rt.agent_settled()
            await flows.answer_next(b=["b2"])
            wake = await rt.wakeups.receive()
            assert wake["details"]["result"]["answers"]["b"]["values"] == ["b2"]
            assert "Question b?" in aio.wake_text(wake)
            rt.agent_started()
            assert await rt.turn_boundary() == []

            await rt.call_tool("ask_user", payload("c", background=True), "c3")
            rt.agent_settled()
            await flows.answer_next(c=["c1"])
            async for message in rt.wakeups:
                assert message["details"]["result"]["answers"]["c"]["values"] == ["c1"]
                break

    run(main, loop)
    for line in (tmp_path / "settings.json").read_text().splitlines():
        assert json.loads(line)["schemaVersion"] == 6


def test_a_boundary_after_the_completed_event_has_the_answer(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            rt.agent_started()
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            done = asyncio.Event()
            rt.events.on(pi_agent_ask.events.COMPLETED, lambda _payload: done.set())
            await flows.answer_next(a=["a1"])
            await done.wait()
            [message] = await rt.turn_boundary()
            assert message["details"]["requestId"] == flows.completed[0]["askRequestId"]

    run(main)


def test_wait_for_answers_and_the_person_s_input(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            rt.agent_started()
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.call_tool("ask_user", payload("b", background=True), "c2")
            wait = asyncio.create_task(rt.call_tool("wait_for_answers", {}, "w1"))
            await flows.answer_next(a=["a1"])
            await flows.answer_next(b=["b1"])
            result = await wait
            assert result["structuredContent"]["status"] == "complete"
            assert len(result["structuredContent"]["results"]) == 2

            await rt.call_tool("ask_user", payload("c", background=True), "c3")
            wait = asyncio.create_task(rt.call_tool("wait_for_answers", {}, "w2"))
            await flows.next()
            await settle(rt)
            assert (await rt.statistics()).waiting
            await rt.user_message("never mind, go on")
            deferred = (await wait)["structuredContent"]
            assert (deferred["status"], deferred["reason"]) == ("deferred", "user_message")

            wait = asyncio.create_task(rt.call_tool("wait_for_answers", {}, "w3"))
            await rt.show_queue()
            await flows.next()
            await settle(rt)
            await rt.defer_queue()
            deferred = (await wait)["structuredContent"]
            assert (deferred["status"], deferred["reason"]) == ("deferred", "hidden")
            stats = await rt.statistics()
            assert stats.visible is None and len(stats.pending) == 1

    run(main)


def test_a_cancelled_form_asks_the_host_to_abort(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            call = asyncio.create_task(rt.call_tool("ask_user", payload("a"), "c1"))
            started = await flows.next()
            flows.submit(started["flowId"], {"kind": "cancel"})
            result = await call
            assert result["structuredContent"]["cancelled"] is True
            assert await rt.aborts.receive() == started["askRequestId"]

    run(main)


def test_notices_and_session_changes(tmp_path: Path) -> None:
    broken = tmp_path / "settings.json"
    broken.write_text("{not json")
    other = tmp_path / "other.pas"

    async def main() -> None:
        async with opened(tmp_path, settings=broken, session=tmp_path / "first.pas") as rt:
            detail = await rt.notices.receive()  # which file, and what was wrong first
            assert detail.startswith(f"Config file {broken}: not valid JSON: "), detail
            notice = await rt.notices.receive()
            assert notice.startswith("Config was invalid")
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            assert len((await rt.statistics()).pending) == 1
            await rt.change_session("new", other)
            assert (await rt.statistics()).pending == ()
            await rt.change_session("resume", tmp_path / "first.pas")
            assert len((await rt.statistics()).pending) == 1

    run(main)
    assert other.exists()


def test_set_question_mode_awaits_an_asyncio_confirmation(tmp_path: Path) -> None:
    asked: list[str] = []

    async def confirm(message: str) -> bool:
        asked.append(message)
        await asyncio.sleep(0)  # a real asyncio await inside the confirmation
        return True

    async def main() -> None:
        async with opened(tmp_path) as rt:
            rt.agent_started()
            assert await rt.set_question_mode("background-only", confirm=confirm)
            assert [t["name"] for t in rt.tool_definitions()] == [
                "ask_user",
                "list_ask_history",
                "read_ask_history",
                "export_ask_history",
            ]
            assert "input_schema" in rt.tool_definitions("anthropic")[0]

    run(main)
    assert len(asked) == 1 and "background-only" in asked[0]


# -- cancellation -----------------------------------------------------------------------------


def test_cancelling_the_asyncio_task_closes_a_foreground_form(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            herdr: list[bool] = []
            rt.events.on(pi_agent_ask.events.HERDR_BLOCKED, lambda p: herdr.append(p["active"]))
            call = asyncio.create_task(rt.call_tool("ask_user", payload("a"), "c1"))
            started = await flows.next()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # The Trio task has finished by now: the form is closed, journaled as cancelled.
            assert herdr == [True, False]
            assert (await rt.statistics()).visible is None
            assert await history_statuses(rt) == ["cancelled"]
            flows.submit(started["flowId"], {"kind": "cancel"})
            await settle(rt)  # the submit's reply comes from a Trio task
            assert flows.results[-1]["error"] == "flow_not_found"
            with pytest.raises(trio.WouldBlock):
                rt.aborts.receive_nowait()  # an abort by the host is not the person's cancel

    run(main)


def test_cancelling_a_wait_releases_it_and_the_answer_comes_later(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            rt.agent_started()
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            wait = asyncio.create_task(rt.call_tool("wait_for_answers", {}, "w1"))
            started = await flows.next()
            await settle(rt)
            wait.cancel()
            with pytest.raises(asyncio.CancelledError):
                await wait
            stats = await rt.statistics()
            assert stats.visible == started["flowId"]  # the queued form stays, still shown
            assert len(stats.pending) == 1
            # Another wait may start: the first one really ended.
            wait = asyncio.create_task(rt.call_tool("wait_for_answers", {}, "w2"))
            flows.answer(started["flowId"], a=["a1"])
            result = (await wait)["structuredContent"]
            assert result["status"] == "complete" and len(result["results"]) == 1

    run(main)


def test_an_asyncio_timeout_around_a_call_aborts_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await rt.call_tool("ask_user", payload("a"), "c1")
            assert len(flows.completed) == 0
            assert await history_statuses(rt) == ["cancelled"]

    run(main)


def test_a_cancelled_receive_loses_no_wake(tmp_path: Path) -> None:
    async def main() -> None:
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            receive = asyncio.create_task(rt.wakeups.receive())
            await settle(rt)
            receive.cancel()
            with pytest.raises(asyncio.CancelledError):
                await receive
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await flows.answer_next(a=["a2"])
            wake = await rt.wakeups.receive()
            assert wake["details"]["result"]["answers"]["a"]["values"] == ["a2"]

    run(main)


# -- disposal -----------------------------------------------------------------------------------


def test_leaving_the_block_with_forms_open_disposes_everything(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"

    async def main() -> tuple[BaseException | None, Any]:
        async with opened(tmp_path, session=session) as rt:
            flows = Flows(rt.events)
            await rt.call_tool("ask_user", payload("bg", background=True), "c1")
            background = await flows.next()
            await rt.call_tool("ask_user", payload("queued", background=True), "c2")
            foreground = asyncio.create_task(rt.call_tool("ask_user", payload("fg"), "c3"))
            await settle(rt)  # the foreground call is waiting for the surface
            assert (await rt.statistics()).visible == background["flowId"]
        nothing_left_running()
        error = foreground.exception()
        with pytest.raises(aio.RuntimeClosedError):
            await rt.call_tool("ask_user", payload("late"), "c4")
        with pytest.raises(aio.RuntimeClosedError):
            rt.agent_started()
        assert [message async for message in rt.wakeups] == []
        return error, rt

    error, _rt = run(main)
    assert isinstance(error, aio.RuntimeClosedError)

    with SessionFile.open(session) as reopened:
        entries = [(entry.type, entry.data) for entry in reopened.branch()]
    results = {data["toolCallId"]: data for kind, data in entries if kind == jr.TOOL_RESULT}
    assert results["c3"]["result"]["isError"] is True  # the aborted call is recorded as aborted

    async def again() -> list[str]:
        async with opened(tmp_path, session=session) as rt:
            stats = await rt.statistics()
            return [params.questions[0].id for _key, params in stats.params]

    assert sorted(run(again)) == ["bg", "queued"]  # both background forms are still queued


@pytest.mark.parametrize("loop", LOOPS)
def test_handlers_registered_at_the_top_see_recovered_forms(tmp_path: Path, loop: str) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session)

    async def main() -> list[dict[str, Any]]:
        async with opened(tmp_path, session=session) as rt:
            flows = Flows(rt.events)
            started = await flows.next()
            assert started["source"] == "ask:resume"
            flows.answer(started["flowId"], scope=["scope1"], tone=["tone1"])
            message = await rt.wakeups.receive()
            assert message["customType"] == "ask:resume-answer"
            return [started]

    assert len(run(main, loop)) == 1


# -- errors ---------------------------------------------------------------------------------------


def test_errors_keep_their_types(tmp_path: Path) -> None:
    not_a_session = tmp_path / "notes.txt"
    not_a_session.write_text("hello")

    async def main() -> None:
        with pytest.raises(ValueError, match="mode must be one of"):
            async with opened(tmp_path, mode="web"):
                pass
        nothing_left_running()
        async with opened(tmp_path) as rt:
            with pytest.raises(ValueError, match="reason must be one of"):
                await rt.change_session("sideways")
            with pytest.raises(RuntimeError, match="already runs Trio"):
                async with opened(tmp_path):
                    pass
            failed = await rt.call_tool("ask_user", {"questions": "none"}, "c1")
            assert failed["isError"] is True
        with pytest.raises(Exception) as opening:
            async with opened(tmp_path, session=not_a_session):
                pass
        assert not isinstance(opening.value, aio.RuntimeClosedError)
        nothing_left_running()

    run(main)


def test_cancelled_while_opening_leaves_nothing_running(tmp_path: Path) -> None:
    async def main() -> None:
        async def open_and_hang() -> None:
            async with opened(tmp_path):
                await asyncio.Event().wait()

        task = asyncio.create_task(open_and_hang())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        nothing_left_running()

    run(main)


# -- the terminal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_form_answered_by_key_presses_under_asyncio(tmp_path: Path, loop: str) -> None:
    async def main() -> tuple[dict[str, Any], asyncio.AbstractEventLoop]:
        term = AsyncTerminal(100, 30)
        with create_pipe_input() as keys:
            async with aio.open_runtime(
                settings=settings_file(tmp_path), input=keys, output=term.output, cwd=tmp_path
            ) as rt:
                call = asyncio.create_task(rt.call_tool("ask_user", payload("a", "b"), "c1"))
                await term.wait_text("Question a?")
                keys.send_text("2")
                await term.wait_text("Question b?")
                keys.send_text("1")
                await term.wait_text("Review your answers")
                keys.send_text("11")
                result = await call
                # A second form on the same terminal, cancelled from asyncio this time.
                call = asyncio.create_task(rt.call_tool("ask_user", payload("c"), "c2"))
                await term.wait_text("Question c?")
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            nothing_left_running()
        return result, asyncio.get_running_loop()

    result, _loop = run(main, loop)
    answers = result["structuredContent"]["answers"]
    assert answers["a"]["values"] == ["a2"] and answers["b"]["values"] == ["b1"]


class BrokenTerminal(AsyncTerminal):
    """A terminal whose writes fail once the form is drawn."""

    def flush(self) -> None:
        raise OSError("the terminal went away")


def test_a_broken_terminal_under_asyncio_ends_forms_with_an_error(tmp_path: Path) -> None:
    # The application runs on the host loop, but the Trio runtime supervises it as its own
    # terminal (``open_runtime(terminal=...)``): its failure is an error outcome and a notice.
    async def main() -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
        term = BrokenTerminal(100, 30)
        with create_pipe_input() as keys:
            async with aio.open_runtime(
                settings=settings_file(tmp_path), input=keys, output=term.output, cwd=tmp_path
            ) as rt:
                rt.agent_started()
                foreground = await rt.call_tool("ask_user", payload("a"), "c1")
                await rt.call_tool("ask_user", payload("b", background=True), "c2")
                await settle(rt)
                messages = await rt.turn_boundary()
                notices = [rt.notices.receive_nowait()]
            nothing_left_running()
        return foreground, messages, notices

    foreground, [message], notices = run(main)
    assert foreground["isError"] is True
    assert foreground["content"][0]["text"] == "Question form failed: the terminal went away"
    assert "error" in message["details"] and "result" not in message["details"]
    assert notices == ["The question form could not be shown: the terminal went away"]


# -- the idle-wake loop ----------------------------------------------------------------------------


def test_run_on_wakeups_runs_the_agent_again_on_each_answer(tmp_path: Path) -> None:
    async def main() -> list[str]:
        turns: list[str] = []
        async with opened(tmp_path) as rt:
            flows = Flows(rt.events)
            second = asyncio.Event()

            async def agent(message: dict[str, Any]) -> None:
                turns.append(aio.wake_text(message))
                if len(turns) == 1:  # the first turn asks again, in the background
                    await rt.call_tool("ask_user", payload("b", background=True), "c2")
                else:
                    second.set()

            loop = asyncio.create_task(aio.run_on_wakeups(rt, agent))
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await flows.answer_next(a=["a1"])
            await flows.answer_next(b=["b2"])
            await second.wait()
        # The loop ends by itself when the runtime closes.
        assert await loop is None
        return turns

    first, second = run(main)
    assert "Question a?" in first and "Option a1" in first
    assert "Question b?" in second and "Option b2" in second


def test_wake_text_reads_text_and_block_contents() -> None:
    assert aio.wake_text({"content": "plain"}) == "plain"
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "image", "data": "x"},
        {"type": "text", "text": "two"},
    ]
    assert aio.wake_text({"content": blocks}) == "one\n\ntwo"
    assert aio.wake_text({}) == ""


def test_a_result_the_trio_side_kept_is_returned_and_the_cancel_lands_next(
    tmp_path: Path,
) -> None:
    """What ``turn_boundary`` relies on: a Trio call that finishes despite the cancellation
    (shielded) hands its value over; the asyncio task is cancelled at its next await."""

    async def main() -> list[str]:
        got: list[str] = []
        async with opened(tmp_path) as rt:
            release = trio.Event()

            async def stubborn() -> str:
                with trio.CancelScope(shield=True):
                    await release.wait()
                return "kept"

            async def caller() -> None:
                got.append(await rt.run_trio(stubborn))
                await asyncio.sleep(0)  # the cancellation lands here
                got.append("not reached")

            task = asyncio.create_task(caller())
            await settle(rt)
            task.cancel()
            await asyncio.sleep(0)
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task

            # Under asyncio.timeout the same cancellation still becomes a TimeoutError.
            release = trio.Event()
            asyncio.get_running_loop().call_later(0.05, release.set)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    got.append(await rt.run_trio(stubborn))
                    await asyncio.sleep(0)
                    got.append("not reached either")
        return got

    assert run(main) == ["kept", "kept"]


def test_a_background_form_on_the_terminal_defers_and_comes_back(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        term = AsyncTerminal(100, 30)
        with create_pipe_input() as keys:
            async with aio.open_runtime(
                settings=settings_file(tmp_path), input=keys, output=term.output, cwd=tmp_path
            ) as rt:
                rt.agent_started()
                await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
                await term.wait_text("Question a?")
                keys.send_text("2")  # answer a, move on to b
                await term.wait_text("Question b?")
                keys.send_text("\x1b")  # Esc: defer all, the panel hides
                await term.wait_gone("Question b?")
                await settle(rt)
                stats = await rt.statistics()
                assert not stats.panel_visible and len(stats.pending) == 1
                await rt.show_queue()  # /ask-queue: back, with the draft
                await term.wait_text("Question b?")
                keys.send_text("1")
                await term.wait_text("Review your answers")
                keys.send_text("11")
                completed = asyncio.Event()
                rt.events.on(pi_agent_ask.events.COMPLETED, lambda _p: completed.set())
                await completed.wait()
                [message] = await rt.turn_boundary()
            return message["details"]["result"]["answers"]

    answers = run(main)
    assert answers["a"]["values"] == ["a2"] and answers["b"]["values"] == ["b1"]
