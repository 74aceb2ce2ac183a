"""The form actor's edges, as mutation testing of ``actors/form.py`` found them unpinned.

``docs/mutation-actors.md`` lists the mutants each test kills. Through the public runtime
where the behaviour shows there (surfaces that break, settings applied to a visible form,
remote answers); ``close_inbox`` and ``failure_text`` directly, since their callers only
ever hand them the common case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import (
    FLOW_NOT_ACTIVE,
    Ended,
    FormInput,
    NullSurface,
    RemoteResponse,
    UserCommand,
    close_inbox,
    failure_text,
)
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.settings import load_settings

from .runtime_support import (
    EventLog,
    RecordingSurface,
    answer,
    payload,
    settings_file,
    settle,
    submit,
)

GUARD = 30  # seconds; only stops a hang


@attrs.define(eq=False)
class BreakingSurface(RecordingSurface):
    """A surface whose ``show`` or ``hide`` raises ``error``."""

    breaks: str = "show"
    error: Exception = attrs.field(factory=lambda: RuntimeError("screen gone"))

    def show(self, flow_id: str, state: fs.FormState, commands: Any) -> None:
        if self.breaks == "show":
            raise self.error
        super().show(flow_id, state, commands)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        super().hide(flow_id, ended)
        if self.breaks == "hide":
            raise self.error


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (RuntimeError("screen gone"), "screen gone"),
        (OSError(), "OSError"),
        (ExceptionGroup("drawing", [ValueError("bad cell"), KeyError("x")]), "bad cell"),
    ],
    ids=["message", "no-message", "group"],
)
async def test_a_surface_that_cannot_show_fails_the_call_with_its_cause(
    tmp_path: Path, error: Exception, text: str
) -> None:
    surface = BreakingSurface(error=error)
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=surface) as rt:
            result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert result["isError"] is True
    assert result["content"][0]["text"] == f"Question form failed: {text}"


async def test_a_surface_that_cannot_hide_does_not_lose_the_answer(tmp_path: Path) -> None:
    surface = BreakingSurface(breaks="hide")
    with trio.fail_after(GUARD):
        async with (
            open_runtime(settings=settings_file(tmp_path), surface=surface) as rt,
            trio.open_nursery() as nursery,
        ):
            out: dict[str, Any] = {}

            async def call() -> None:
                out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")

            nursery.start_soon(call)
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a2"]}))
    assert out["result"].get("isError") is not True
    assert out["result"]["details"]["answers"]["a"]["values"] == ["a2"]


async def test_a_headless_surface_records_the_forms_it_was_given(tmp_path: Path) -> None:
    surface = NullSurface()
    async with open_runtime(settings=settings_file(tmp_path), surface=surface) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
    assert surface.shown == ["tool:b1"]


async def test_settings_applied_while_a_form_is_visible_reach_it(tmp_path: Path) -> None:
    surface = RecordingSurface()
    (tmp_path / "other").mkdir()
    other = settings_file(tmp_path / "other", confirmDismissWhenDirty=False)
    async with open_runtime(settings=settings_file(tmp_path), surface=surface) as rt:
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        assert surface.states["tool:b1"].settings.confirm_dismiss_when_dirty is True
        rt.apply_settings(load_settings(other))
        await settle()
        changed = surface.states["tool:b1"]
        assert changed.settings.confirm_dismiss_when_dirty is False
        assert changed.outcome is None
        # The form goes on: it still takes an answer.
        submit(rt.events, "tool:b1", answer({"a": ["a1"]}))
        await settle()
        wake = rt.wakeups.receive_nowait()
    assert wake["details"]["result"]["answers"]["a"]["values"] == ["a1"]


async def submit_result(tmp_path: Path, response: dict[str, Any]) -> dict[str, Any]:
    async with open_runtime(settings=settings_file(tmp_path), surface=RecordingSurface()) as rt:
        log = EventLog()
        log.attach(rt.events)
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        submit(rt.events, "tool:b1", response)
        await settle()
        [result] = log.of(ev.SUBMIT_RESULT)
        stats = await rt.statistics()
        assert stats.completed == 0  # the form stays open
    return dict(result)


async def test_a_remote_answer_in_another_mode_is_refused(tmp_path: Path) -> None:
    result = await submit_result(tmp_path, {**answer({"a": ["a1"]}), "mode": "draft"})
    assert result["ok"] is False
    assert result["error"] == "invalid_answer"
    assert result["message"] == 'Answer mode must be "submit".'


async def test_an_invalid_remote_answer_is_an_invalid_answer(tmp_path: Path) -> None:
    result = await submit_result(tmp_path, answer({"a": ["nope"]}))
    assert result["ok"] is False
    assert result["error"] == "invalid_answer"


# -- close_inbox and failure_text ---------------------------------------------------------------


async def test_a_closed_inbox_answers_waiting_submissions_and_refuses_later_ones() -> None:
    commands, inbox = trio.open_memory_channel[FormInput](8)
    gone_tx, gone_rx = trio.open_memory_channel[tuple[str, str] | None](1)
    gone_rx.close()  # this submitter stopped waiting
    waiting_tx, waiting_rx = trio.open_memory_channel[tuple[str, str] | None](1)
    commands.send_nowait(RemoteResponse({"kind": "cancel"}, gone_tx))
    commands.send_nowait(UserCommand(fs.NextOption()))
    commands.send_nowait(RemoteResponse({"kind": "cancel"}, waiting_tx))
    close_inbox(inbox)
    assert waiting_rx.receive_nowait() == FLOW_NOT_ACTIVE
    with pytest.raises(trio.EndOfChannel):
        waiting_rx.receive_nowait()  # the reply channel is closed after its one reply
    with pytest.raises(trio.BrokenResourceError):
        commands.send_nowait(UserCommand(fs.NextOption()))


def test_failure_text_names_the_first_real_cause() -> None:
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [OSError("disk")]), ValueError()])
    assert failure_text(nested) == "disk"
    assert failure_text(ExceptionGroup("g", [ValueError(), KeyError("k")])) == "ValueError"
    assert failure_text(RuntimeError("plain")) == "plain"
    assert failure_text(RuntimeError()) == "RuntimeError"
