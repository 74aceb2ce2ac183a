"""The form's prompt_toolkit ``Window``: drawn by ``Window`` itself, clicks handed over by cell.

``Window`` hands its control a click as a character index into a content line, and moves a
click on a blank cell to the nearest character on its left (a click on an empty row becomes a
click on the first row). The form's click targets are cells: a click right of a Review
action's label or on an empty row is nobody's click. :class:`FormWindow` draws as ``Window``
does (characters, cursor, styles, scrolling) and then covers the cells it drew with one mouse
handler that hands the control the clicked cell: ``x`` in cells from the window's left, ``y``
its row from the window's top.
"""

from __future__ import annotations

import functools
from typing import Any

from prompt_toolkit.application.current import get_app
from prompt_toolkit.data_structures import Point
from prompt_toolkit.layout import Dimension, Window
from prompt_toolkit.layout.dimension import to_dimension
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import Screen, WritePosition
from prompt_toolkit.mouse_events import MouseEvent

__all__ = ["FormWindow"]


class FormWindow(Window):
    """A ``Window`` whose control receives clicks as cells (see the module docstring).

    It never stays scrolled sideways: the form fits its rows to the width, so only a screen
    narrower than the editor's indent puts the cursor past the right edge, where ``Window``
    scrolls to show it; each redraw starts again from the left edge (a screen grown back
    would otherwise keep that scroll and cut the first cells off every row)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(get_horizontal_scroll=lambda _window: 0, **options)

    def preferred_height(self, width: int, max_available_height: int) -> Dimension:
        """As ``Window``'s, with the form told the rows this window can have at most (a
        panel's cap, ``panel.panel_height``), not only the rows around it: whether the form
        is drawn short depends on them, and a frame measured for more rows than the window
        keeps would be drawn in a shorter one."""
        cap = to_dimension(self.height).max
        return super().preferred_height(width, min(max_available_height, cap))

    def write_to_screen(
        self,
        screen: Screen,
        mouse_handlers: MouseHandlers,
        write_position: WritePosition,
        parent_style: str,
        erase_bg: bool,
        z_index: int | None,
    ) -> None:
        super().write_to_screen(
            screen, mouse_handlers, write_position, parent_style, erase_bg, z_index
        )
        cover = functools.partial(self._cover, screen, mouse_handlers)
        z_index = z_index if self.z_index is None else self.z_index
        if z_index is None or z_index <= 0:
            cover()
        else:  # drawn later, with the floats: cover it after it is drawn
            screen.draw_with_z_index(z_index=z_index, draw_func=cover)

    def _cover(self, screen: Screen, mouse_handlers: MouseHandlers) -> None:
        drawn = screen.visible_windows_to_write_positions.get(self)
        if drawn is None:
            return
        mouse_handlers.set_mouse_handler_for_range(
            drawn.xpos,
            drawn.xpos + drawn.width,
            drawn.ypos,
            drawn.ypos + drawn.height,
            functools.partial(self._on_click, drawn.xpos, drawn.ypos),
        )

    def _on_click(self, xpos: int, ypos: int, event: MouseEvent) -> object:
        if self not in get_app().layout.walk_through_modal_area():
            return NotImplemented
        return self.content.mouse_handler(
            MouseEvent(
                position=Point(x=event.position.x - xpos, y=event.position.y - ypos),
                event_type=event.event_type,
                button=event.button,
                modifiers=event.modifiers,
            )
        )
