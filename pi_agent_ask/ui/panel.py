"""The host shell's background panel: its top rule, which says who has the keyboard, and its
height, which leaves the transcript a few rows (a taller form scrolls inside the panel)."""

from __future__ import annotations

from collections.abc import Callable

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import Dimension
from prompt_toolkit.layout.controls import UIContent, UIControl
from prompt_toolkit.mouse_events import MouseEvent, MouseEventType

from pi_agent_ask.form.transcript import cell_width

__all__ = [
    "PANEL_FOCUSED_LABEL",
    "PANEL_UNFOCUSED_LABEL",
    "TRANSCRIPT_MIN_ROWS",
    "PanelRule",
    "panel_height",
    "rule_line",
]

PANEL_FOCUSED_LABEL = " Questions · keys answer here "
PANEL_UNFOCUSED_LABEL = " Questions · Alt+Q to answer "
TRANSCRIPT_MIN_ROWS = 3
"""Rows the transcript keeps when a tall form is shown (the form scrolls instead)."""


class PanelRule(UIControl):
    """The panel's top rule. It belongs to the panel's focus area: a click here only focuses
    the panel (a rule has nothing to select)."""

    def __init__(self, focus_panel: Callable[[], None], focused: Callable[[], bool]) -> None:
        self.focus_panel = focus_panel
        self.focused = focused

    def create_content(self, width: int, height: int) -> UIContent:
        line = rule_line(self.focused(), width)
        return UIContent(get_line=lambda _i: line, line_count=1, show_cursor=False)

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        if mouse_event.event_type == MouseEventType.MOUSE_DOWN:
            self.focus_panel()
            return None
        return NotImplemented


def rule_line(focused: bool, width: int) -> StyleAndTextTuples:
    """The panel's top rule: heavy and bright with "keys answer here" while the panel has the
    keyboard, thin and muted with the key that takes it otherwise (focus is never told by
    colour alone)."""
    if focused:
        char, style, label = "━", "class:ask.focus", PANEL_FOCUSED_LABEL
    else:
        char, style, label = "─", "class:ask.rule", PANEL_UNFOCUSED_LABEL
    if cell_width(label) + 4 > width:
        return [(style, char * width)]
    return [
        (style, char * 2),
        (style if focused else "class:ask.muted", label),
        (style, char * (width - 2 - cell_width(label))),
    ]


def panel_height(rows: int, editor_rows: int) -> Dimension:
    """The panel's cap on a screen of ``rows``, under which sit the status line, the editor
    (``editor_rows``) and one row for a yes/no question."""
    used = 1 + 1 + editor_rows + 1  # the panel's rule, the status line, the editor, a question
    keep = TRANSCRIPT_MIN_ROWS if rows >= 16 else 1  # a short screen gives the panel more
    return Dimension(max=max(4, rows - used - keep))
