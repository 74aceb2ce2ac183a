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
    (joined by ``·``) at the right, a rule between them.

    What gives way when the line is too narrow, first to last: the leading notes (the agent's
    activity before the last note, where the keys go), then the whole right part, then the
    notice's and the status's ends."""
    left = f" {status} " if status else " "
    parts: StyleAndTextTuples = [("class:ask.rule", "─"), ("class:ask.accent", left)]
    if notice:
        parts.append(("class:ask.warning", f"{notice} "))
    used_left = sum(cell_width(part[1]) for part in parts)
    for first in range(len(notes)):
        right = f" {' · '.join(notes[first:])} ─"
        used = used_left + cell_width(right)
        if used <= width:
            parts.append(("class:ask.rule", "─" * (width - used)))
            parts.append(("class:ask.muted", right))
            return parts
    if used_left + 1 > width:
        return _clip(parts, width)
    parts.append(("class:ask.rule", "─" * (width - used_left - 1)))
    parts.append(("class:ask.muted", " "))
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
