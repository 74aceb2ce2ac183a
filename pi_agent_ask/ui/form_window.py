"""The form's prompt_toolkit ``Window``, writing rows straight into the screen.

prompt_toolkit's ``Window`` copies a control's content character by character and records a
screen position for every character (for wrapping, scrolling and mouse mapping), then sets a
mouse handler cell by cell. The form needs none of that machinery: its control lays out its own
rows (sticky header and footer, its own scrolling), every row already fits the width, and
nothing wraps. Copying through ``Window`` cost about three times the frame itself.

:class:`FormWindow` is a ``Window`` (focus, filters and the layout treat it as one) whose
``write_to_screen`` does only what the form needs:

- each fragment's characters come from prompt_toolkit's own character cache, remembered per
  ``(style, text)`` fragment, and a row is written with one ``dict.update``; a fragment with a
  wide, zero-width or non-printable character takes the cell-by-cell path, with the same
  rules as ``Window`` (a wide character blanks the cell after it, a zero-width one joins the
  character before it);
- the mouse handler covers the window with one ``dict.update`` per row, and hands the
  control the clicked *cell* (``x`` in cells from the window's left, ``y`` its row), where
  ``Window`` hands a character index and maps clicks on blank cells to the nearest character
  (or to the first row, on an empty row): the form's click targets are cells;
- the cursor, the "partial key" shown at it, the window's style, ``render_info`` and
  ``visible_windows_to_write_positions`` are set as ``Window`` sets them.

Content lines longer than the window are cut at its right edge; there is no horizontal or
vertical scrolling (the control shows what it wants at the top).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from prompt_toolkit.application.current import get_app
from prompt_toolkit.data_structures import Point
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import Window, WindowRenderInfo
from prompt_toolkit.layout.controls import UIContent
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import _CHAR_CACHE, Char, Screen, Transparent, WritePosition
from prompt_toolkit.mouse_events import MouseEvent
from prompt_toolkit.utils import to_str

__all__ = ["FormWindow", "RowsContent"]

Row = tuple[tuple[str, str], ...]

_EMPTY = _CHAR_CACHE["", ""]


@functools.lru_cache(maxsize=8192)
def _fragment_chars(style: str, text: str) -> tuple[Char, ...] | None:
    """The screen characters of a fragment whose characters are one cell each, else None."""
    if not (text.isascii() and text.isprintable()):
        return None
    return tuple(_CHAR_CACHE[char, style] for char in text)


class RowsContent(UIContent):
    """A ``UIContent`` that also carries its rows as tuples, so the window can remember the
    screen cells of each row (a row that did not change costs one ``dict.update``)."""

    def __init__(self, rows: Sequence[Row], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows = rows


@functools.lru_cache(maxsize=1024)
def _row_cells(row: Row, xpos: int, width: int) -> dict[int, Char]:
    cells: defaultdict[int, Char] = defaultdict(lambda: _EMPTY_CELL)
    _write_line(cells, list(row), xpos, width)
    return dict(cells)


_EMPTY_CELL = _CHAR_CACHE[" ", Transparent]
"""What an empty cell reads as before anything is written (``Screen``'s default)."""


def _write_line(row: dict[int, Char], line: StyleAndTextTuples, xpos: int, width: int) -> None:
    x = 0
    for style, text, *_ in line:
        if x >= width:
            return
        chars = _fragment_chars(style, text) if len(text) <= 256 else None
        if chars is not None:
            end = min(width, x + len(chars))
            row.update(zip(range(xpos + x, xpos + end), chars, strict=False))  # cut at the edge
            x += len(chars)
            continue
        for char_text in text:
            char = _CHAR_CACHE[char_text, style]
            char_width = char.width
            if 0 <= x < width:
                row[xpos + x] = char
                if char_width > 1:
                    for extra in range(1, char_width):
                        row[xpos + x + extra] = _EMPTY
                elif char_width == 0:
                    # Joins the character before it (one or two cells back), as Window does.
                    for back in (2, 1):
                        if x - back >= 0 and row[xpos + x - back].width == back:
                            previous = row[xpos + x - back]
                            row[xpos + x - back] = _CHAR_CACHE[
                                previous.char + char_text, previous.style
                            ]
            x += char_width


def _cell_of(line: StyleAndTextTuples, index: int) -> int:
    """The cell column of character ``index`` of ``line``."""
    cells = 0
    seen = 0
    for style, text, *_ in line:
        if seen + len(text) <= index:
            chars = _fragment_chars(style, text) if len(text) <= 256 else None
            cells += (
                len(text) if chars is not None else sum(_CHAR_CACHE[c, style].width for c in text)
            )
            seen += len(text)
            continue
        for char_text in text[: index - seen]:
            cells += _CHAR_CACHE[char_text, style].width
        return cells
    return cells + (index - seen)


class FormWindow(Window):
    """A ``Window`` for the form's control (see the module docstring)."""

    def write_to_screen(
        self,
        screen: Screen,
        mouse_handlers: MouseHandlers,
        write_position: WritePosition,
        parent_style: str,
        erase_bg: bool,
        z_index: int | None,
    ) -> None:
        position = WritePosition(
            xpos=write_position.xpos,
            ypos=write_position.ypos,
            width=write_position.width,
            height=write_position.height,
        )
        if self.dont_extend_width():
            position.width = min(position.width, self.preferred_width(position.width).preferred)
        if self.dont_extend_height():
            position.height = min(
                position.height, self.preferred_height(position.width, position.height).preferred
            )
        z_index = z_index if self.z_index is None else self.z_index
        draw = functools.partial(
            self._draw, screen, mouse_handlers, position, parent_style, erase_bg
        )
        if z_index is None or z_index <= 0:
            draw()
        else:
            screen.draw_with_z_index(z_index=z_index, draw_func=draw)

    def _draw(
        self,
        screen: Screen,
        mouse_handlers: MouseHandlers,
        position: WritePosition,
        parent_style: str,
        erase_bg: bool,
    ) -> None:
        width, height = position.width, position.height
        if height <= 0 or width <= 0:
            return
        xpos, ypos = position.xpos, position.ypos
        content = self.content.create_content(width, height)
        self.vertical_scroll = self.horizontal_scroll = 0
        fill = self.char() if callable(self.char) else self.char
        data = screen.data_buffer
        if erase_bg or fill:
            blank = _CHAR_CACHE[fill or " ", ""]
            cells = dict.fromkeys(range(xpos, xpos + width), blank)
            for y in range(ypos, ypos + height):
                data[y].update(cells)
        rows = min(content.line_count, height)
        if isinstance(content, RowsContent):
            for y in range(rows):
                data[ypos + y].update(_row_cells(content.rows[y], xpos, width))
        else:
            for y in range(rows):
                _write_line(data[ypos + y], content.get_line(y), xpos, width)

        visible = {y: (y, 0) for y in range(rows)}
        rowcol_to_yx: dict[tuple[int, int], tuple[int, int]] = {}
        cursor = content.cursor_position
        app = get_app()
        has_focus = app.layout.current_control == self.content
        if cursor is not None and 0 <= cursor.y < rows:
            x = _cell_of(content.get_line(cursor.y), cursor.x)
            rowcol_to_yx[cursor.y, cursor.x] = (ypos + cursor.y, xpos + x)
            if has_focus:
                screen.set_cursor_position(self, Point(x=xpos + x, y=ypos + cursor.y))
                screen.show_cursor = False if self.always_hide_cursor() else content.show_cursor
                self._highlight_digraph(screen)
                self._show_key_processor_key_buffer(screen)
        screen.height = max(screen.height, ypos + height)

        self.render_info = WindowRenderInfo(
            window=self,
            ui_content=content,
            horizontal_scroll=0,
            vertical_scroll=0,
            window_width=width,
            window_height=height,
            configured_scroll_offsets=self.scroll_offsets,
            visible_line_to_row_col=visible,
            rowcol_to_yx=rowcol_to_yx,
            x_offset=xpos,
            y_offset=ypos,
            wrap_lines=False,
        )
        handler = functools.partial(self._on_mouse, xpos, ypos, rows)
        handlers = dict.fromkeys(range(xpos, xpos + width), handler)
        for y in range(ypos, ypos + height):
            mouse_handlers.mouse_handlers[y].update(handlers)

        screen.fill_area(position, style=parent_style + " " + to_str(self.style), after=False)
        last = WritePosition(xpos, ypos + height - 1, width, 1)
        screen.fill_area(last, "class:last-line", after=True)
        screen.visible_windows_to_write_positions[self] = position

    def _on_mouse(self, xpos: int, ypos: int, rows: int, event: MouseEvent) -> Any:
        """The control gets the clicked cell relative to the window (see the module
        docstring); clicks outside the modal part of the layout are ignored."""
        if self not in get_app().layout.walk_through_modal_area():
            return NotImplemented
        y = min(event.position.y, ypos + rows - 1)
        return self.content.mouse_handler(
            MouseEvent(
                position=Point(x=event.position.x - xpos, y=y - ypos),
                event_type=event.event_type,
                button=event.button,
                modifiers=event.modifiers,
            )
        )
