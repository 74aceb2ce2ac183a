"""Helpers for runtime tests: settings files, a recording surface, a scripted answerer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.form import state as fs


def settings_file(tmp_path: Path, **behaviour: Any) -> Path:
    path = tmp_path / "settings.json"
    body: dict[str, Any] = {"schemaVersion": 6}
    if behaviour:
        body["behaviour"] = behaviour
    path.write_text(json.dumps(body))
    return path


def question(qid: str = "a", kind: str = "single", n: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "id": qid,
        "prompt": f"Question {qid}?",
        "type": kind,
        "options": [{"value": f"{qid}{i}", "label": f"Option {qid}{i}"} for i in range(1, n + 1)],
        **extra,
    }


def payload(*qids: str, background: bool = False, title: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"questions": [question(qid) for qid in (qids or ("a",))]}
    if background:
        body["background"] = True
    if title is not None:
        body["title"] = title
    return body


@attrs.define(eq=False)
class RecordingSurface:
    """A surface that records what the runtime shows, for assertions."""

    shown: list[str] = attrs.field(factory=list)
    hidden: list[str] = attrs.field(factory=list)
    states: dict[str, fs.FormState] = attrs.field(factory=dict)
    visible: str | None = None

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        self.shown.append(flow_id)
        self.states[flow_id] = state
        self.visible = flow_id

    def update(self, flow_id: str, state: fs.FormState) -> None:
        self.states[flow_id] = state

    def hide(self, flow_id: str) -> None:
        self.hidden.append(flow_id)
        if self.visible == flow_id:
            self.visible = None


@attrs.define(eq=False)
class EventLog:
    """Records every event on the runtime's bus, in order."""

    events: list[tuple[str, Any]] = attrs.field(factory=list)

    def attach(self, bus: ev.EventBus) -> None:
        for channel in (
            ev.STARTED,
            ev.COMPLETED,
            ev.SUBMIT_RESULT,
            ev.HERDR_BLOCKED,
        ):
            bus.on(channel, lambda payload, channel=channel: self.events.append((channel, payload)))

    def of(self, channel: str) -> list[Any]:
        return [payload for name, payload in self.events if name == channel]

    def herdr(self) -> list[bool]:
        return [payload["active"] for payload in self.of(ev.HERDR_BLOCKED)]


def submit(
    bus: ev.EventBus, flow_id: str, response: dict[str, Any], request_id: str = "s1"
) -> None:
    bus.emit(
        ev.SUBMIT, {"version": 1, "requestId": request_id, "flowId": flow_id, "response": response}
    )


def answer(values: dict[str, list[str]]) -> dict[str, Any]:
    return {"kind": "answer", "answers": {qid: {"values": v} for qid, v in values.items()}}


def auto_answer(
    bus: ev.EventBus, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> list[dict[str, Any]]:
    """Answer every started flow with ``decide(started_payload)`` (None: leave it open)."""
    started: list[dict[str, Any]] = []

    def on_started(payload: dict[str, Any]) -> None:
        started.append(payload)
        response = decide(payload)
        if response is not None:
            submit(bus, payload["flowId"], response)

    bus.on(ev.STARTED, on_started)
    return started
