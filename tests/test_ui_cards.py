"""Answer cards in the shell's transcript, reached by keys: a question's note is drawn as the
question's, under its prompt, not as a note of the last answer line."""

from __future__ import annotations

from pathlib import Path

from tests.test_shell import REGION_PROMPT, demo


async def test_a_question_note_sits_under_the_prompt_in_the_card(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send("N")
        await sh.wait("Question note: Add a note...")
        sh.send("ask ops first", "\r")
        await sh.wait("Question note: ask ops first")
        sh.send("1")
        await sh.wait("Review your answers")
        sh.send("1", "1")
        await sh.wait("Deployment plan · ✓ Answers received")
        rows = sh.term.rows()
        top = rows.index("Deployment plan · ✓ Answers received")
        assert rows[top + 2 : top + 5] == [
            REGION_PROMPT,
            "Question note: ask ops first",
            "→ EU West",
        ]
        assert "  note: ask ops first" not in rows
