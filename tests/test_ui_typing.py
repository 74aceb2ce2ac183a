"""Typing into form editors: every key processed once, in order; the cursor where text lands.

Keys go in through a pipe input as a terminal sends them; the screen is a pyte terminal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from prompt_toolkit.key_binding.key_processor import KeyProcessor

from pi_agent_ask.ui.testing import Asking
from pi_agent_ask.ui.testing import asking as run_asking

ENTER = "\r"

GOAL = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "options": [
        {"value": "speed", "label": "Speed", "recommended": True},
        {"value": "size", "label": "Size"},
    ],
}


@asynccontextmanager
async def asking(
    tmp_path: Path, *questions: dict[str, Any], columns: int = 100, lines: int = 30
) -> AsyncIterator[Asking]:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(30):
        async with run_asking(
            {"questions": list(questions)}, settings, columns=columns, lines=lines
        ) as handle:
            yield handle


@pytest.fixture
def handler_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key the key processor hands to a binding (parking a key counts too)."""
    calls: list[str] = []
    original = KeyProcessor._call_handler

    def counting(self: KeyProcessor, handler: Any, key_sequence: Any) -> None:
        calls.append("".join(str(k.data) for k in key_sequence))
        original(self, handler, key_sequence)

    monkeypatch.setattr(KeyProcessor, "_call_handler", counting)
    return calls


@pytest.mark.parametrize("count", [50, 150])
async def test_typed_keys_are_processed_a_bounded_number_of_times(
    tmp_path: Path, handler_calls: list[str], count: int
) -> None:
    """A burst of N characters into the custom editor costs at most 3 handler calls per key
    (once parked, once processed, plus slack), and lands whole and in order."""
    text = "".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(count - 4)) + "END!"
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        before = len(handler_calls)
        ask.send(text)
        await ask.wait("END!")
        typed = len(handler_calls) - before
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["customText"] == text
    assert typed <= 3 * count, f"{typed} handler calls for {count} keys"


@pytest.mark.parametrize(
    ("typed", "cells"),
    [("hello", 5), ("日本語", 6), ("a日b本", 6), ("🙂 ok", 5)],
)
async def test_the_cursor_stands_right_after_the_typed_text(
    tmp_path: Path, typed: str, cells: int
) -> None:
    """At the end of the text the cursor is the next cell (not the top-left corner); wide
    characters move it two cells each."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        ask.send("3")
        await ask.wait("> Type answer...")
        row, col = ask.term.find("> Type answer...")
        ask.send(typed)
        await ask.wait_gone("Type answer...")
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + cells))
        assert ask.term.cursor() == (row, col + 2 + cells)
        ask.send("\x1b[D")  # Left: before the last character
        last = 2 if typed[-1] in "日本語" else 1
        await ask.term.wait_for(lambda term: term.cursor() == (row, col + 2 + cells - last))
        ask.send(ENTER)
        await ask.wait("Review your answers")
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["customText"] == typed


@pytest.fixture
def processed_keys(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key the key processor takes from its queue, whether a binding acts on it or not."""
    keys: list[str] = []
    original = KeyProcessor.process_keys

    def recording(self: KeyProcessor) -> None:
        keys.extend(str(key.data) for key in self.input_queue)
        original(self)

    monkeypatch.setattr(KeyProcessor, "process_keys", recording)
    return keys


async def test_key_handling_is_made_ready_after_the_first_frame_and_changes_nothing(
    tmp_path: Path, processed_keys: list[str], handler_calls: list[str]
) -> None:
    """Right after the first frame the key processor takes one key that no binding acts on
    (prompt_toolkit fills its binding caches then, not on the person's first key): nothing
    happens, and the person's keys act as ever."""
    async with asking(tmp_path, GOAL) as ask:
        await ask.wait("What should I optimize for?")
        assert processed_keys == ["<ignore>"]
        # Only the binding of typed text with no editor open sees it, and leaves it: no text.
        assert handler_calls in ([], ["<ignore>"])
        assert "goes into an editor" not in ask.term.text()
        warm = list(handler_calls)
        ask.send("2")
        await ask.wait("Review your answers")
        assert processed_keys == ["<ignore>", "2"]
        assert handler_calls == [*warm, "2"]
        ask.send("1", "1")
        status, result = await ask.finished()
    assert status == 0
    assert result["details"]["answers"]["goal"]["values"] == ["size"]
