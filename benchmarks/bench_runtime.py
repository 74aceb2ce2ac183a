"""Runtime throughput: background forms enqueued and answered through ``submit`` events.

Prints forms/s for enqueue + answer of N forms (in-memory session, headless surface), with one
agent task calling ``ask_user`` and with 16 calling at once (their journal writes are written
together), the Python memory per queued form (tracemalloc, all N queued before any is
answered), ``wait_for_answers`` over N forms, and the median latency from a ``submit`` event to
the ``wait_for_answers`` result, and the CPU time per form of the single-caller run (steadier
than the rates on a loaded machine). ``figures()`` returns the same numbers.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import trio
import trio.testing

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


def _answer(bus: ev.EventBus, flow_id: str) -> None:
    bus.emit(
        ev.SUBMIT,
        {
            "version": 1,
            "requestId": "bench",
            "flowId": flow_id,
            "response": {"kind": "answer", "answers": {"q": {"values": ["b"]}}},
        },
    )


async def throughput(
    count: int, settings: Path, *, trace: bool = False, callers: int = 1
) -> tuple[float, float]:
    """Forms/s for enqueue + answer; with ``trace``, also the traced memory per queued form
    (tracemalloc slows everything down, so rates and memory come from separate runs).
    ``callers`` tasks share the ``ask_user`` calls (each one call after the other)."""
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        done = trio.Event()
        answered = 0

        def on_completed(_payload: Any) -> None:
            nonlocal answered
            answered += 1
            if answered == count:
                done.set()

        rt.events.on(ev.COMPLETED, on_completed)
        if trace:
            tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0] if trace else 0
        start = time.perf_counter()

        async def caller(first: int) -> None:
            for i in range(first, count, callers):
                await rt.call_tool("ask_user", FORM, tool_call_id=f"c{i}")

        async with trio.open_nursery() as nursery:
            for first in range(callers):
                nursery.start_soon(caller, first)
        queued_memory = tracemalloc.get_traced_memory()[0] - base if trace else 0
        if trace:
            tracemalloc.stop()
        rt.events.on(ev.STARTED, lambda p: _answer(rt.events, p["flowId"]))
        await rt.show_queue()
        # The first form was shown before the listener existed: answer it by hand (with
        # several callers, the first queued is not necessarily c0).
        visible = (await rt.statistics()).visible
        assert visible is not None
        _answer(rt.events, visible)
        await done.wait()
        elapsed = time.perf_counter() - start
        await rt.turn_boundary()
    return count / elapsed, queued_memory / count


async def wait_over(count: int, settings: Path) -> float:
    """Forms/s for one ``wait_for_answers`` over ``count`` queued forms, answered one by one:
    every completion is routed to the wait (linear if each routing is O(1))."""
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        for i in range(count):
            await rt.call_tool("ask_user", FORM, tool_call_id=f"w{i}")
        result: dict[str, Any] = {}
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                result["wait"] = await rt.call_tool("wait_for_answers", {})

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            rt.events.on(ev.STARTED, lambda p: _answer(rt.events, p["flowId"]))
            _answer(rt.events, "tool:w0")
        elapsed = time.perf_counter() - start
        assert result["wait"]["details"]["status"] == "complete"
    return count / elapsed


async def latency(rounds: int, settings: Path) -> float:
    samples = []
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        for i in range(rounds):
            await rt.call_tool("ask_user", FORM, tool_call_id=f"l{i}")
            async with trio.open_nursery() as nursery:
                result: dict[str, Any] = {}

                async def wait(into: dict[str, Any]) -> None:
                    into["wait"] = await rt.call_tool("wait_for_answers", {})
                    into["at"] = time.perf_counter()

                nursery.start_soon(wait, result)
                await trio.testing.wait_all_tasks_blocked()
                sent = time.perf_counter()
                _answer(rt.events, f"tool:l{i}")
            samples.append(result["at"] - sent)
    return statistics.median(samples)


def figures(
    sizes: tuple[int, ...] = (1_000, 10_000), waits: tuple[int, ...] = (10_000, 50_000)
) -> dict[str, float]:
    """Every figure ``main`` prints, by name: ``enqueue+answer/<n>`` and
    ``enqueue+answer/<n>/16-callers`` (forms/s), ``cpu-us-per-form/<n>`` (CPU time of the
    single-caller run), ``kib-per-form/<n>``, ``wait/<n>`` (forms/s), ``latency-ms``."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Path(tmp) / "settings.json"
        for count in sizes:
            cpu = time.process_time()
            out[f"enqueue+answer/{count}"] = trio.run(throughput, count, settings)[0]
            # CPU time (this process, the runtime's open and close included): steadier than
            # the rate on a shared, loaded machine.
            out[f"cpu-us-per-form/{count}"] = (time.process_time() - cpu) / count * 1e6
            parallel = functools.partial(throughput, count, settings, callers=16)
            out[f"enqueue+answer/{count}/16-callers"] = trio.run(parallel)[0]
            traced = functools.partial(throughput, count, settings, trace=True)
            out[f"kib-per-form/{count}"] = trio.run(traced)[1] / 1024
        for count in waits:
            out[f"wait/{count}"] = trio.run(wait_over, count, settings)
        out["latency-ms"] = trio.run(latency, 200, settings) * 1e3
    return out


def main(waits: tuple[int, ...] = (10_000, 50_000)) -> None:
    sizes = (1_000, 10_000)
    found = figures(sizes, waits)
    for count in sizes:
        print(
            f"enqueue+answer {count:>6} forms: {found[f'enqueue+answer/{count}']:8.0f} forms/s "
            f"(16 callers: {found[f'enqueue+answer/{count}/16-callers']:6.0f}), "
            f"{found[f'kib-per-form/{count}']:6.1f} KiB per queued form, "
            f"CPU {found[f'cpu-us-per-form/{count}']:5.0f} us per form"
        )
    for count in waits:
        print(f"wait_for_answers over {count:>6} forms: {found[f'wait/{count}']:8.0f} forms/s")
    print(f"submit -> wait result latency: median {found['latency-ms']:.3f} ms")


if __name__ == "__main__":
    main()
