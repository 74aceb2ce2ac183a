"""Agent text never reaches the terminal raw: the bytes the form writes carry no escape
sequence, control string or control character that came from the payload or a paste."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.ui.commands import run_ask
from pi_agent_ask.ui.testing import VirtualTerminal

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned-title\x07"
RED = "\x1b[31m"
C1_CSI = "\x9b2J"
EVIL = CLEAR + TITLE + RED + C1_CSI + "\x08\x7f"

# What prompt_toolkit itself writes never includes these; the payload's copies must not either.
FORBIDDEN = (CLEAR, "\x1b]", "pwned-title", RED, "\x9b", "\x7f")


def tainted(name: str) -> str:
    """``<name>-start``, every hostile sequence, ``<name>-end``: both ends stay readable."""
    return f"{name}-start{EVIL}{name}-end"


def payload() -> dict[str, Any]:
    return {
        "title": tainted("title"),
        "questions": [
            {
                "id": "q1",
                "label": tainted("label"),
                "prompt": tainted("prompt"),
                "context": tainted("context") + "\nsecond" + RED + "line",
                "options": [
                    {
                        "value": "a",
                        "label": tainted("optA"),
                        "description": tainted("descA"),
                        "recommended": True,
                    },
                    {"value": "b", "label": tainted("optB"), "description": tainted("descB")},
                ],
            },
            {
                "id": "q2",
                "label": "Plain",
                "prompt": "Second question",
                "type": "multi",
                "options": [{"value": "c", "label": tainted("optC")}],
            },
        ],
    }


def assert_clean(raw: str) -> None:
    for sequence in FORBIDDEN:
        assert sequence not in raw, f"{sequence!r} reached the terminal"
    # Every escape in the stream is one prompt_toolkit writes for layout and colour: CSI with
    # a final letter (no OSC, DCS, or other string sequences).
    for match in re.finditer(r"\x1b(.)", raw):
        assert match.group(1) == "[", repr(raw[match.start() : match.start() + 12])


async def run(tmp_path: Path, columns: int, keys: list[tuple[str, str]]) -> VirtualTerminal:
    """Run the form, and for each ``(wait_text, keys)`` wait for the text then send the keys."""
    term = VirtualTerminal(columns, 40)
    settings = tmp_path / "pi-agent-ask.json"
    with create_pipe_input() as pipe, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def ask() -> None:
                await run_ask(
                    payload(), settings=settings, session=None, input=pipe, output=term.output
                )
                done.set()

            nursery.start_soon(ask)
            for text, send in keys:
                await term.wait_for(text)
                pipe.send_text(send)
            await done.wait()
    return term


async def test_payload_text_is_neutralised_on_a_wide_screen(tmp_path: Path) -> None:
    term = await run(
        tmp_path,
        140,
        [
            ("optA-end", ""),
            ("context-end", "1"),  # context beside the options, then answer
            ("Second question", "\x1b[B\x1b[A1\r"),
            ("Review your answers", "1"),
            ("Press 1 again", "1"),
        ],
    )
    assert_clean(term.raw)
    raw = term.raw
    for name in ("title", "label", "prompt", "context", "optA", "descA", "optB", "descB"):
        assert f"{name}-start" in raw and f"{name}-end" in raw, name
    # Each removed run shows as one replacement character.
    assert "title-start\ufffdtitle-end" in raw
    assert "second\ufffdline" in raw


async def test_payload_text_is_neutralised_on_a_narrow_screen_and_in_review(
    tmp_path: Path,
) -> None:
    term = await run(
        tmp_path,
        50,
        [
            ("context-end", "2"),  # context below the options on a narrow screen
            ("optC", "1\r"),
            ("Review your answers", "\x03\x03"),
        ],
    )
    assert_clean(term.raw)
    assert "optB-start" in term.raw


async def test_pasted_text_is_neutralised_before_it_is_echoed(tmp_path: Path) -> None:
    paste = "\x1b[200~pasted" + TITLE + CLEAR + "text\x1b[201~"
    term = await run(
        tmp_path,
        100,
        [
            ("optA-end", "3"),  # open the custom editor
            ("Type answer...", paste),
            ("pasted\ufffdtext", "\r"),
            ("Second question", "\r"),
            ("Review your answers", "11"),
        ],
    )
    assert_clean(term.raw)
    assert "pasted\ufffdtext" in term.raw


def test_is_safe_is_what_sanitize_line_leaves_alone() -> None:
    from pi_agent_ask.form.sanitize import is_safe, sanitize_line

    for text in ["a", " ", "~", "\t", "\n", "\x1b", "\x7f", "é", "\u200d", "\u200b", "👩‍💻"]:
        assert is_safe(text) == (sanitize_line(text) == text), repr(text)
    assert is_safe("\u200d") and not is_safe("\u200b") and not is_safe("\t")
