"""The host shell's status line: ``Questions pending: <n>``, the latest notice, and at the right
what the agent is doing and who has the keyboard, cut to the width."""

from __future__ import annotations

from collections.abc import Sequence

from prompt_toolkit.formatted_text import StyleAndTextTuples

from pi_agent_ask.form.transcript import cell_width

__all__ = ["status_fragments"]


def status_fragments(
    status: str, notice: str, notes: Sequence[str], width: int
) -> StyleAndTextTuples:
    """The status line at ``width`` cells: ``status`` and ``notice`` at the left, ``notes``
    (joined by ``·``) at the right, a rule between them."""
    left = f" {status} " if status else " "
    parts: StyleAndTextTuples = [("class:ask.rule", "─"), ("class:ask.accent", left)]
    if notice:
        parts.append(("class:ask.warning", f"{notice} "))
    right = f" {' · '.join(notes)} ─" if notes else " "
    used = sum(cell_width(part[1]) for part in parts) + cell_width(right)
    if used > width:
        return _clip(parts, width)
    parts.append(("class:ask.rule", "─" * (width - used)))
    parts.append(("class:ask.muted", right))
    return parts


def _clip(parts: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    used = 0
    for style, text, *_ in parts:
        room = width - used
        if room <= 0:
            break
        piece = ""
        for char in text:
            if cell_width(piece + char) > room:
                break
            piece += char
        out.append((style, piece))
        used += cell_width(piece)
    return out
