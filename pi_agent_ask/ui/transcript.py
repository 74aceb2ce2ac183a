"""The host shell's transcript: the agent's lines, neutralised once on arrival, wrapped at the
pane's width, newest at the bottom, scrolled back with the wheel or PageUp."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout.controls import UIContent, UIControl
from prompt_toolkit.mouse_events import MouseEvent, MouseEventType

from pi_agent_ask.form.transcript import drawn_text, wrap_line

__all__ = ["TRANSCRIPT_PAGE", "WHEEL_ROWS", "Line", "Transcript", "TranscriptControl"]

TRANSCRIPT_PAGE = 10
"""Rows one PageUp/PageDown scrolls the transcript."""
WHEEL_ROWS = 3

_STYLES = {
    "text": "",
    "accent": "class:ask.accent",
    "warning": "class:ask.warning",
    "muted": "class:ask.muted",
    "success": "class:ask.success",
    "error": "class:ask.error",
}
"""The transcript's style names (``form/text.py``'s rows) as the shell's style classes."""

Line = tuple[tuple[str, str], ...]


def _is_rule(line: Line) -> bool:
    text = "".join(text for _, text in line)
    return bool(text) and set(text) == {"─"}


@attrs.define(eq=False, repr=False)
class Transcript:
    """The transcript's lines, neutralised once on arrival, and their rows at one width.

    ``scroll_back`` counts rows between the newest row and the bottom of the pane (0: the
    newest row is at the bottom).
    """

    lines: list[Line] = attrs.field(factory=list)
    scroll_back: int = 0
    anchors: dict[str, int] = attrs.field(factory=dict)
    """Where late lines of a block go: the index after the block's last line."""
    _width: int = 0
    _rows: list[Line] = attrs.field(factory=list)
    _wrapped: int = 0
    """How many of ``lines`` are in ``_rows`` (rows are added as lines arrive)."""

    def append(self, line: Line) -> None:
        """Add a line; text is neutralised, kept as it is drawn (``drawn``: emoji without their
        joiners) and line breaks inside it start new lines."""
        current: list[tuple[str, str]] = []
        for style, text in line:
            parts = drawn_text(text).split("\n")
            for index, part in enumerate(parts):
                if index:
                    self.lines.append(tuple(current))
                    current = []
                if part:
                    current.append((style, part))
        self.lines.append(tuple(current))

    def mark(self, anchor: str) -> None:
        """Name the block that ends here, so late lines can join it (``insert``)."""
        self.anchors[anchor] = len(self.lines)

    def insert(self, anchor: str, lines: Sequence[Line]) -> bool:
        """Add ``lines`` at the end of the block ``anchor``; False when there is no such block.

        Everything after moves down (later anchors too); the rows are re-wrapped.
        """
        at = self.anchors.get(anchor)
        if at is None:
            return False
        block = Transcript()
        for line in lines:
            block.append(line)
        self.lines[at:at] = block.lines
        for name, index in self.anchors.items():
            if index >= at and name != anchor:
                self.anchors[name] = index + len(block.lines)
        self.anchors[anchor] = at + len(block.lines)
        self._rows, self._wrapped = [], 0
        return True

    def rows(self, width: int) -> list[Line]:
        """Every line wrapped to ``width``; rules (lines of ``─`` only) span the width."""
        if width != self._width:
            self._width, self._rows, self._wrapped = width, [], 0
        for line in self.lines[self._wrapped :]:
            if _is_rule(line):
                self._rows.append(((line[0][0], "─" * width),))
                continue
            text = "".join(text for _, text in line)
            indent = len(text) - len(text.lstrip(" "))
            self._rows.extend(wrap_line(line, width, indent) if line else [()])
        self._wrapped = len(self.lines)
        return self._rows

    def scroll(self, rows: int) -> None:
        """Scroll by ``rows`` (positive: back in time); clamped when drawn."""
        self.scroll_back = max(0, self.scroll_back + rows)


class TranscriptControl(UIControl):
    """The transcript pane: the newest rows at the bottom, wheel scrolling."""

    def __init__(self, transcript: Transcript, on_width: Callable[[int], None]) -> None:
        self.transcript = transcript
        self.on_width = on_width

    def is_focusable(self) -> bool:
        return False

    def create_content(self, width: int, height: int) -> UIContent:
        self.on_width(width)
        rows = self.transcript.rows(width)
        self.transcript.scroll_back = min(
            self.transcript.scroll_back, max(0, len(rows) - max(1, height))
        )
        end = len(rows) - self.transcript.scroll_back
        shown = rows[max(0, end - height) : end]
        padded: list[Line] = [()] * (height - len(shown)) + shown

        def get_line(index: int) -> StyleAndTextTuples:
            if not 0 <= index < len(padded):
                return []
            return [(_STYLES.get(style, ""), text) for style, text in padded[index]]

        return UIContent(get_line=get_line, line_count=len(padded), show_cursor=False)

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        if mouse_event.event_type == MouseEventType.SCROLL_UP:
            self.transcript.scroll(WHEEL_ROWS)
            return None
        if mouse_event.event_type == MouseEventType.SCROLL_DOWN:
            self.transcript.scroll(-WHEEL_ROWS)
            return None
        return NotImplemented
