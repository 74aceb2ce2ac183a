"""The runtime through its public API: tool calls, events and host hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import (
    EventLog,
    RecordingSurface,
    answer,
    auto_answer,
    payload,
    settings_file,
    settle,
    submit,
)


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path)


# -- foreground ---------------------------------------------------------------------------


async def test_foreground_answer_through_submit_returns_the_result(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        auto_answer(rt.events, lambda p: answer({"a": ["a2"]}))
        result = await rt.call_tool("ask_user", payload("a"), tool_call_id="call-1")
    request_id = result["details"]["requestId"]
    assert result["structuredContent"] == {
        "requestId": request_id,
        "cancelled": False,
        "answers": {"a": {"values": ["a2"], "labels": ["Option a2"]}},
    }
    assert result["content"][0]["text"] == f"ask_user [{request_id}]\nQ1: Option a2"
    assert result["details"]["answers"]["a"]["indices"] == [2]
    [started] = log.of(ev.STARTED)
    assert started["flowId"] == "tool:call-1"
    assert started["source"] == "tool"
    assert started["askRequestId"] == request_id
    [completed] = log.of(ev.COMPLETED)
    assert completed["result"]["answers"]["a"]["values"] == ["a2"]
    assert log.herdr() == [True, False]
    assert log.of(ev.SUBMIT_RESULT) == [
        {"version": 1, "requestId": "s1", "flowId": "tool:call-1", "ok": True}
    ]


async def test_schema_failure_is_a_tool_error_and_records_nothing(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("ask_user", {"questions": [{"id": "a"}]}, tool_call_id="c")
    assert result["isError"] is True
    assert "details" not in result
    assert 'Validation failed for tool "ask_user"' in result["content"][0]["text"]
    types = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    assert types == ["tool-call", "tool-result"]


async def test_semantic_issues_return_invalid_input_without_opening(settings: Path) -> None:
    surface = RecordingSurface()
    bad = {"questions": [{"id": "a", "prompt": "P", "options": []}]}
    async with open_runtime(settings=settings, surface=surface) as rt:
        result = await rt.call_tool("ask_user", bad)
    assert result["details"]["cancelled"] is True
    assert result["details"]["error"] == {
        "kind": "invalid_input",
        "issues": [
            {
                "path": "questions[0].options",
                "message": "Question 1: at least one option is required",
            }
        ],
    }
    assert result["content"][0]["text"].startswith(
        "Invalid ask_user payload:\n- questions[0].options"
    )
    assert surface.shown == []


async def test_cancelling_the_call_closes_the_form_and_records_cancelled(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    surface = RecordingSurface()
    async with open_runtime(session=session, settings=settings, surface=surface) as rt:
        log = EventLog()
        log.attach(rt.events)
        with trio.move_on_after(1) as scope:
            await rt.call_tool("ask_user", payload("a"), tool_call_id="c1")
        assert scope.cancelled_caught
        await settle()
        stats = await rt.statistics()
        assert stats.visible is None
    assert surface.hidden == ["tool:c1"]
    assert log.herdr() == [True, False]
    entries = SessionFile.open(session, readonly=True).branch()
    [completed] = [e for e in entries if e.type == "ask:history-completed"]
    assert completed.data["result"]["cancelled"] is True


async def test_user_cancel_of_a_foreground_form_requests_an_agent_abort(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        auto_answer(rt.events, lambda p: {"kind": "cancel"})
        result = await rt.call_tool("ask_user", payload("a"))
        assert result["structuredContent"]["cancelled"] is True
        assert rt.aborts.receive_nowait() == result["details"]["requestId"]


async def test_foreground_forms_share_one_surface_in_fifo_order(settings: Path) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt, trio.open_nursery() as n:
        results: dict[str, Any] = {}

        async def ask(call: str) -> None:
            results[call] = await rt.call_tool("ask_user", payload("a"), tool_call_id=call)

        n.start_soon(ask, "one")
        await settle()
        n.start_soon(ask, "two")
        await settle()
        assert surface.shown == ["tool:one"]
        submit(rt.events, "tool:two", answer({"a": ["a1"]}))
        await settle()
        assert "two" not in results
        submit(rt.events, "tool:one", answer({"a": ["a1"]}))
        await settle()
        assert surface.shown == ["tool:one", "tool:two"]
        submit(rt.events, "tool:two", answer({"a": ["a2"]}))
    assert results["two"]["structuredContent"]["answers"]["a"]["values"] == ["a2"]


async def test_an_aborted_waiter_never_lets_a_later_form_overtake(settings: Path) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt, trio.open_nursery() as n:
        cancel_two = trio.CancelScope()

        async def ask(call: str, scope: trio.CancelScope | None = None) -> None:
            with scope or trio.CancelScope():
                await rt.call_tool("ask_user", payload("a"), tool_call_id=call)

        n.start_soon(ask, "one")
        await settle()
        n.start_soon(ask, "two", cancel_two)
        await settle()
        n.start_soon(ask, "three")
        await settle()
        cancel_two.cancel()
        await settle()
        assert surface.shown == ["tool:one"]
        submit(rt.events, "tool:one", answer({"a": ["a1"]}))
        await settle()
        assert surface.shown == ["tool:one", "tool:three"]
        submit(rt.events, "tool:three", answer({"a": ["a1"]}))


# -- remote submissions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "error", "message"),
    [
        ("nope", "invalid_request", "Submit event must be an object."),
        ({"version": 2}, "invalid_request", "Submit event version must be 1."),
        ({"version": 1}, "invalid_request", "Submit event requestId is required."),
        ({"version": 1, "requestId": "r"}, "invalid_request", "Submit event flowId is required."),
        (
            {"version": 1, "requestId": "r", "flowId": "f"},
            "invalid_request",
            "Submit response must be an object.",
        ),
        (
            {"version": 1, "requestId": "r", "flowId": "f", "response": {"kind": "x"}},
            "invalid_request",
            'Submit response kind must be "answer" or "cancel".',
        ),
        (
            {"version": 1, "requestId": "r", "flowId": "f", "response": {"kind": "cancel"}},
            "flow_not_found",
            "Ask flow is not active.",
        ),
    ],
)
async def test_invalid_submissions_are_answered_with_errors(
    settings: Path, event: Any, error: str, message: str
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.emit(ev.SUBMIT, event)
        await settle()
    [result] = log.of(ev.SUBMIT_RESULT)
    assert result["ok"] is False
    assert (result["error"], result["message"]) == (error, message)


async def test_an_invalid_answer_leaves_the_flow_open(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "ask_user", payload("a"), "c1")
            await settle()
            submit(rt.events, "tool:c1", {"kind": "answer", "answers": {"zz": {}}}, "bad")
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["nope"]}), "bad2")
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}), "good")
    results = log.of(ev.SUBMIT_RESULT)
    assert [r["ok"] for r in results] == [False, False, True]
    assert results[0]["message"] == 'Unknown question id "zz".'
    assert results[1]["message"] == 'Unknown option value "nope" for question "a".'
    assert len(log.of(ev.COMPLETED)) == 1


# -- background queue ---------------------------------------------------------------------


async def test_background_call_returns_a_receipt(settings: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        first = await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
        second = await rt.call_tool("ask_user", payload("c", background=True), "c2")
    receipt = first["structuredContent"]
    assert receipt["status"] == "queued"
    assert receipt["questionIds"] == ["a", "b"]
    assert receipt["pendingRequests"] == 1
    assert second["details"]["pendingRequests"] == 2
    assert first["content"][0]["text"] == (
        f"Queued ask_user [{receipt['requestId']}]. 1 form(s) pending. This is not an answer. "
        "Continue independent work; call wait_for_answers when answers are needed."
    )
    types = [e.type for e in SessionFile.open(session, readonly=True).branch()]
    assert types[:5] == [
        "tool-call",
        "ask:payload",
        "ask:history-request",
        "ask:queued",
        "tool-result",
    ]


async def test_background_forms_are_shown_one_at_a_time_in_fifo_order(settings: Path) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        for call in ("c1", "c2", "c3"):
            await rt.call_tool("ask_user", payload("a", background=True), call)
        await settle()
        assert surface.shown == ["tool:c1"]
        submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        await settle()
        submit(rt.events, "tool:c2", {"kind": "cancel"})
        await settle()
        assert surface.shown == ["tool:c1", "tool:c2", "tool:c3"]
        stats = await rt.statistics()
        assert stats.visible == "tool:c3"
        assert stats.completed == 2


async def test_defer_hides_the_panel_keeps_the_draft_and_reopen_restores_it(
    settings: Path,
) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
        await settle()
        assert await rt.send_command("tool:c1", fs.Number(2))
        await settle()
        await rt.defer_queue()
        await settle()
        stats = await rt.statistics()
        assert stats.visible is None and stats.panel_visible is False
        assert stats.pending == (stats.pending[0],)
        # New requests do not reopen a deliberately hidden panel.
        await rt.call_tool("ask_user", payload("c", background=True), "c2")
        await settle()
        assert surface.shown == ["tool:c1"]
        await rt.show_queue()
        await settle()
        assert surface.shown == ["tool:c1", "tool:c1"]
        restored = surface.states["tool:c1"]
        assert restored.drafts[0].selected == (1,)
        assert restored.tab == 1
    assert log.herdr() == [True, False, True, False]


async def test_cancelled_background_forms_never_wake_the_agent(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_settled()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        submit(rt.events, "tool:c1", {"kind": "cancel"})
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert rt.aborts.statistics().current_buffer_used == 0
        [message] = await rt.turn_boundary()
    assert message["customType"] == "ask:background-answer"
    assert message["details"]["result"]["cancelled"] is True
    assert "User cancelled the ask flow" in message["content"]


async def test_idle_wake_sends_the_first_answer_and_the_rest_at_the_boundary(
    settings: Path,
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await rt.call_tool("ask_user", payload("b", background=True), "c2")
        await settle()
        submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        await settle()
        submit(rt.events, "tool:c2", answer({"b": ["b2"]}))
        await settle()
        rt.agent_settled()
        await settle()
        wake = rt.wakeups.receive_nowait()
        assert wake["details"]["result"]["answers"]["a"]["values"] == ["a1"]
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        rt.agent_started()
        [second] = await rt.turn_boundary()
        assert second["details"]["result"]["answers"]["b"]["values"] == ["b2"]
        assert await rt.turn_boundary() == []


async def test_answers_reach_the_agent_exactly_once_while_busy(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert len(await rt.turn_boundary()) == 1
        assert await rt.turn_boundary() == []


# -- wait_for_answers ---------------------------------------------------------------------


async def test_wait_with_an_empty_queue_returns_immediately(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        result = await rt.call_tool("wait_for_answers", {})
    assert result["structuredContent"] == {"status": "complete", "requestIds": [], "results": []}
    assert result["content"][0]["text"] == (
        "No outstanding background answers. Previously delivered answers are already in context."
    )


async def test_wait_collects_forms_added_while_waiting(settings: Path) -> None:
    def first_option_unless_held(started: dict[str, Any]) -> dict[str, Any] | None:
        first = started["questions"][0]
        if first["id"] == "held":
            return None
        return answer({first["id"]: [first["options"][0]["value"]]})

    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        auto_answer(rt.events, first_option_unless_held)
        one = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        held = await rt.call_tool("ask_user", payload("held", background=True), "c0")
        out: dict[str, Any] = {}
        async with trio.open_nursery() as n:

            async def wait() -> None:
                out["wait"] = await rt.call_tool("wait_for_answers", {}, "w1")

            n.start_soon(wait)
            await settle()
            two = await rt.call_tool("ask_user", payload("b", background=True), "c2")
            await settle()
            assert "wait" not in out
            submit(rt.events, "tool:c0", answer({"held": ["held1"]}))
        details = out["wait"]["details"]
        assert details["status"] == "complete"
        ids = [r["details"]["requestId"] for r in (one, held, two)]
        assert details["requestIds"] == ids
        assert [r["requestId"] for r in details["results"]] == ids
        # Results returned by the wait are never delivered again.
        assert await rt.turn_boundary() == []
        rt.agent_settled()
        await settle()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()


async def test_a_second_wait_is_refused(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "wait_for_answers", {}, "w1")
            await settle()
            second = await rt.call_tool("wait_for_answers", {}, "w2")
            assert second == {
                "content": [
                    {"type": "text", "text": "Another wait_for_answers call is already waiting."}
                ],
                "isError": True,
            }
            n.cancel_scope.cancel()


WAIT_REFUSED = (
    'Validation failed for tool "wait_for_answers":\n'
    "  - timeout: is not a known argument (the tool takes none)"
)


async def test_a_wait_given_arguments_is_refused_at_once(settings: Path) -> None:
    """``wait_for_answers`` takes no arguments: one given (an agent expecting a time limit
    the wait does not have) is refused in words at once, even with a form pending, and
    journaled as the call's result; the form stays pending for the next wait."""
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        with trio.fail_after(5):
            refused = await rt.call_tool("wait_for_answers", {"timeout": 1}, "w1")
        assert refused == {"content": [{"type": "text", "text": WAIT_REFUSED}], "isError": True}
        assert len((await rt.statistics()).pending) == 1


