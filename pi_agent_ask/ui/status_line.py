"""The host shell's status line: ``Questions pending: <n>``, the latest notice, and at the right
what the agent is doing and who has the keyboard, cut to the width."""

from __future__ import annotations

from collections.abc import Sequence

from prompt_toolkit.formatted_text import StyleAndTextTuples

from pi_agent_ask.form.transcript import cell_width

__all__ = ["status_fragments"]


def status_fragments(
    status: str,
    notice: str,
    notes: Sequence[str],
    width: int,
    keys: Sequence[str] = (),
) -> StyleAndTextTuples:
    """The status line at ``width`` cells: ``status`` and ``notice`` at the left, ``notes``
    (joined by ``·``) and the key hint at the right, a rule between them. ``keys``: the key
    hint in its wordings, longest first (``keys: editor · Alt+Q: questions``, ..., ``Alt+Q``).

    What gives way when the line is too narrow, first to last: the leading notes (the agent's
    activity), the key hint's longer wordings, then the whole right part but the key hint's
    shortest wording, then the notice's and the status's ends. The key hint stays: without
    it a narrow screen said nothing of how to move the keys between the editor and the form."""
    left = f" {status} " if status else " "
    parts: StyleAndTextTuples = [("class:ask.rule", "─"), ("class:ask.accent", left)]
    if notice:
        parts.append(("class:ask.warning", f"{notice} "))
    used_left = sum(cell_width(part[1]) for part in parts)
    tails = [[*notes[first:], *keys[:1]] for first in range(len(notes) + 1)]
    tails += [[key] for key in keys[1:]]
    for tail in tails:
        if not tail:
            continue
        right = f" {' · '.join(tail)} ─"
        used = used_left + cell_width(right)
        if used <= width:
            parts.append(("class:ask.rule", "─" * (width - used)))
            parts.append(("class:ask.muted", right))
            return parts
    if keys:  # the left part's ends give way to the key hint's shortest wording
        right = f" {keys[-1]} ─"
        kept = _clip(parts, max(0, width - cell_width(right)))
        return _clip([*kept, ("class:ask.muted", right)], width)
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
