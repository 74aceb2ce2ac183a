"""``pi-agent-ask history list`` for a person at a terminal: a table of the questions asked,
every line within the terminal's width (``cli.cmd_history`` prints it; ``--json`` and a pipe
get the JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["QUESTION_MIN_WIDTH", "history_table"]

QUESTION_MIN_WIDTH = 24
"""The question shares a row with its key only when it gets this many columns there."""


def history_table(data: Any, path: Path, width: int | None = None) -> str:
    """``history list`` for a person: one row per question (status, when, label and prompt,
    request:question), then where the file is and how to see more, every line within the
    terminal's width. The key stays whole (``history read`` takes it); when the question would
    get fewer than ``QUESTION_MIN_WIDTH`` columns beside it, it goes on a line of its own
    below. A question too long for its room ends at a word, with ``…``."""
    import shutil

    from pi_agent_ask.form.transcript import cell_width, drawn_text

    def shown(value: object) -> str:
        # The journal's text is the agent's: neutralised, and drawn as the form draws it.
        return drawn_text(str(value), keep_newlines=False)

    columns = width if width is not None else shutil.get_terminal_size().columns
    records = data.get("records", []) if isinstance(data, dict) else []
    if not records:
        return "\n".join(_wrapped(f"No questions recorded in {path}.", columns)) + "\n"
    rows = []
    id_pairs = [("REQUEST", "QUESTION-ID")]
    for record in records:
        when = shown(record.get("createdAt", ""))[:16].replace("T", " ")
        ids = (shown(record.get("requestId", "")), shown(record.get("questionId", "")))
        status = shown(record.get("status", ""))
        text = " ".join(shown(f"{record.get('label', '')}: {record.get('prompt', '')}").split())
        rows.append((status, when, text, " ".join(ids)))
        id_pairs.append(ids)
    header = ("STATUS", "WHEN", "QUESTION", "REQUEST QUESTION-ID")
    widths = [max(cell_width(row[i]) for row in [header, *rows]) for i in range(4)]
    room = columns - widths[0] - widths[1] - widths[3] - 6
    out = []
    if room >= QUESTION_MIN_WIDTH:
        widths[2] = min(widths[2], room)
        for status, when, text, key in [header, *rows]:
            cells = [status, when, _clipped(text, widths[2])]
            out.append(
                "  ".join(
                    cell + " " * (size - cell_width(cell))
                    for cell, size in zip(cells, widths[:3], strict=True)
                )
                + "  "
                + key
            )
    else:
        # Below its status and time, the question; the key too when the row cannot hold it.
        indent = " " * (widths[0] + 2)
        key_below = widths[0] + widths[1] + widths[3] + 4 > columns
        for (status, when, text, key), ids in zip([header, *rows], id_pairs, strict=True):
            lead = status + " " * (widths[0] - cell_width(status)) + "  " + when
            if key_below:
                out.extend([lead, *_key_lines(ids, indent, widths[3], columns)])
            else:
                out.append(lead + " " * (widths[1] - cell_width(when)) + "  " + key)
            out.append(indent + _clipped(text, max(1, columns - len(indent))))
    total = data.get("total", len(records))
    out.append("")
    more = f" · more: --offset {data['nextOffset']}" if "nextOffset" in data else ""
    out.extend(
        _wrapped(
            f"{len(records)} of {total} from {path}{more}"
            " · read one: history read REQUEST QUESTION · --json for JSON",
            columns,
        )
    )
    return "\n".join(out) + "\n"


def _key_lines(ids: tuple[str, str], indent: str, widest: int, columns: int) -> list[str]:
    """The request and question ids under a row, each whole, laid out alike on every row (by
    the ``widest`` key): indented when they fit so, else from the first column, else one id a
    line."""
    if len(indent) + widest <= columns:
        return [indent + " ".join(ids)]
    if widest <= columns:
        return [" ".join(ids)]
    return list(ids)


def _wrapped(text: str, width: int) -> list[str]:
    from pi_agent_ask.form.transcript import wrap_line

    return ["".join(part for _, part in line) for line in wrap_line([("text", text)], width)]


def _clipped(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: whole words, then ``…`` when some are left out."""
    lines = _wrapped(text, width)
    if len(lines) == 1:
        return lines[0]
    return _wrapped(text, max(1, width - 1))[0].rstrip() + "…"