@pytest.mark.parametrize("how", ["hidden", "user_message"])
async def test_hiding_or_user_input_defers_the_wait(settings: Path, how: str) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        first = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        second = await rt.call_tool("ask_user", payload("b", background=True), "c2")
        await settle()
        submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        await settle()
        async with trio.open_nursery() as n:
            out: dict[str, Any] = {}

            async def wait() -> None:
                out["wait"] = await rt.call_tool("wait_for_answers", {}, "w1")

            n.start_soon(wait)
            await settle()
            if how == "hidden":
                await rt.defer_queue()
            else:
                await rt.user_message("actually, do something else")
        details = out["wait"]["structuredContent"]
        assert details["status"] == "deferred"
        assert details["reason"] == how
        assert details["pendingRequestIds"] == [second["details"]["requestId"]]
        assert [r["requestId"] for r in details["results"]] == [first["details"]["requestId"]]
        stats = await rt.statistics()
        assert stats.panel_visible is False
        assert stats.pending == (second["details"]["requestId"],)


async def test_aborting_a_wait_leaves_forms_queued_and_answers_return_to_delivery(
    settings: Path,
) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        with trio.move_on_after(1):
            await rt.call_tool("wait_for_answers", {}, "w1")
        submit(rt.events, "tool:c1", {"kind": "cancel"})
        await settle()
        [message] = await rt.turn_boundary()
        assert message["details"]["result"]["cancelled"] is True


