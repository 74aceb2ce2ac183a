"""An open editor in the frame: its text hard-wrapped so the cursor maps to one cell, its image
marker, the latest notice and the ``@`` path candidates under it."""

from __future__ import annotations

from collections.abc import Sequence

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import MARKER, is_safe, sanitize_line
from pi_agent_ask.form.text import image_marker
from pi_agent_ask.form.transcript import merge_segments
from pi_agent_ask.ui.render.frame import (
    ACTIVE,
    EDITOR,
    MUTED,
    NO_POINTER,
    NOTE,
    PLACEHOLDER,
    POINTER,
    POINTER_TEXT,
    TEXT,
    WARNING,
    Fragment,
    Line,
    RenderOptions,
)
from pi_agent_ask.ui.render.lines import Block, cells, line_width, truncate, wrap_fragments
from pi_agent_ask.ui.rows import cursor_row


def _display_char(char: str) -> str:
    return char if is_safe(char) else MARKER


def _editor_rows(
    text: str,
    cursor: int,
    indent: int,
    width: int,
    placeholder: str,
    label: Sequence[Fragment] = (),
) -> tuple[list[Line], tuple[int, int]]:
    """The open editor: ``label`` then the text, wrapped at word boundaries within ``width``
    (a word longer than a row is split). Returns the rows and the cursor's ``(row, col)``
    relative to the first row.

    A row keeps one free cell at its end, so a cursor after the last character always fits. A
    cursor where a row was wrapped is at the start of the next row.
    """
    head = merge_segments([(TEXT, " " * indent), *label])
    start = line_width(head)
    room = editor_room(width, indent, label)
    if not text:
        rows = [merge_segments([*head, (PLACEHOLDER, truncate(placeholder, room + 1))])]
        return rows, (0, start)
    lines: list[Line] = []
    spans = word_rows(text, room)
    for number, (first, end) in enumerate(spans):
        shown = "".join(_display_char(char) for char in text[first:end])
        prefix = head if number == 0 else merge_segments([(TEXT, " " * start)])
        lines.append(merge_segments([*prefix, (EDITOR, shown)]))
    number = cursor_row(spans, cursor, len(text))
    return lines, (number, start + editor_cells(text[spans[number][0] : cursor]))


def editor_room(width: int, indent: int, label: Sequence[Fragment]) -> int:
    """The cells of a row of the editor's text (what :func:`_editor_rows` wraps it to)."""
    return max(2, width - indent - line_width(tuple(label))) - 1


def editor_cells(text: str) -> int:
    """The cells ``text`` takes in the editor (a character that is not safe to draw is drawn
    as the marker)."""
    return cells("".join(_display_char(char) for char in text))


def word_rows(text: str, room: int) -> list[tuple[int, int]]:
    """``text`` in rows of at most ``room`` cells, as ``(start, end)`` indices: a row ends at a
    newline (not included), else after the last space that keeps the next word whole, else
    (a word longer than a row) where the row is full. A space that would not fit is the break
    (not included, as a newline): the next row starts with the next word."""
    rows: list[tuple[int, int]] = []
    first = used = 0
    after_space: int | None = None  # the index after the row's last space
    used_to_space = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\n":
            rows.append((first, index))
            first, used, after_space, index = index + 1, 0, None, index + 1
            continue
        width = cells(_display_char(char))
        if used + width > room and index > first:
            if char == " ":
                # The space between two rows is the break itself, as a newline is: drawn at
                # the start of the next row it would indent that row by one cell.
                rows.append((first, index))
                first, used, after_space, index = index + 1, 0, None, index + 1
                continue
            if after_space is not None:
                rows.append((first, after_space))
                first, used, after_space = after_space, used - used_to_space, None
            else:
                rows.append((first, index))
                first, used, after_space = index, 0, None
            continue  # the same character again, on the new row
        used += width
        if char == " ":
            after_space, used_to_space = index + 1, used
        index += 1
    rows.append((first, len(text)))
    return rows


def _editor_for(state: fs.FormState, options: RenderOptions) -> tuple[str, int]:
    editor = state.editor
    assert editor is not None
    text = options.editor_text if options.editor_text is not None else editor.text
    cursor = options.editor_cursor if options.editor_cursor is not None else len(text)
    return text, max(0, min(cursor, len(text)))


def add_editor(
    block: Block,
    state: fs.FormState,
    options: RenderOptions,
    indent: int,
    width: int,
    placeholder: str,
    label: str,
    label_style: str = NOTE,
) -> None:
    """The open editor at the end of ``block``: its text with the cursor, then its image
    marker and the latest notice (a clipboard read, say) on their own rows."""
    editor = state.editor
    assert editor is not None
    text, at = _editor_for(state, options)
    head: list[Fragment] = [(label_style, label)]
    rows, (crow, ccol) = _editor_rows(text, at, indent, width, placeholder, head)
    block.cursor = (len(block.lines) + crow, ccol)
    block.editor_room = editor_room(width, indent, head)
    block.focus = len(block.lines) + crow
    block.extend(rows)
    pad = " " * (indent + cells(label))
    if editor.images:
        block.extend(
            wrap_fragments([(TEXT, pad), (MUTED, image_marker(len(editor.images)))], width)
        )
    if options.notice:
        block.extend(
            wrap_fragments([(TEXT, pad), (WARNING, sanitize_line(options.notice))], width, len(pad))
        )
    if options.menu:
        rows, chosen = _menu_rows(options.menu, pad, width)
        # The chosen candidate is what the person just moved to: on screen like a warning.
        block.alerts.append(len(block.lines) + chosen)
        block.extend(rows)


MENU_ROWS = 6
"""Candidates the ``@`` list shows at once (a window around the chosen one)."""


def _menu_rows(menu: Sequence[tuple[str, bool]], pad: str, width: int) -> tuple[list[Line], int]:
    """The candidates' rows and hint, and the row of the chosen candidate among them."""
    chosen = next((i for i, (_, on) in enumerate(menu) if on), 0)
    first = max(0, min(chosen - MENU_ROWS // 2, len(menu) - MENU_ROWS))
    rows: list[Line] = []
    room = max(4, width - len(pad) - 2)
    for name, on in menu[first : first + MENU_ROWS]:
        rows.append(
            merge_segments(
                [
                    (TEXT, pad),
                    (POINTER, POINTER_TEXT if on else NO_POINTER),
                    (ACTIVE if on else MUTED, truncate(sanitize_line(name), room)),
                ]
            )
        )
    more = len(menu) - MENU_ROWS
    hint = f"{len(menu)} matches · Tab/Shift+Tab or Down/Up choose · type to narrow"
    if more > 0:
        hint = f"{hint} · {first} above, {max(0, len(menu) - first - MENU_ROWS)} below"
    rows.extend(wrap_fragments([(TEXT, pad), (MUTED, hint)], width, len(pad)))
    return rows, chosen - first


def with_images(text: str, count: int) -> str:
    """Text followed by its attachment marker (``[2 images]``), either may be missing."""
    return " ".join(part for part in (text, image_marker(count)) if part)
