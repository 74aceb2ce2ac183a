"""Wrapping as a person reads it: at word boundaries by cell width, bullets with a hanging
indent, hint keys with their labels, the shell's yes/no question whole words."""

from __future__ import annotations

from pathlib import Path

from tests.test_shell import ALT_Q, REGION_PROMPT, demo
from tests.test_ui_typing import asking

QUESTION = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "context": "- The cold build takes forty-one seconds on the shared runners today\n"
    "- Warm builds are fine\n"
    "1. A numbered point that is long enough to wrap onto a second row here",
    "options": [
        {
            "value": "speed",
            "label": "Speed",
            "recommended": True,
            "description": "Incrementalisation-everywhere with remote caching",
        },
        {"value": "size", "label": "Size"},
    ],
}


async def test_options_and_context_wrap_at_words_with_hanging_indents(tmp_path: Path) -> None:
    async with asking(tmp_path, QUESTION, columns=100) as ask:
        await ask.wait("What should I optimize for?")
        rows = ask.term.rows()
        text = "\n".join(rows)
        assert "(recommended)" in text  # never split
        assert "Incrementalisation-everywhere" in text
        first = next(i for i, row in enumerate(rows) if "- The cold build" in row)
        column = rows[first].index("- The cold build")
        follow = rows[first + 1]
        assert follow[column : column + 2] == "  " and follow[column + 2] != " "
        numbered = next(i for i, row in enumerate(rows) if "1. A numbered point" in row)
        column = rows[numbered].index("1. A numbered")
        assert rows[numbered + 1][column : column + 3] == "   "
        assert rows[numbered + 1][column + 3] != " "
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_japanese_context_fills_its_bullet_line(tmp_path: Path) -> None:
    """Japanese has no spaces and may break between any two characters: a bullet's text
    starts beside its ``- `` and wraps where the row ends, not on a row of its own below a
    lone dash."""
    text = "二番目の項目はとても長いテキストです。折り返しが必要です。"
    question = {**QUESTION, "context": f"- {text}"}
    async with asking(tmp_path, question, columns=120) as ask:
        await ask.wait("What should I optimize for?")
        rows = ask.term.rows()
        first = next(i for i, row in enumerate(rows) if "│ -" in row)
        assert rows[first].split("│ -", 1)[1].strip().startswith("二番目"), rows[first]
        shown = "".join(row.split("│", 1)[1].strip(" -") for row in rows[first : first + 3])
        assert text in shown.replace(" ", "")
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_hints_wrap_whole_at_40_columns(tmp_path: Path) -> None:
    async with asking(tmp_path, QUESTION, columns=40, lines=40) as ask:
        await ask.wait("What should I optimize for?")
        rows = ask.term.rows()
        hints = rows[next(i for i, row in enumerate(rows) if row.startswith("1-3 select")) :]
        for row in hints:
            assert not row.endswith("Ctrl+C") and not row.startswith("dismiss"), hints
            assert not row.endswith("Shift+N"), hints
        ask.send("\x03", "\x03")
        await ask.finished()


async def test_the_yes_no_question_wraps_at_words(tmp_path: Path) -> None:
    async with demo(tmp_path, columns=40, lines=30) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait("Alt+Q to answer")  # the panel's rule: the editor has the keys
        await sh.type_line("/ask-mode")
        await sh.wait("anyway?")
        rows = sh.term.rows()
        assert not any(row.rstrip().endswith(" S") for row in rows)
        assert any("Switch anyway?" in row for row in rows)
        sh.send("n")
        await sh.wait("Question mode unchanged")
