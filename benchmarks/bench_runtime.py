"""Runtime throughput: background forms enqueued and answered through ``submit`` events.

Prints forms/s for enqueue + answer of N forms (in-memory session, headless surface), with one
agent task calling ``ask_user`` and with 16 calling at once (their journal writes are written
together), the Python memory per queued form (tracemalloc, all N queued before any is
answered), ``wait_for_answers`` over N forms, and the median latency from a ``submit`` event to
the ``wait_for_answers`` result, and the CPU time per form of the single-caller run (steadier
than the rates on a loaded machine). The same single-caller run with a session FILE
(``open_runtime(session=path)``: every entry written, checkpoints and all), and the work of the
checkpoints alone with N forms pending (``checkpoint_cost``: the journal's frames of N
background forms appended to a session file, the time spent writing its checkpoints per form,
and their bytes as a share of the entries' bytes). Each forms/s figure of the enqueue + answer
runs is the median of ``RATE_ROUNDS`` runs (``median_rate``). ``figures()`` returns the same
numbers.
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
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile

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
    count: int,
    settings: Path,
    *,
    trace: bool = False,
    callers: int = 1,
    session: Path | None = None,
) -> tuple[float, float]:
    """Forms/s for enqueue + answer; with ``trace``, also the traced memory per queued form
    (tracemalloc slows everything down, so rates and memory come from separate runs).
    ``callers`` tasks share the ``ask_user`` calls (each one call after the other).
    ``session``: a session file (a new one) instead of the in-memory session."""
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
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


RATE_ROUNDS = 3
"""Runs behind each forms/s figure of ``figures`` (their median): one run moves with the
machine's load by 10-20 % from one minute to the next."""


def median_rate(count: int, settings: Path, *, rounds: int = RATE_ROUNDS, **options: Any) -> float:
    """The median forms/s of ``rounds`` runs of ``throughput`` (each in a fresh ``trio.run``;
    ``options`` as ``throughput`` takes them, e.g. ``callers`` or ``session``; a ``session``
    file is removed after each run, so each one starts a new file)."""
    rates = []
    for _ in range(rounds):
        rates.append(trio.run(functools.partial(throughput, count, settings, **options))[0])
        session = options.get("session")
        if session is not None:
            session.unlink()
    return statistics.median(rates)


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


class _TimedCheckpoints(SessionFile):
    """A session file that adds up the time its checkpoints take (building, encoding and
    writing each one: ``SessionFile._checkpoint``)."""

    spent = 0.0

    def _checkpoint(self, fold: Any) -> None:
        start = time.perf_counter()
        try:
            super()._checkpoint(fold)
        finally:
            self.spent += time.perf_counter() - start


def checkpoint_cost(pending: int, directory: Path) -> tuple[float, float, int]:
    """Seconds per form spent writing checkpoints while ``pending`` background forms are
    queued, none answered (the frames the runtime writes for each: a tool call, its payload,
    history request and queued entry, its receipt), the checkpoint frames' bytes as a share of
    the entry frames' bytes, and the number of checkpoints."""
    from benchmarks.bench_journal import _form_entries

    path = directory / f"checkpoints-{pending}.pias"
    path.unlink(missing_ok=True)
    forms = [_form_entries(n, answered=False) for n in range(pending)]
    with _TimedCheckpoints.open(path, projection=JOURNAL) as session:
        assert isinstance(session, _TimedCheckpoints)
        for frames in forms:
            for frame in frames:
                session.append_many(frame)
        spent = session.spent
    data = path.read_bytes()
    checkpoint_bytes = entry_bytes = checkpoints = 0
    pos = int.from_bytes(data[:4], "big") + 8  # after the header
    while pos < len(data):
        end = pos + 8 + int.from_bytes(data[pos : pos + 4], "big")
        if data[pos + 8] == 0x03:  # a checkpoint's kind byte
            checkpoint_bytes += end - pos
            checkpoints += 1
        else:
            entry_bytes += end - pos
        pos = end
    path.unlink()
    return spent / pending, checkpoint_bytes / entry_bytes, checkpoints


def figures(
    sizes: tuple[int, ...] = (1_000, 10_000), waits: tuple[int, ...] = (10_000, 50_000)
) -> dict[str, float]:
    """Every figure ``main`` prints, by name: ``enqueue+answer/<n>`` and
    ``enqueue+answer/<n>/16-callers`` (forms/s), ``cpu-us-per-form/<n>`` (CPU time of the
    single-caller run), the same two with a session file (``.../file``),
    ``kib-per-form/<n>``, ``wait/<n>`` (forms/s), ``latency-ms``, and for ``n`` pending forms
    ``checkpoint-us-per-form/<n>``, ``checkpoint-share/<n>`` (``checkpoint_cost``)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Path(tmp) / "settings.json"
        for count in sizes:
            runs = RATE_ROUNDS * count
            cpu = time.process_time()
            out[f"enqueue+answer/{count}"] = median_rate(count, settings)
            # CPU time (this process, the runtime's open and close included, all runs): steadier
            # than the rate on a shared, loaded machine.
            out[f"cpu-us-per-form/{count}"] = (time.process_time() - cpu) / runs * 1e6
            session = Path(tmp) / f"session-{count}.pias"
            cpu = time.process_time()
            out[f"enqueue+answer/{count}/file"] = median_rate(count, settings, session=session)
            out[f"cpu-us-per-form/{count}/file"] = (time.process_time() - cpu) / runs * 1e6
            per_form, share, _ = checkpoint_cost(count, Path(tmp))
            out[f"checkpoint-us-per-form/{count}"] = per_form * 1e6
            out[f"checkpoint-share/{count}"] = share
            out[f"enqueue+answer/{count}/16-callers"] = median_rate(count, settings, callers=16)
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
        print(
            f"enqueue+answer {count:>6} forms, session file: "
            f"{found[f'enqueue+answer/{count}/file']:8.0f} forms/s, "
            f"CPU {found[f'cpu-us-per-form/{count}/file']:5.0f} us per form"
        )
    for count in sizes:
        print(
            f"checkpoints with {count:>6} forms pending: "
            f"{found[f'checkpoint-us-per-form/{count}']:6.1f} us per form, "
            f"{found[f'checkpoint-share/{count}']:.2f} of the entry bytes"
        )
    for count in waits:
        print(f"wait_for_answers over {count:>6} forms: {found[f'wait/{count}']:8.0f} forms/s")
    print(f"submit -> wait result latency: median {found['latency-ms']:.3f} ms")


if __name__ == "__main__":
    main()
