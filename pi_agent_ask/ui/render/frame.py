"""What a rendered form is made of: styled fragments and lines, click targets, the frame,
the options rendering reads, and the style class names (``surface.py`` gives them colours)."""

from __future__ import annotations

from typing import Literal

import attrs

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.persistence.settings import Keymaps

Fragment = tuple[str, str]
Line = tuple[Fragment, ...]


# Styles (prompt_toolkit class names; surface.py maps them to colours).
TEXT = "class:ask.text"
TITLE = "class:ask.title"
ACCENT = "class:ask.accent"
MUTED = "class:ask.muted"
WARNING = "class:ask.warning"
SUCCESS = "class:ask.success"
ERROR = "class:ask.error"
PROMPT = "class:ask.prompt"
TAB = "class:ask.tab"
TAB_ACTIVE = "class:ask.tab.active"
POINTER = "class:ask.pointer"
ACTIVE = "class:ask.option.active"
MARK = "class:ask.mark"
MARK_ON = "class:ask.mark.selected"
NOTE = "class:ask.note"
EDITOR = "class:ask.editor"
PLACEHOLDER = "class:ask.placeholder"
CONTEXT = "class:ask.context"
HINT = "class:ask.hint"
RULE = "class:ask.rule"

POINTER_TEXT = "› "
NO_POINTER = "  "

TargetKind = Literal["option", "tab", "review"]


@attrs.frozen(repr=False)
class RenderOptions:
    """What rendering needs besides the form snapshot: live settings and the live editor.

    ``editor_text``/``editor_cursor`` are the terminal's editor buffer, which may be a keystroke
    ahead of the snapshot; ``None`` means "use the snapshot's editor text, cursor at its end".
    """

    keymaps: Keymaps = attrs.field(factory=Keymaps)
    show_footer_hints: bool = True
    editor_text: str | None = None
    editor_cursor: int | None = None
    notice: str | None = None
    """A short notice: under the open editor (clipboard reads), else above the key hints (an
    Alt key that does nothing)."""
    config_notices: tuple[str, ...] = ()
    """Problems with the settings file (shown above the key hints until the first key)."""
    menu: tuple[tuple[str, bool], ...] = ()
    """``@`` path candidates under the open editor, each with whether it is the chosen one."""
    held_digit: int | None = None
    """A first digit typed on a question of ten rows or more that waits for a second one (the
    key hints say what the next key does with it)."""
    height: int | None = None
    """Rows the frame will be shown in, when known. At :data:`SHORT_SCREEN_ROWS` or fewer the
    key hints take one row (the most used keys first), so prompt and options keep the room."""


SHORT_SCREEN_ROWS = 18


@attrs.frozen(repr=False)
class Target:
    """A click target: rows ``first_row..last_row-1``, columns ``start_col..end_col-1``.

    ``key`` identifies the target across frames (a press and its release must land on the same
    one); ``command`` is what a completed click sends.
    """

    kind: TargetKind
    key: tuple[str, int, int]
    first_row: int
    last_row: int
    start_col: int
    end_col: int
    command: fs.Command

    def contains(self, row: int, col: int) -> bool:
        return self.first_row <= row < self.last_row and self.start_col <= col < self.end_col

    def shifted(self, rows: int, cols: int = 0) -> Target:
        return Target(
            self.kind,
            self.key,
            self.first_row + rows,
            self.last_row + rows,
            self.start_col + cols,
            self.end_col + cols,
            self.command,
        )


@attrs.frozen(repr=False)
class Frame:
    """One rendered form: see the module docstring."""

    lines: tuple[Line, ...]
    width: int
    header_rows: int
    footer_rows: int
    targets: tuple[Target, ...]
    focus_row: int
    cursor: tuple[int, int] | None = None
    alert_rows: tuple[int, ...] = ()
    """Rows the person must see now (a dirty-dismiss warning, an armed Review action, the
    chosen ``@`` path candidate): the surface keeps them on screen with the focus row."""
    lead_rows: int = 0
    """Rows right after the header (the question's prompt) that the surface keeps on screen
    with it while the body scrolls, when the height leaves room for them."""
    editor_room: int | None = None
    """The cells a row of the open editor's text is wrapped to (``None``: no editor open):
    Up and Down move the cursor between those rows (``editor.row_move``)."""
    held_row: int | None = None
    """The key hints' row that starts with the digit held for a second one (``1 typed · 0-3
    rows 10-13 ...``, the digit in its first cell), while one waits: also with the key hints
    turned off, where these rows are the only sign of it (``footer.footer_rows``)."""
    tall_rows: int = 0
    """Rows the same form has rendered for a screen that is not short (``is_short``): its
    own when it is not short. A surface that must choose tells from a short frame alone
    whether the form fits a short screen even drawn tall."""

    def target_at(self, row: int, col: int) -> Target | None:
        """The click target covering frame cell ``(row, col)``, if any."""
        for target in self.targets:
            if target.contains(row, col):
                return target
        return None

    def text(self) -> str:
        """The frame as plain text, one line per row (tests and debugging)."""
        return "\n".join(line_text(line) for line in self.lines)


def is_short(options: RenderOptions) -> bool:
    return options.height is not None and options.height <= SHORT_SCREEN_ROWS
