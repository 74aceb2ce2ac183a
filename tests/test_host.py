"""The LocalHost and the demo's scripted agent, headless, on the real runtime."""

from __future__ import annotations

from pathlib import Path

from pi_agent_ask.form.text import line_text
from pi_agent_ask.host.demo import run_demo
from pi_agent_ask.host.local import Line
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import settings_file


async def test_headless_demo_tells_the_whole_background_story(
    tmp_path: Path, autojump_clock: object
) -> None:
    lines: list[str] = []

    def emit(line: Line) -> None:
        lines.append(line_text(line))

    session = tmp_path / "demo.pas"
    code = await run_demo(
        session=session, settings=settings_file(tmp_path), headless=True, emit=emit
    )
    assert code == 0
    text = "\n".join(lines)
    assert text.count("question(s) queued") == 3
    assert text.count("✓ Answers received") == 3
    assert "→ EU West" in text and "→ Tonight" in text
    assert "note: canary too if time allows" in text
    assert "Received answers for 1 form" in text
    entries = SessionFile.open(session, readonly=True).branch()
    delivered = [e for e in entries if e.type == "ask:background-answer"]
    # Two answers arrive as messages (a boundary and an idle wake), one through the wait.
    assert len(delivered) == 2
    waits = [e for e in entries if e.type == "tool-result" and e.data["name"] == "wait_for_answers"]
    assert len(waits[0].data["result"]["details"]["results"]) == 1
