"""The cursor among the rows a wrapped text is drawn in: which row it stands on, and Up and
Down between rows (both editors, each wrapped at words by ``render/editor.word_rows``: the
form's, ``render/editor.py``; the host shell's, ``shell_editor.py``).

Rows are ``(start, end)`` indices into the text, in order. Two rows either meet (``end`` of
one is ``start`` of the next: the text wrapped there) or are apart by exactly one character
that no row shows (a newline, or a space that is the break). A cursor on such a character
stands at the end of the row before it; a cursor where the text wrapped stands at the start
of the next row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["Spans", "cursor_row", "row_move"]

Spans = Sequence[tuple[int, int]]


def cursor_row(spans: Spans, cursor: int, length: int) -> int:
    """The row of ``spans`` (over a text of ``length``) the cursor is drawn on."""
    for number, (first, end) in enumerate(spans):
        skipped = number + 1 < len(spans) and spans[number + 1][0] == end + 1
        if first <= cursor < end or (cursor == end and (end == length or skipped)):
            return number
    return 0


def row_move(
    text: str,
    spans: Spans,
    cursor: int,
    step: int,
    column: int | None,
    cells: Callable[[str], int],
) -> tuple[int, int] | None:
    """The cursor one row up (``step`` -1) or down (+1): ``column`` cells into that row
    (default: as far as the cursor is into its own; ``cells`` measures the text drawn), or at
    its end when it is shorter. Returns the new index and the column aimed at, for the next
    move of a run; ``None`` on the first (last) row, which has no row above (below)."""
    number = cursor_row(spans, cursor, len(text))
    target = number + step
    if not 0 <= target < len(spans):
        return None
    if column is None:
        column = cells(text[spans[number][0] : cursor])
    first, end = spans[target]
    # A cursor at ``end`` stands on the next row when the text wrapped right there.
    wrapped = target + 1 < len(spans) and spans[target + 1][0] == end and end > first
    last = end - 1 if wrapped else end
    index = first
    while index < last and cells(text[first : index + 1]) <= column:
        index += 1
    return index, column
