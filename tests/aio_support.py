"""Helpers for the asyncio tests: loops to run on, started-flow queues, an awaitable terminal.

pytest runs these suites in ``trio_mode``; asyncio tests are plain functions that run their
body with :func:`run`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask.ui.testing import VirtualTerminal

T = TypeVar("T")

LOOPS = ("guest", "trio-asyncio")
"""``guest``: a plain asyncio loop (Trio in guest mode); ``trio-asyncio``: the loop
``asyncio.run`` makes once ``trio_asyncio`` is imported (Trio underneath already)."""

DEADLINE = 30.0


def run(main: Callable[[], Awaitable[T]], loop: str = "guest") -> T:
    """Run ``main()`` on a fresh asyncio loop of the given kind, with a deadline."""

    async def guarded() -> T:
        async with asyncio.timeout(DEADLINE):
            return await main()

    if loop == "guest":
        factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.SelectorEventLoop
    else:
        import trio_asyncio  # noqa: F401  (its import makes asyncio's new loops trio-asyncio's)

        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(guarded())


def settings_file(tmp_path: Path, **behaviour: Any) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schemaVersion": 6, "behaviour": behaviour}))
    return path


async def settle(rt: Any) -> None:
    """Let the asyncio side run, then wait until every Trio task of the runtime is blocked."""
    await asyncio.sleep(0)
    await rt.run_trio(trio.testing.wait_all_tasks_blocked)


class Flows:
    """Every ``pi-agent-ask:started`` payload, to await from asyncio; answers by ``submit``."""

    def __init__(self, bus: ev.EventBus) -> None:
        self.bus = bus
        self.started: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.completed: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        bus.on(ev.STARTED, self.started.put_nowait)
        bus.on(ev.COMPLETED, self.completed.append)
        bus.on(ev.SUBMIT_RESULT, self.results.append)

    async def next(self) -> dict[str, Any]:
        return await self.started.get()

    def submit(self, flow_id: str, response: dict[str, Any]) -> None:
        self.bus.emit(
            ev.SUBMIT, {"version": 1, "requestId": "s1", "flowId": flow_id, "response": response}
        )

    def answer(self, flow_id: str, **values: list[str]) -> None:
        self.submit(
            flow_id,
            {"kind": "answer", "answers": {qid: {"values": v} for qid, v in values.items()}},
        )

    async def answer_next(self, **values: list[str]) -> dict[str, Any]:
        started = await self.next()
        self.answer(started["flowId"], **values)
        return started


class AsyncTerminal(VirtualTerminal):
    """A virtual terminal whose screen can be awaited from asyncio."""

    def __init__(self, columns: int = 100, lines: int = 30) -> None:
        super().__init__(columns, lines)
        self.changed = asyncio.Event()

    def flush(self) -> None:
        super().flush()
        self.changed.set()

    async def wait_text(self, text: str) -> None:
        while text not in self.text():
            self.changed.clear()
            await self.changed.wait()

    async def wait_gone(self, text: str) -> None:
        while text in self.text():
            self.changed.clear()
            await self.changed.wait()