async def test_herdr_wait_holds_its_own_status(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await settle()
        assert log.herdr() == [True]
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "wait_for_answers", {}, "w1")
            await settle()
            await rt.defer_queue()  # releases the panel and the wait
            await settle()
        assert log.herdr() == [True, False]
        await rt.show_queue()
        await settle()
        assert log.herdr() == [True, False, True]
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "wait_for_answers", {}, "w2")
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
        assert log.herdr() == [True, False, True, False]


# -- modes --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["print", "json", "rpc"])
async def test_non_tui_calls_get_the_fallback(settings: Path, mode: str) -> None:
    surface = RecordingSurface()
    async with open_runtime(mode=mode, settings=settings, surface=surface) as rt:
        log = EventLog()
        log.attach(rt.events)
        fg = await rt.call_tool("ask_user", payload("a"), "c1")
        bg = await rt.call_tool("ask_user", payload("a", background=True), "c2")
        wait = await rt.call_tool("wait_for_answers", {}, "c3")
        stats = await rt.statistics()
    for result in (fg, bg):
        text = result["content"][0]["text"]
        assert "Needs user input: ask_user requires interactive TUI mode." in text
        assert "- Type your own [custom]" in text
        assert result["structuredContent"]["cancelled"] is True
    assert wait["isError"] is True
    assert wait["content"][0]["text"] == "wait_for_answers requires interactive TUI mode."
    assert stats.pending == ()
    assert surface.shown == []
    assert log.herdr() == []


