"""Helpers for runtime tests: settings files, a recording surface, a scripted answerer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import attrs
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import Ended, FormInput
from pi_agent_ask.actors.runtime import Runtime, open_runtime
from pi_agent_ask.form import state as fs


class Box:
    """A one-shot reply channel for reducer tests: remembers what it got and whether it was
    closed, and refuses a reply after close."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.closed = False

    def send_nowait(self, value: Any, /) -> None:
        assert not self.closed, "a reply after close"
        self.values.append(value)

    def close(self) -> None:
        self.closed = True


async def settle() -> None:
    """Let every task run until all are blocked."""
    await trio.testing.wait_all_tasks_blocked()


def branch_types(path: Path) -> list[str]:
    """The entry types of a session file's active branch, root first."""
    from pi_agent_ask.persistence.session_file import SessionFile

    with SessionFile.open(path, readonly=True) as session:
        return [entry.type for entry in session.branch()]


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

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
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


# ------------------------------------------------------------------------------------------
# A gated journal: writes that wait for the test, or fail when it says so
# ------------------------------------------------------------------------------------------

GatePosition = Literal["before", "after"]
"""Where a held write waits: ``before`` it reaches the persistence actor (nothing written
yet), or ``after`` the actor wrote it (on the file, its reply not yet handed back)."""


class InjectedDiskError(OSError):
    """The failure a gate injects into a write (the disk went away)."""


@attrs.define(eq=False)
class WriteGate:
    """Sits between the runtime and its journal (``gated_journal``).

    Open, it lets every write through. ``hold(position)`` makes every write from then on wait
    at the gate, before or after the actor performs it, until ``release()``; ``fail_next``
    makes the next write of an entry type raise instead of being performed. ``held`` counts the writes waiting
    now, so a test knows a cancellation it sends lands while a write is in flight.
    """

    position: GatePosition | None = None
    held: int = 0
    held_types: list[str] = attrs.field(factory=list)
    failures: dict[str, list[BaseException]] = attrs.field(factory=dict)
    """Per entry type, the exceptions its next writes raise, first first."""
    failed_types: list[str] = attrs.field(factory=list)
    _release: trio.Event = attrs.field(factory=trio.Event)

    def hold(self, position: GatePosition) -> None:
        self.position = position
        self._release = trio.Event()

    def release(self) -> None:
        self.position = None
        self._release.set()

    def fail_next(self, entry_type: str, error: BaseException) -> None:
        self.failures.setdefault(entry_type, []).append(error)

    @asynccontextmanager
    async def open_runtime(self, **options: Any) -> AsyncIterator[Runtime]:
        """``open_runtime(**options)`` with every journal write going through this gate
        (``gated_journal`` around it)."""
        with gated_journal(self):
            async with open_runtime(**options) as rt:
                yield rt

    async def through(self, entry_type: str, write: Callable[[], Awaitable[Any]]) -> Any:
        if self.failures.get(entry_type):
            self.failed_types.append(entry_type)
            raise self.failures[entry_type].pop(0)
        position = self.position
        if position == "before":
            await self._wait(entry_type)
        result = await write()
        if position == "after":
            await self._wait(entry_type)
        return result

    async def _wait(self, entry_type: str) -> None:
        release = self._release
        self.held += 1
        self.held_types.append(entry_type)
        try:
            await release.wait()
        finally:
            self.held -= 1


@contextmanager
def gated_journal(gate: WriteGate) -> Iterator[WriteGate]:
    """Route every runtime's journal writes and session switches through ``gate``.

    The runtime writes through ``SessionJournal`` (the journal of whichever session it is on);
    its ``append``, ``append_many`` and ``switch`` go through the gate while this is active.
    A chain is known to the gate by its first entry type that has a failure waiting, else by
    its first (the queue writes the entries of several transitions as one chain).
    """
    from pi_agent_ask.actors.session import SessionJournal

    append, append_many, switch = (
        SessionJournal.append,
        SessionJournal.append_many,
        SessionJournal.switch,
    )

    async def gated_append(self: Any, type_: str, data: Any) -> Any:
        return await gate.through(type_, lambda: append(self, type_, data))

    async def gated_append_many(self: Any, items: Any) -> Any:
        items = list(items)
        types = [entry_type for entry_type, _data in items]
        failing = [entry_type for entry_type in types if gate.failures.get(entry_type)]
        first = failing[0] if failing else types[0] if types else ""
        return await gate.through(first, lambda: append_many(self, items))

    async def gated_switch(self: Any, reason: str, session: Any) -> Any:
        return await gate.through(f"switch:{reason}", lambda: switch(self, reason, session))

    with (
        mock.patch.object(SessionJournal, "append", gated_append),
        mock.patch.object(SessionJournal, "append_many", gated_append_many),
        mock.patch.object(SessionJournal, "switch", gated_switch),
    ):
        yield gate
