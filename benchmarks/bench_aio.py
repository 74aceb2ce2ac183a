"""The asyncio runtime (``pi_agent_ask.aio``): what crossing from asyncio to Trio costs.

Prints the median round trip of one hook call (``statistics()``) from asyncio and, for
comparison, from Trio on the same runtime code; background forms/s enqueued and answered
through ``submit`` events from asyncio; and the median time to open and close a runtime.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import pi_agent_ask.aio as aio
from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime

FORM = {
    "background": True,
    "questions": [
        {
            "id": "q",
            "prompt": "Pick one?",
            "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
        }
    ],
}
CALLS = 2000
FORMS = 300
OPENS = 20


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


async def _timed(fn: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return samples


async def _trio_hook(settings: Path) -> float:
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        return _median_us(await _timed(rt.statistics, CALLS))


async def _aio_hook(settings: Path) -> float:
    async with aio.open_runtime(settings=settings, surface=NullSurface()) as rt:
        return _median_us(await _timed(rt.statistics, CALLS))


async def _aio_forms(settings: Path) -> float:
    async with aio.open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        done = asyncio.Event()
        answered = 0

        def on_completed(_payload: Any) -> None:
            nonlocal answered
            answered += 1
            if answered == FORMS:
                done.set()

        def on_started(started: dict[str, Any]) -> None:
            rt.events.emit(
                ev.SUBMIT,
                {
                    "version": 1,
                    "requestId": "bench",
                    "flowId": started["flowId"],
                    "response": {"kind": "answer", "answers": {"q": {"values": ["b"]}}},
                },
            )

        rt.events.on(ev.COMPLETED, on_completed)
        rt.events.on(ev.STARTED, on_started)
        start = time.perf_counter()
        for i in range(FORMS):
            await rt.call_tool("ask_user", FORM, tool_call_id=f"c{i}")
        await done.wait()
        elapsed = time.perf_counter() - start
        await rt.turn_boundary()
    return FORMS / elapsed


async def _aio_open_close(settings: Path) -> float:
    samples = []
    for _ in range(OPENS):
        start = time.perf_counter()
        async with aio.open_runtime(settings=settings, surface=NullSurface()):
            pass
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def _plain_loop(main: Callable[[], Awaitable[float]]) -> float:
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        return runner.run(main())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Path(tmp) / "settings.json"
        settings.write_text(json.dumps({"schemaVersion": 6}))
        trio_us = trio.run(_trio_hook, settings)
        aio_us = _plain_loop(lambda: _aio_hook(settings))
        print(f"hook round trip (statistics), median of {CALLS}:")
        print(f"  from Trio    {trio_us:8.1f} us")
        print(f"  from asyncio {aio_us:8.1f} us  (Trio in guest mode)")
        rate = _plain_loop(lambda: _aio_forms(settings))
        print(f"background forms enqueued + answered from asyncio: {rate:8.0f} forms/s")
        opened = _plain_loop(lambda: _aio_open_close(settings))
        print(f"open + close an asyncio runtime, median of {OPENS}: {opened:8.1f} ms")


if __name__ == "__main__":
    main()