async def test_background_only_mode_queues_every_call(tmp_path: Path) -> None:
    settings = settings_file(tmp_path, questionMode="background-only")
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        stale = await rt.call_tool("ask_user", {**payload("a"), "background": False}, "c1")
        wait = await rt.call_tool("wait_for_answers", {}, "c2")
    assert stale["structuredContent"]["status"] == "queued"
    assert wait["isError"] is True
    assert "wait_for_answers" not in rt.tool_names()


# -- external UI --------------------------------------------------------------------------


class Provider:
    def __init__(self, response: Any = None, error: Exception | None = None, hang: bool = False):
        self.id = "test-ui"
        self.version = 1
        self.response = response
        self.error = error
        self.hang = hang
        self.requests: list[dict[str, Any]] = []
        self.cancelled = False

    async def open(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        try:
            if self.hang:
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            self.cancelled = True
            raise
        if self.error is not None:
            raise self.error
        return self.response


async def ask_with_provider(
    settings: Path, provider: Provider, mode: str = "rpc"
) -> dict[str, Any]:
    async with open_runtime(mode=mode, settings=settings, surface=RecordingSurface()) as rt:
        rt.events.on(ev.EXTERNAL_UI, lambda c: c["connect"](provider))
        return await rt.call_tool("ask_user", payload("a"), "c1")


async def test_external_ui_answers_a_non_tui_call(settings: Path) -> None:
    provider = Provider({"kind": "answer", "answers": {"a": {"values": ["a2"], "note": "why"}}})
    result = await ask_with_provider(settings, provider)
    assert result["structuredContent"]["answers"]["a"] == {
        "values": ["a2"],
        "labels": ["Option a2"],
        "note": "why",
    }
    assert result["details"]["answers"]["a"]["indices"] == [2]
    [request] = provider.requests
    assert request["flowId"] == "tool:c1" and request["version"] == 1


@pytest.mark.parametrize(
    ("provider", "text"),
    [
        (
            Provider({"kind": "weird"}),
            'External ask UI returned an invalid response: Submit response kind must be "answer" or "cancel".',
        ),
        (
            Provider(None),
            "External ask UI returned an invalid response: Submit response must be an object.",
        ),
        (
            Provider({"kind": "answer", "answers": {"a": {"values": ["zz"]}}}),
            'External ask UI returned an invalid response: Unknown option value "zz" for question "a".',
        ),
        (Provider(error=ConnectionError("disconnected")), "disconnected"),
    ],
)
async def test_external_ui_failures_are_tool_errors(
    settings: Path, provider: Provider, text: str
) -> None:
    result = await ask_with_provider(settings, provider)
    assert result == {"content": [{"type": "text", "text": text}], "isError": True}


async def test_external_ui_is_cancelled_when_the_call_is_aborted(settings: Path) -> None:
    provider = Provider(hang=True)
    with trio.move_on_after(1):
        await ask_with_provider(settings, provider)
    assert provider.cancelled


async def test_external_ui_refuses_a_second_provider_and_is_never_offered_in_tui(
    settings: Path,
) -> None:
    offers: list[bool] = []
    async with open_runtime(mode="json", settings=settings, surface=RecordingSurface()) as rt:
        first = Provider({"kind": "cancel"})

        def offer(connection: dict[str, Any]) -> None:
            offers.append(connection["connect"](first))
            offers.append(connection["connect"](Provider({"kind": "cancel"})))

        rt.events.on(ev.EXTERNAL_UI, offer)
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert offers == [True, False]
    assert result["structuredContent"]["cancelled"] is True
    async with open_runtime(mode="tui", settings=settings, surface=RecordingSurface()) as rt:
        rt.events.on(ev.EXTERNAL_UI, lambda c: offers.append("tui"))
        auto_answer(rt.events, lambda p: {"kind": "cancel"})
        await rt.call_tool("ask_user", payload("a"), "c1")
    assert "tui" not in offers


# -- events and lifecycle -----------------------------------------------------------------


async def test_a_broken_listener_never_breaks_the_runtime(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:

        def broken(_payload: Any) -> None:
            raise RuntimeError("listener bug")

        for channel in (ev.STARTED, ev.COMPLETED, ev.HERDR_BLOCKED):
            rt.events.on(channel, broken)
        auto_answer(rt.events, lambda p: answer({"a": ["a1"]}))
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert result["structuredContent"]["cancelled"] is False


async def test_recovered_forms_emit_nothing_before_the_body_runs(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
    async with open_runtime(session=session, settings=settings, surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await settle()
        [started] = log.of(ev.STARTED)
        assert started["flowId"] == "tool:c1"
        assert started["source"] == "background"


def count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(count_tasks(child) for n in task.child_nurseries for child in n.child_tasks)


async def test_disposal_leaves_no_task_running(settings: Path) -> None:
    root = trio.lowlevel.current_root_task()
    before = count_tasks(root)
    async with open_runtime(settings=settings, surface=RecordingSurface()) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        async with trio.open_nursery() as n:
            n.start_soon(rt.call_tool, "wait_for_answers", {}, "w1")
            await settle()
            assert count_tasks(root) > before + 3
            n.cancel_scope.cancel()
    await settle()
    assert count_tasks(root) == before


async def test_esc_in_the_panel_defers_the_queue_and_keeps_the_draft(settings: Path) -> None:
    surface = RecordingSurface()
    async with open_runtime(settings=settings, surface=surface) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", "b", background=True), "c1")
        await settle()
        await rt.send_command("tool:c1", fs.Number(1))
        await rt.send_command("tool:c1", fs.Cancel())
        await settle()
        stats = await rt.statistics()
        assert stats.panel_visible is False
        assert stats.visible is None
        assert len(stats.pending) == 1 and stats.completed == 0
        await rt.show_queue()
        await settle()
        assert surface.states["tool:c1"].drafts[0].selected == (0,)
        assert await rt.turn_boundary() == []


async def test_an_aborted_external_call_is_recorded_as_cancelled(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    provider = Provider(hang=True)
    async with open_runtime(
        session=session, mode="rpc", settings=settings, surface=RecordingSurface()
    ) as rt:
        rt.events.on(ev.EXTERNAL_UI, lambda c: c["connect"](provider))
        with trio.move_on_after(1):
            await rt.call_tool("ask_user", payload("a"), "c1")
    assert provider.cancelled
    entries = SessionFile.open(session, readonly=True).branch()
    [completed] = [e for e in entries if e.type == "ask:history-completed"]
    assert completed.data["result"]["cancelled"] is True
    [aborted] = [e for e in entries if e.type == "tool-result"]
    assert aborted.data["result"]["content"][0]["text"] == "Tool call aborted"
