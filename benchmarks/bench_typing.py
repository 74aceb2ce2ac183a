"""Typing and keystroke latency of the form, driven through a pipe input into a virtual terminal.

- ``typing``: 200 characters sent at once into the custom answer editor of ``ask``, until the
  frame that shows the last of them (target: under 50 ms);
- ``keystroke``: with 100 background forms queued, Down/Up in the first one, from the key to the
  frame that moved the pointer (p50, p99, max; the first key; the full collections of the
  cyclic collector meanwhile, counted, not caused), in a process that has run nothing else
  before (it runs first). The first key counts: the form makes its key handling ready after
  the first frame (``ui.surface.tune_application``), not on the person's first key.

Run with ``python -m benchmarks typing``. Prints; asserts nothing.
"""

from __future__ import annotations

import functools
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.persistence.settings import load_settings
from pi_agent_ask.ui.surface import TerminalSurface, run_terminal_surface
from pi_agent_ask.ui.testing import VirtualTerminal, asking

QUESTION = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "options": [
        {"value": "speed", "label": "Speed", "recommended": True},
        {"value": "size", "label": "Size"},
    ],
}
TYPED = 200
ROUNDS = 5
KEYSTROKES = 200
QUEUED = 100


async def typing_seconds(settings: Path) -> float:
    with trio.fail_after(60):
        return await _typing_seconds(settings)


async def _typing_seconds(settings: Path) -> float:
    text = "x" * (TYPED - 4) + "END!"
    async with asking({"questions": [QUESTION]}, settings, lines=40) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("Type answer...")
        start = time.perf_counter()
        since = len(ask.term.chunks)
        ask.send(text)
        await ask.term.wait_written("!", since)  # the last character typed
        elapsed = time.perf_counter() - start
        ask.send("\r")
        await ask.wait("Review your answers")
        ask.send("1", "1")
        await ask.finished()
    return elapsed


async def keystroke_seconds(settings: Path) -> list[float]:
    term = VirtualTerminal(100, 30)
    samples: list[float] = []
    loaded = load_settings(settings)
    surface = TerminalSurface(loaded)
    with create_pipe_input() as pipe:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(run_terminal_surface, surface, input=pipe, output=term.output)
            )
            async with open_runtime(
                mode="tui",
                settings=settings,
                input=pipe,
                output=term.output,
                surface=surface,
                write_terminal=lambda _text: None,
            ) as runtime:
                for n in range(QUEUED):
                    question: dict[str, Any] = {**QUESTION, "id": f"q{n}"}
                    await runtime.call_tool(
                        "ask_user", {"questions": [question], "background": True}
                    )
                await term.wait_for("› 1.")
                for n in range(KEYSTROKES):
                    key = "\x1b[B" if n % 2 == 0 else "\x1b[A"
                    since = len(term.chunks)
                    start = time.perf_counter()
                    pipe.send_text(key)
                    # The redraw after the key writes the pointer at its new row.
                    await term.wait_written("›", since)
                    samples.append(time.perf_counter() - start)
                nursery.cancel_scope.cancel()
    return samples


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Path(tmp) / "agent" / "extensions" / "pi-agent-ask.json"
        # Keys first: the typing rounds leave five runtimes' worth of cyclic garbage, whose
        # full collection would otherwise land in one of these keys.
        full_collections: list[dict[str, int]] = []

        def count_full(phase: str, info: dict[str, int]) -> None:
            if phase == "start" and info["generation"] == 2:
                full_collections.append(info)

        gc.callbacks.append(count_full)  # observes only: the collector runs as it would
        try:
            keys = trio.run(keystroke_seconds, settings)
        finally:
            gc.callbacks.remove(count_full)
        typing = [trio.run(typing_seconds, settings) for _ in range(ROUNDS)]
    print(
        f"typing {TYPED} characters into an editor -> last frame: median "
        f"{statistics.median(typing) * 1e3:.1f} ms (of {ROUNDS})"
    )
    print(
        f"keystroke -> frame, {QUEUED} forms queued: p50 {_percentile(keys, 0.5) * 1e3:.2f} ms, "
        f"p99 {_percentile(keys, 0.99) * 1e3:.2f} ms, max {max(keys) * 1e3:.2f} ms (of {len(keys)})"
    )
    print(
        f"  first key {keys[0] * 1e3:.2f} ms; full collections while queueing and typing: "
        f"{len(full_collections)}"
    )
