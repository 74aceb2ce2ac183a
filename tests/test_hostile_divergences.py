"""Agent-facing behaviour that differed from the TypeScript original's own tests (issue 10,
items 11-13; item 10 is in tests/test_state.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import Ended, NullSurface, failure_text
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import EventLog, payload, settings_file


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return settings_file(tmp_path, historyTools=True)


class RejectingSurface:
    """A UI that rejects every form with ``UI failed`` (the original's test)."""

    def show(self, flow_id: str, state: fs.FormState, commands: Any) -> None:
        raise RuntimeError("UI failed")

    def update(self, flow_id: str, state: fs.FormState) -> None:
        pass

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        pass


# -- 11. a UI failure names its cause ----------------------------------------------------------


def test_failure_text_is_the_cause_never_the_group() -> None:
    group = ExceptionGroup("Exceptions from Trio nursery (1 sub-exception)", [EOFError()])
    assert failure_text(ExceptionGroup("outer", [group])) == "EOFError"
    assert failure_text(BaseExceptionGroup("g", [ConnectionError("UI disconnected")])) == (
        "UI disconnected"
    )


async def test_a_rejecting_ui_fails_the_call_with_its_message(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(session=session, settings=settings, surface=RejectingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        result = await rt.call_tool("ask_user", payload("a"), "c1")
        assert result == {
            "content": [{"type": "text", "text": "Question form failed: UI failed"}],
            "isError": True,
        }
        assert log.herdr() == [True, False]
        listed = await rt.call_tool("list_ask_history", {}, "c2")
        [record] = listed["details"]["records"]
        assert record["status"] == "error"
        key = {"requestId": record["requestId"], "questionId": "a"}
        read = await rt.call_tool("read_ask_history", key, "c3")
        assert read["details"]["record"]["error"] == "UI failed"


async def test_a_rejecting_ui_fails_a_background_form_with_its_message(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=RejectingSurface()) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "c1")
        await trio.testing.wait_all_tasks_blocked()
        [message] = await rt.turn_boundary()
    assert message["details"]["error"] == "UI failed"
    assert message["content"].endswith("\nQuestion form failed: UI failed")


async def test_a_broken_terminal_surface_names_the_real_cause(
    settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_agent_ask.ui import surface as terminal

    async def broken(surface: Any, *, task_status: Any, **_kwargs: Any) -> None:
        # Fails the way a real one does: inside its own nursery, so the error is a group.
        async with trio.open_nursery() as nursery:
            task_status.started()

            async def fail() -> None:
                await trio.lowlevel.checkpoint()
                raise ConnectionError("UI disconnected")

            nursery.start_soon(fail)

    monkeypatch.setattr(terminal, "run_terminal_surface", broken)
    async with open_runtime(settings=settings, mode="tui") as rt:
        await trio.testing.wait_all_tasks_blocked()
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert result["content"][0]["text"] == "Question form failed: UI disconnected"


# -- 12. nothing pending: no Herdr ---------------------------------------------------------------


async def test_wait_for_answers_with_nothing_pending_emits_no_herdr(settings: Path) -> None:
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        result = await rt.call_tool("wait_for_answers", {}, "w1")
        assert result["details"]["status"] == "complete"
        assert log.herdr() == []


# -- 13. an aborted external call announces its end ------------------------------------------------


class HangingProvider:
    id = "bridge"
    version = 1

    def __init__(self) -> None:
        self.opened = trio.Event()

    async def open(self, request: dict[str, Any]) -> Any:
        self.opened.set()
        await trio.sleep_forever()


async def test_aborting_an_external_call_emits_completed_with_the_cancelled_result(
    settings: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.pas"
    provider = HangingProvider()
    async with open_runtime(session=session, mode="rpc", settings=settings) as rt:
        log = EventLog()
        log.attach(rt.events)
        rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rt.call_tool, "ask_user", payload("a"), "c1")
            await provider.opened.wait()
            nursery.cancel_scope.cancel()
        [started] = log.of(ev.STARTED)
        [completed] = log.of(ev.COMPLETED)
    assert completed["flowId"] == started["flowId"] == "tool:c1"
    assert completed["toolCallId"] == "c1"
    assert completed["result"]["cancelled"] is True
    with SessionFile.open(session, readonly=True) as opened:
        [recorded] = [e for e in opened.branch() if e.type == "ask:history-completed"]
    assert recorded.data["result"]["cancelled"] is True
