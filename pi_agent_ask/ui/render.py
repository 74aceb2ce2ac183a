"""The form view as a pure function: a ``FormState`` snapshot in, styled lines and targets out.

``render_form(state, width, options) -> Frame``. No prompt_toolkit objects, no I/O; the
terminal surface (``surface.py``) shows a frame and maps clicks through its targets.

What a frame holds, stated once:

- ``lines``: every row of the form, each a tuple of ``(style, text)`` fragments whose cells fit
  ``width``. Styles are prompt_toolkit class names (``class:ask.warning``); the surface's style
  sheet gives them colours. The first ``header_rows`` lines (title, tab bar) and the last
  ``footer_rows`` lines (key hints) stay on screen; the rows between them scroll.
- ``targets``: the click targets -- each option row, each visible tab, each Review action --
  with the rows and columns they cover *in this frame*. A target covers its own row text only:
  context shown beside the options, notes under a row and the Review summary are not part of
  any target. Because targets come with the frame, a click is always mapped through the rows
  that are on screen now (after a resize or a scroll), never through stale positions.
- ``focus_row``: the row the surface keeps visible (the highlighted option, the open editor's
  cursor, the highlighted Review action); ``cursor``: where the editor's cursor is, if one is
  open.

Every string the agent supplied (title, labels, prompts, descriptions, context) and every
string the person typed passes through ``sanitize_text``/``sanitize_line`` before it becomes a
fragment, so no escape sequence or control character reaches the terminal from here.

Layout rules: the context of a question is shown beside its options when the frame is at least
:data:`CONTEXT_BESIDE_MIN_WIDTH` cells wide, and below them otherwise; below the options it is
hidden while the cursor is on the ``Type your own`` row (the editor needs the room there).
Recommended options render ``(recommended)`` in the warning style followed by a muted
`` | <description>``; no option is ever shown selected because it is recommended. Saved option
notes and custom text stay under their rows whether or not the row is highlighted.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import MARKER, sanitize_line, sanitize_text
from pi_agent_ask.form.text import image_marker
from pi_agent_ask.form.transcript import cell_width, line_text, merge_segments, wrap_line
from pi_agent_ask.form.types import Draft, Option, Question
from pi_agent_ask.persistence.keys import format_key
from pi_agent_ask.persistence.settings import EditorKeymap, Keymaps

__all__ = [
    "ADD_NOTE_PLACEHOLDER",
    "CONTEXT_BESIDE_MIN_WIDTH",
    "CUSTOM_LABEL",
    "CUSTOM_PLACEHOLDER",
    "Fragment",
    "Frame",
    "Line",
    "RenderOptions",
    "Target",
    "footer_hints",
    "line_text",
    "render_form",
    "wrap_fragments",
]

Fragment = tuple[str, str]
Line = tuple[Fragment, ...]

CUSTOM_LABEL = "Type your own"
CUSTOM_PLACEHOLDER = "Type answer..."
ADD_NOTE_PLACEHOLDER = "Add a note..."
RECOMMENDED = "(recommended)"
OPTION_TEXT_INDENT = 10
"""Cells before an option's text (pointer, number, mark), a little more than most rows use."""
NOT_SELECTED = "(not selected)"

CONTEXT_BESIDE_MIN_WIDTH = 100
"""From this width on, a question's context is shown beside its options."""
OPTION_COLUMN_SHARE = 0.5
"""Share of the width the option column takes when context is beside it."""
SEPARATOR = " │ "
TAB_LABEL_MAX = 24
"""Cells of a tab label before it is truncated with an ellipsis."""

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


@attrs.frozen
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
    """A short notice shown under the open editor (clipboard reads)."""
    config_notices: tuple[str, ...] = ()
    """Problems with the settings file (shown above the key hints until the first key)."""
    menu: tuple[tuple[str, bool], ...] = ()
    """``@`` path candidates under the open editor, each with whether it is the chosen one."""
    height: int | None = None
    """Rows the frame will be shown in, when known. At :data:`SHORT_SCREEN_ROWS` or fewer the
    key hints take one row (the most used keys first), so prompt and options keep the room."""


SHORT_SCREEN_ROWS = 18


@attrs.frozen
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


@attrs.frozen
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
    """Rows of a warning the person must see now (a dirty-dismiss warning, an armed Review
    action): the surface keeps them on screen with the focus row."""
    lead_rows: int = 0
    """Rows right after the header (the question's prompt) that the surface keeps on screen
    with it while the body scrolls, when the height leaves room for them."""

    def target_at(self, row: int, col: int) -> Target | None:
        """The click target covering frame cell ``(row, col)``, if any."""
        for target in self.targets:
            if target.contains(row, col):
                return target
        return None

    def text(self) -> str:
        """The frame as plain text, one line per row (tests and debugging)."""
        return "\n".join(line_text(line) for line in self.lines)


def line_width(line: Line) -> int:
    total = 0
    for _, text in line:
        total += len(text) if text.isascii() else _cells(text)
    return total


def _cells(text: str) -> int:
    """``cell_width(text)``; the widths of short non-ASCII strings (pointers, marks, rules,
    ``·`` separators) are remembered."""
    if text.isascii():
        return len(text)
    return _remembered_cells(text) if len(text) <= CACHED_TEXT_MAX else cell_width(text)


@functools.lru_cache(maxsize=4096)
def _remembered_cells(text: str) -> int:
    return cell_width(text)


# Agent strings (labels, prompts, descriptions) are the same on every frame of a form: their
# neutralised forms are remembered, keyed by the string itself. Pure functions of a string, so
# an entry never goes stale; long strings are not kept (they would pin memory after the form).
CACHED_TEXT_MAX = 2048
"""Characters up to which a string's neutralised form is remembered."""


@functools.lru_cache(maxsize=4096)
def _remembered_line(text: str) -> str:
    return sanitize_line(text)


@functools.lru_cache(maxsize=4096)
def _remembered_parts(text: str) -> tuple[str, ...]:
    return tuple(sanitize_text(text).split("\n"))


def _clean_line(text: str) -> str:
    """``sanitize_line(text)``, remembered for short strings."""
    return _remembered_line(text) if len(text) <= CACHED_TEXT_MAX else sanitize_line(text)


def _clean_parts(text: str) -> tuple[str, ...]:
    """``sanitize_text(text)`` split at its line breaks, remembered for short strings."""
    if len(text) <= CACHED_TEXT_MAX:
        return _remembered_parts(text)
    return tuple(sanitize_text(text).split("\n"))


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


@attrs.define
class _Block:
    """Rows under construction, with targets relative to the block's first row."""

    lines: list[Line] = attrs.field(factory=list)
    targets: list[Target] = attrs.field(factory=list)
    focus: int | None = None
    cursor: tuple[int, int] | None = None
    alerts: list[int] = attrs.field(factory=list)
    lead: int = 0
    """Rows at the block's start that stay on screen with the header when there is room (the
    question's prompt)."""

    def add(self, line: Line) -> None:
        self.lines.append(line)

    def extend(self, lines: Iterable[Line]) -> None:
        self.lines.extend(lines)

    def blank(self) -> None:
        self.lines.append(())

    def append_block(self, other: _Block) -> None:
        offset = len(self.lines)
        self.lines.extend(other.lines)
        if offset:
            self.targets.extend(target.shifted(offset) for target in other.targets)
        else:
            self.targets.extend(other.targets)
        if other.focus is not None:
            self.focus = other.focus + offset
        if other.cursor is not None:
            self.cursor = (other.cursor[0] + offset, other.cursor[1])
        self.alerts.extend(row + offset for row in other.alerts)

    def alert(self, lines: Iterable[Line]) -> None:
        """Add warning rows that must stay visible."""
        for line in lines:
            self.alerts.append(len(self.lines))
            self.lines.append(line)


def wrap_fragments(fragments: Sequence[Fragment], width: int, indent: int = 0) -> list[Line]:
    """Word-wrap one logical line of fragments (no newlines inside) to ``width`` cells;
    continuation rows start with ``indent`` spaces."""
    key = tuple(fragments)
    if sum(len(text) for _, text in key) <= CACHED_TEXT_MAX:
        return list(_remembered_wrap(key, width, indent))
    return _wrap(key, width, indent)


@functools.lru_cache(maxsize=8192)
def _remembered_wrap(fragments: tuple[Fragment, ...], width: int, indent: int) -> tuple[Line, ...]:
    return tuple(_wrap(fragments, width, indent))


def _wrap(fragments: Sequence[Fragment], width: int, indent: int) -> list[Line]:
    line = merge_segments(fragments)
    if line_width(line) <= width:
        return [line]
    # wrap_line marks the indentation it adds with its own plain style name.
    return [
        tuple((TEXT if style == "text" else style, text) for style, text in row)
        for row in wrap_line(line, width, indent)
    ]


def _paragraphs(
    prefix: Sequence[Fragment], text: str, style: str, width: int, indent: int
) -> list[Line]:
    """``prefix`` + sanitised ``text`` wrapped to ``width``; the text's own line breaks start
    new rows indented by ``indent`` cells."""
    parts = _clean_parts(text)
    rows = wrap_fragments([*prefix, (style, parts[0])], width, indent)
    for part in parts[1:]:
        rows.extend(wrap_fragments([(TEXT, " " * indent), (style, part)], width, indent))
    return rows


def _truncate(text: str, limit: int) -> str:
    if _cells(text) <= limit:
        return text
    out, used = "", 0
    for char in text:
        w = _cells(char)
        if used + w > limit - 1:
            break
        out += char
        used += w
    return out + "…"


@functools.lru_cache(maxsize=4096)
def _beside(left_line: Line, right_line: Line, left: int) -> Line:
    """A row of the option column padded to ``left`` cells, the rule, a row of context."""
    return merge_segments([*_pad(left_line, left), (RULE, SEPARATOR), *right_line])


def _pad(line: Line, width: int) -> Line:
    missing = width - line_width(line)
    return (*line, (TEXT, " " * missing)) if missing > 0 else line


# --------------------------------------------------------------------------------------------
# Header: title and tab bar
# --------------------------------------------------------------------------------------------


TAB_MARK_CELLS = 1
"""Cells of every tab mark (``✓``, ``□``, ``–``): a tab's width does not depend on its mark."""


def _tab_mark(state: fs.FormState, index: int) -> tuple[str, str]:
    draft = state.drafts[index]
    if draft.skipped:
        return "–", MUTED
    if draft.is_answered:
        return "✓", SUCCESS
    return "□", MUTED


def _tab_label(label: str) -> tuple[str, int]:
    """`` <label> `` as a tab shows it (neutralised, truncated) and its cells after the mark."""
    return _remembered_tab_label(label) if len(label) <= CACHED_TEXT_MAX else _tab_text(label)


@functools.lru_cache(maxsize=4096)
def _remembered_tab_label(label: str) -> tuple[str, int]:
    return _tab_text(label)


def _tab_text(label: str) -> tuple[str, int]:
    text = f" {_truncate(sanitize_line(label), TAB_LABEL_MAX)} "
    return text, _cells(text)


def _tab_bar(state: fs.FormState, width: int, all_answered: bool) -> _Block:
    """One row of tabs. When they do not fit, a window of tabs around the current one is shown,
    with ``‹ +k`` / ``+k ›`` counting the hidden tabs on each side. Only the tabs shown are
    built: the cost of a frame does not grow with the tabs out of view."""
    questions = state.params.questions
    labels = [_tab_label(question.label) for question in questions]
    review_text = f" {'✓' if all_answered else '→'} Review "
    widths = [1 + TAB_MARK_CELLS + cells for _, cells in labels]
    widths.append(_cells(review_text))
    total = sum(widths) + len(widths) - 1
    first, last = 0, len(widths)
    if total > width:
        first, last = _tab_window(widths, state.tab, width)
    fragments: list[Fragment] = []
    targets: list[Target] = []
    col = 0
    if first > 0:
        more = f"‹ +{first} "
        fragments.append((MUTED, more))
        col += _cells(more)
    review = len(questions)
    for index in range(first, last):
        if index > first:
            fragments.append((TEXT, " "))
            col += 1
        active = index == state.tab
        style = TAB_ACTIVE if active else TAB
        if index == review:
            fragments.append((style, review_text))
            command: fs.Command = fs.SelectTab(state.review_tab)
        else:
            mark, mark_style = _tab_mark(state, index)
            fragments.extend(
                [(style, " "), (style if active else mark_style, mark), (style, labels[index][0])]
            )
            command = fs.SelectTab(index)
        targets.append(Target("tab", ("tab", index, 0), 0, 1, col, col + widths[index], command))
        col += widths[index]
    if last < len(widths):
        fragments.append((MUTED, f" +{len(widths) - last} ›"))
    return _Block(lines=[merge_segments(fragments)], targets=targets)


def _tab_window(widths: Sequence[int], current: int, width: int) -> tuple[int, int]:
    """The widest contiguous run of tabs around ``current`` that fits with its indicators."""
    first, last = current, current + 1

    def cost(a: int, b: int) -> int:
        used = sum(widths[a:b]) + (b - a - 1)
        if a > 0:
            used += len(f"‹ +{a} ")
        if b < len(widths):
            used += len(f" +{len(widths) - b} ›")
        return used

    grow_right = True
    while True:
        grown = False
        for side in (True, False) if grow_right else (False, True):
            if side and last < len(widths) and cost(first, last + 1) <= width:
                last += 1
                grown = True
            elif not side and first > 0 and cost(first - 1, last) <= width:
                first -= 1
                grown = True
        grow_right = not grow_right
        if not grown:
            return first, last


NEXT_UNANSWERED_KEY = "U"
"""``shift+u``: the next unanswered question (navigation; a fixed key like ``D``)."""


def progress_text(state: fs.FormState, answered: int | None = None) -> str | None:
    """``3/12 answered · U next unanswered`` for a form of several questions (``answered``:
    the count, when the caller has it)."""
    count = len(state.params.questions)
    if count < 2:
        return None
    if answered is None:
        answered = sum(1 for draft in state.drafts if draft.is_answered)
    if answered == count:
        return f"{answered}/{count} answered"
    return f"{answered}/{count} answered · {NEXT_UNANSWERED_KEY} next unanswered"


def _header(state: fs.FormState, width: int, short: bool = False) -> _Block:
    block = _Block()
    title = state.params.title
    answered = sum(1 for draft in state.drafts if draft.is_answered)
    progress = progress_text(state, answered)
    if title:
        rows = wrap_fragments([(TITLE, _clean_line(title))], width)
        if progress and line_width(rows[-1]) + 3 + _cells(progress) <= width:
            rows[-1] = merge_segments([*rows[-1], (MUTED, f" · {progress}")])
            progress = None
        block.extend(rows)
    tabs = _tab_bar(state, width, answered == len(state.drafts))
    if progress and line_width(tabs.lines[0]) + 3 + _cells(progress) <= width:
        tabs.lines[0] = merge_segments([*tabs.lines[0], (MUTED, f"   {progress}")])
    block.append_block(tabs)
    if not short:
        block.blank()
    return block


def _short(options: RenderOptions) -> bool:
    return options.height is not None and options.height <= SHORT_SCREEN_ROWS


# --------------------------------------------------------------------------------------------
# Editors
# --------------------------------------------------------------------------------------------


def _display_char(char: str) -> str:
    if char.isprintable():
        return char
    return MARKER


def _editor_rows(
    text: str,
    cursor: int,
    indent: int,
    width: int,
    placeholder: str,
    label: Sequence[Fragment] = (),
) -> tuple[list[Line], tuple[int, int]]:
    """The open editor: ``label`` then the text, hard-wrapped at ``width`` so the cursor maps to
    one cell. Returns the rows and the cursor's ``(row, col)`` relative to the first row.

    A row keeps one free cell at its end, so a cursor after the last character always fits.
    """
    head = merge_segments([(TEXT, " " * indent), *label])
    start = line_width(head)
    avail = max(2, width - start)
    if not text:
        rows = [merge_segments([*head, (PLACEHOLDER, _truncate(placeholder, avail))])]
        return rows, (0, start)
    lines: list[Line] = []
    current: list[str] = []
    used = 0
    cursor_at: tuple[int, int] | None = None
    row_prefix: Line = head

    def flush() -> None:
        nonlocal current, used, row_prefix
        lines.append(merge_segments([*row_prefix, (EDITOR, "".join(current))]))
        current = []
        used = 0
        row_prefix = merge_segments([(TEXT, " " * start)])

    for index, char in enumerate(text):
        if index == cursor:
            cursor_at = (len(lines), start + used)
        if char == "\n":
            flush()
            continue
        shown = _display_char(char)
        w = _cells(shown)
        if used + w > avail - 1:
            flush()
            if index == cursor:
                cursor_at = (len(lines), start)
        current.append(shown)
        used += w
    if cursor_at is None:
        cursor_at = (len(lines), start + used)
    flush()
    return lines, cursor_at


def _editor_for(state: fs.FormState, options: RenderOptions) -> tuple[str, int]:
    editor = state.editor
    assert editor is not None
    text = options.editor_text if options.editor_text is not None else editor.text
    cursor = options.editor_cursor if options.editor_cursor is not None else len(text)
    return text, max(0, min(cursor, len(text)))


def _add_editor(
    block: _Block,
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
    rows, (crow, ccol) = _editor_rows(text, at, indent, width, placeholder, [(label_style, label)])
    block.cursor = (len(block.lines) + crow, ccol)
    block.focus = len(block.lines) + crow
    block.extend(rows)
    pad = " " * (indent + _cells(label))
    if editor.images:
        block.extend(
            wrap_fragments([(TEXT, pad), (MUTED, image_marker(len(editor.images)))], width)
        )
    if options.notice:
        block.extend(
            wrap_fragments([(TEXT, pad), (WARNING, sanitize_line(options.notice))], width, len(pad))
        )
    if options.menu:
        block.extend(_menu_rows(options.menu, pad, width))


MENU_ROWS = 6
"""Candidates the ``@`` list shows at once (a window around the chosen one)."""


def _menu_rows(menu: Sequence[tuple[str, bool]], pad: str, width: int) -> list[Line]:
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
                    (ACTIVE if on else MUTED, _truncate(sanitize_line(name), room)),
                ]
            )
        )
    more = len(menu) - MENU_ROWS
    hint = f"{len(menu)} matches · Tab/Shift+Tab or Down/Up choose · type to narrow"
    if more > 0:
        hint = f"{hint} · {first} above, {max(0, len(menu) - first - MENU_ROWS)} below"
    rows.extend(wrap_fragments([(TEXT, pad), (MUTED, hint)], width, len(pad)))
    return rows


def _with_images(text: str, count: int) -> str:
    """Text followed by its attachment marker (``[2 images]``), either may be missing."""
    return " ".join(part for part in (text, image_marker(count)) if part)


# --------------------------------------------------------------------------------------------
# A question tab
# --------------------------------------------------------------------------------------------


def _mark(selected: bool, multi: bool) -> tuple[str, str]:
    if multi:
        return ("[x] " if selected else "[ ] "), (MARK_ON if selected else MARK)
    return ("(•) " if selected else "( ) "), (MARK_ON if selected else MARK)


def _number_text(row: int, rows: int) -> str:
    digits = len(str(rows))
    return f"{row + 1}.".rjust(digits + 1) + " "


def _option_rows(
    state: fs.FormState, options: RenderOptions, q: int, width: int
) -> tuple[_Block, bool]:
    """The option list of question ``q`` (with notes, custom text and editors under their
    rows). Returns the block and whether the custom row is the highlighted one."""
    question = state.params.questions[q]
    draft = state.drafts[q]
    live = Draft() if draft.skipped else draft
    multi = state.types[q] == "multi"
    cursor = state.cursors[q]
    editor = state.editor if state.editor is not None and state.editor.question == q else None
    count = len(question.options) + 1
    block = _Block()
    for row, option in enumerate(question.options):
        active = row == cursor
        first = len(block.lines)
        prefix = _row_prefix(row, count, active, row in live.selected, multi)
        indent = line_width(prefix)
        block.extend(_option_label_rows(prefix, option, active, width, indent))
        block.targets.append(
            Target(
                "option",
                ("option", q, row),
                first,
                len(block.lines),
                0,
                width,
                fs.Number(row + 1),
            )
        )
        if active:
            block.focus = first
        if (
            editor is not None
            and editor.kind == "option_note"
            and editor.option_value == option.value
        ):
            _add_editor(block, state, options, indent, width, ADD_NOTE_PLACEHOLDER, "Note: ")
        else:
            note = live.option_notes.get(option.value, "")
            images = len(live.option_note_images.get(option.value, ()))
            if note.strip() or images:
                block.extend(
                    _paragraphs(
                        [(TEXT, " " * indent), (NOTE, "Note: ")],
                        _with_images(note, images),
                        TEXT,
                        width,
                        indent + 6,
                    )
                )
    # The internal "Type your own" row.
    row = len(question.options)
    active = row == cursor
    first = len(block.lines)
    custom_on = live.custom_selected and fs.has_custom_content(live)
    prefix = _row_prefix(row, count, active, custom_on, multi)
    indent = line_width(prefix)
    label_style = ACTIVE if active else TEXT
    block.extend(wrap_fragments([*prefix, (label_style, CUSTOM_LABEL)], width, indent))
    block.targets.append(
        Target("option", ("option", q, row), first, len(block.lines), 0, width, fs.Number(row + 1))
    )
    if active:
        block.focus = first
    if editor is not None and editor.kind == "custom":
        _add_editor(block, state, options, indent, width, CUSTOM_PLACEHOLDER, "> ", ACCENT)
    elif fs.has_custom_content(live):
        style = TEXT if custom_on else MUTED
        block.extend(
            _paragraphs(
                [(TEXT, " " * indent)],
                _with_images(live.custom_text, len(live.custom_images)),
                style,
                width,
                indent,
            )
        )
    return block, active


@functools.lru_cache(maxsize=1024)
def _row_prefix(row: int, count: int, active: bool, selected: bool, multi: bool) -> Line:
    mark, mark_style = _mark(selected, multi)
    return merge_segments(
        [
            (POINTER, POINTER_TEXT if active else NO_POINTER),
            (ACTIVE if active else MUTED, _number_text(row, count)),
            (mark_style, mark),
        ]
    )


def _option_label_rows(
    prefix: Line, option: Option, active: bool, width: int, indent: int
) -> list[Line]:
    label_style = ACTIVE if active else TEXT
    label = _clean_line(option.label)
    description = _clean_line(option.description) if option.description else None
    if option.recommended:
        fragments: list[Fragment] = [
            *prefix,
            (label_style, label),
            (TEXT, " "),
            (WARNING, RECOMMENDED),
        ]
        if description:
            fragments.append((MUTED, f" | {description}"))
        return wrap_fragments(fragments, width, indent)
    rows = wrap_fragments([*prefix, (label_style, label)], width, indent)
    if description:
        rows.extend(wrap_fragments([(TEXT, " " * indent), (MUTED, description)], width, indent))
    return rows


def _question_note_rows(
    state: fs.FormState, options: RenderOptions, q: int, width: int, block: _Block
) -> None:
    draft = state.drafts[q]
    editor = state.editor
    if editor is not None and editor.question == q and editor.kind == "note":
        block.blank()
        _add_editor(block, state, options, 2, width, ADD_NOTE_PLACEHOLDER, "Question note: ")
        return
    if draft.note.strip() or draft.note_images:
        block.blank()
        block.extend(
            _paragraphs(
                [(TEXT, "  "), (NOTE, "Question note: ")],
                _with_images(draft.note, len(draft.note_images)),
                TEXT,
                width,
                4,
            )
        )


_LIST_MARKER = re.compile(r"^(\s*(?:[-*•+]|\d+[.)])\s+|\s+)")


def _hanging_indent(line: str) -> int:
    """Cells a wrapped context line's continuation rows are indented by: the width of its list
    marker (``- ``, ``* ``, ``1. ``) or leading blanks, so bullets keep their shape."""
    match = _LIST_MARKER.match(line)
    return _cells(match.group(1)) if match else 0


def _context_rows(context: str, width: int) -> list[Line]:
    rows: list[Line] = []
    for part in _clean_parts(context):
        indent = _hanging_indent(part)
        rows.extend(wrap_fragments([(CONTEXT, part)], width, indent if indent < width // 2 else 0))
    return rows


@functools.lru_cache(maxsize=4096)
def _remembered_longest_word(text: str) -> int:
    return max((_cells(word) for word in text.split()), default=0)


def _longest_word(texts: Iterable[str]) -> int:
    return max(
        (
            _remembered_longest_word(text)
            if len(text) <= CACHED_TEXT_MAX
            else max((_cells(word) for word in text.split()), default=0)
            for text in texts
        ),
        default=0,
    )


def _type_hint(state: fs.FormState, q: int) -> list[Fragment]:
    multi = state.types[q] == "multi"
    return [(MUTED, "Select any number of options." if multi else "Select one option.")]


def _question_body(state: fs.FormState, options: RenderOptions, width: int) -> _Block:
    q = state.tab
    question = state.params.questions[q]
    keymaps = options.keymaps
    block = _Block()
    block.extend(_paragraphs([], question.prompt, PROMPT, width, 0))
    block.lead = len(block.lines)
    block.extend(wrap_fragments(_type_hint(state, q), width))
    block.extend(_notices(state, keymaps, width))
    if state.drafts[q].skipped:
        block.extend(
            wrap_fragments(
                [(WARNING, "Skipped."), (MUTED, " Answering or adding a note un-skips it.")], width
            )
        )
    if not _short(options):
        block.blank()
    context = question.context
    left = max(20, int(width * OPTION_COLUMN_SHARE))
    # Beside only when every word of the option column fits its width (no word is broken).
    beside = (
        bool(context)
        and width >= CONTEXT_BESIDE_MIN_WIDTH
        and _longest_word(
            [RECOMMENDED, *(o.label for o in question.options)]
            + [o.description for o in question.options if o.description]
        )
        <= left - OPTION_TEXT_INDENT
    )
    if beside:
        assert context is not None
        right = max(1, width - left - _cells(SEPARATOR))
        options_block, _ = _option_rows(state, options, q, left)
        _question_note_rows(state, options, q, left, options_block)
        context_lines = _context_rows(context, right)
        rows = max(len(options_block.lines), len(context_lines))
        merged = _Block(targets=options_block.targets, focus=options_block.focus)
        merged.cursor = options_block.cursor
        for index in range(rows):
            left_line = options_block.lines[index] if index < len(options_block.lines) else ()
            right_line = context_lines[index] if index < len(context_lines) else ()
            merged.add(_beside(left_line, right_line, left))
        # A target covers only the option column.
        merged.targets = [
            Target(
                t.kind, t.key, t.first_row, t.last_row, t.start_col, min(t.end_col, left), t.command
            )
            for t in merged.targets
        ]
        block.append_block(merged)
    else:
        options_block, custom_active = _option_rows(state, options, q, width)
        _question_note_rows(state, options, q, width, options_block)
        block.append_block(options_block)
        if context and not custom_active:
            block.blank()
            block.extend(_context_rows(context, width))
    return block


def _notices(state: fs.FormState, keymaps: Keymaps, width: int) -> list[Line]:
    """Informational notices of the question tab (under its prompt)."""
    rows: list[Line] = []
    q = state.tab
    notice = state.type_notice
    if notice is not None and notice.question == q:
        rows.extend(
            wrap_fragments(
                [(ACCENT, f"Question type changed: {notice.old}-select → {notice.new}-select.")],
                width,
            )
        )
    return rows


def _question_alerts(state: fs.FormState, keymaps: Keymaps, width: int) -> list[Line]:
    """Warnings that ask for a second press on a question tab. They are shown in the sticky
    footer, so they are on screen however the body is scrolled."""
    rows: list[Line] = []
    q = state.tab
    type_keys = keymaps.main.change_question_type
    if state.pending_type_change == q and type_keys:
        rows.extend(
            wrap_fragments(
                [
                    (
                        WARNING,
                        f"Press {format_key(type_keys[0])} again to switch to single-select; "
                        "selected choices will be cleared (custom text and notes stay).",
                    )
                ],
                width,
            )
        )
    rows.extend(_dismiss_warning(state.pending_dismiss, keymaps, width))
    return rows


def _dismiss_warning(pending: fs.DismissAction | None, keymaps: Keymaps, width: int) -> list[Line]:
    if pending is None:
        return []
    if pending == "cancel":
        keys, verb = keymaps.main.cancel, "cancel"
    else:
        keys, verb = keymaps.global_.dismiss, "dismiss"
    key = format_key(keys[0]) if keys else "the same key"
    return wrap_fragments(
        [(WARNING, f"Unsaved answers will be lost. Press {key} again to {verb} the questions.")],
        width,
    )


# --------------------------------------------------------------------------------------------
# Review
# --------------------------------------------------------------------------------------------

REVIEW_LABELS = {"submit": "Submit", "cancel": "Cancel"}


def _review_body(state: fs.FormState, options: RenderOptions, width: int) -> _Block:
    block = _Block()
    block.extend(wrap_fragments([(PROMPT, "Review your answers")], width))
    block.lead = len(block.lines)
    for q, question in enumerate(state.params.questions):
        block.blank()
        block.extend(_review_question(state, q, question, width))
    block.blank()
    for index, kind in enumerate(fs.REVIEW_ACTIONS):
        active = index == state.review_cursor
        armed = state.pending_review == kind
        number = f"{index + 1}. "
        label = REVIEW_LABELS[kind]
        style = ACTIVE if active else TEXT
        if armed:
            style = WARNING
        row = len(block.lines)
        line = merge_segments(
            [
                (POINTER, POINTER_TEXT if active else NO_POINTER),
                (ACTIVE if active else MUTED, number),
                (style, label),
            ]
        )
        block.add(line)
        start = _cells(POINTER_TEXT)
        block.targets.append(
            Target(
                "review",
                ("review", state.review_tab, index),
                row,
                row + 1,
                start,
                line_width(line),
                fs.ReviewAction(kind),
            )
        )
        if active:
            block.focus = row
    block.extend(_review_slot(state, options.keymaps, width, block))
    return block


def _review_hint(kind: fs.ReviewKind, width: int) -> list[Line]:
    number = fs.REVIEW_ACTIONS.index(kind) + 1
    verb = "submit the answers" if kind == "submit" else "cancel the questions"
    text = f"Press {number} again (or click {REVIEW_LABELS[kind]} again) to {verb}."
    return wrap_fragments([(WARNING, text)], width)


def _review_dismiss_warning(
    state: fs.FormState, action: fs.DismissAction, keymaps: Keymaps, width: int
) -> list[Line]:
    if action == "cancel":
        text = "Unsaved answers will be lost. Choose Cancel again (Enter, 2 or Esc) to cancel."
        return wrap_fragments([(WARNING, text)], width)
    return _dismiss_warning(action, keymaps, width)


def _review_slot(state: fs.FormState, keymaps: Keymaps, width: int, block: _Block) -> list[Line]:
    """The rows under Review's actions for its warnings (an armed action, a dirty cancel).

    They are reserved whenever a warning can appear, so arming one never moves the actions:
    a second click lands where the first did, whichever edge the form is anchored to. Rows
    that hold a warning are alert rows.
    """
    settings = state.settings
    parts: list[tuple[list[Line], list[Line]]] = []
    if settings.double_press_review_shortcuts:
        shown = _review_hint(state.pending_review, width) if state.pending_review else []
        tallest = max(len(_review_hint(kind, width)) for kind in fs.REVIEW_ACTIONS)
        parts.append((shown, [()] * (tallest - len(shown))))
    if settings.confirm_dismiss_when_dirty and fs.is_dirty(state):
        pending = state.pending_dismiss
        shown = _review_dismiss_warning(state, pending, keymaps, width) if pending else []
        tallest = max(
            len(_review_dismiss_warning(state, action, keymaps, width))
            for action in ("cancel", "dismiss")
        )
        parts.append((shown, [()] * (tallest - len(shown))))
    elif state.pending_dismiss is not None:
        parts.append((_review_dismiss_warning(state, state.pending_dismiss, keymaps, width), []))
    if not parts:
        return []
    rows: list[Line] = [()]
    for shown, padding in parts:
        start = len(block.lines) + len(rows)
        block.alerts.extend(range(start, start + len(shown)))
        rows.extend(shown)
        rows.extend(padding)
    return rows


def _review_question(state: fs.FormState, q: int, question: Question, width: int) -> list[Line]:
    draft = state.drafts[q]
    label = _clean_line(question.label)
    rows: list[Line] = []
    if draft.skipped:
        head: list[Fragment] = [(MUTED, "– ")]
    elif draft.is_answered:
        head = [(SUCCESS, "✓ ")]
    else:
        head = [(WARNING, "? ")]
    prompt = _clean_parts(question.prompt)
    rows.extend(wrap_fragments([*head, (TEXT, label), (MUTED, ": "), (MUTED, prompt[0])], width, 2))
    for part in prompt[1:]:
        rows.extend(wrap_fragments([(TEXT, "  "), (MUTED, part)], width, 2))
    if draft.skipped:
        rows.extend(wrap_fragments([(TEXT, "  "), (MUTED, "→ (skipped)")], width, 4))
        return rows
    rows.extend(_review_answers(state, q, question, draft, width))
    if draft.note.strip() or draft.note_images:
        rows.extend(
            _paragraphs(
                [(TEXT, "  "), (NOTE, "note: ")],
                _with_images(draft.note, len(draft.note_images)),
                TEXT,
                width,
                4,
            )
        )
    for index, option in enumerate(question.options):
        note = draft.option_notes.get(option.value, "")
        images = len(draft.option_note_images.get(option.value, ()))
        if not note.strip() and not images:
            continue
        which = _clean_line(option.label)
        if index not in draft.selected:
            which += f" {NOT_SELECTED}"
        rows.extend(
            _paragraphs(
                [(TEXT, "  "), (NOTE, f"{which} note: ")],
                _with_images(note, images),
                TEXT,
                width,
                4,
            )
        )
    return rows


def _review_answers(
    state: fs.FormState, q: int, question: Question, draft: Draft, width: int
) -> list[Line]:
    rows: list[Line] = []
    for index in draft.selected:
        option = question.options[index]
        rows.extend(
            wrap_fragments(
                [(TEXT, "  "), (ACCENT, "→ "), (TEXT, _clean_line(option.label))], width, 4
            )
        )
    if draft.custom_selected and fs.has_custom_content(draft):
        rows.extend(
            _paragraphs(
                [(TEXT, "  "), (ACCENT, "→ "), (MUTED, "(wrote) ")],
                _with_images(draft.custom_text, len(draft.custom_images)),
                TEXT,
                width,
                4,
            )
        )
    if not rows:
        rows.extend(wrap_fragments([(TEXT, "  "), (WARNING, "→ (no answer)")], width, 4))
    return rows


# --------------------------------------------------------------------------------------------
# Footer hints
# --------------------------------------------------------------------------------------------


HintContext = Literal["custom", "note", "custom-images", "note-images", "review", "single", "multi"]


def _hint_context(state: fs.FormState) -> HintContext:
    if state.editor is not None:
        custom = state.editor.kind == "custom"
        if state.editor.images:
            return "custom-images" if custom else "note-images"
        return "custom" if custom else "note"
    if state.on_review:
        return "review"
    return "multi" if state.types[state.tab] == "multi" else "single"


def footer_hints(state: fs.FormState, keymaps: Keymaps) -> list[tuple[str, str]]:
    """``(keys, action)`` pairs for the current context, from the live keymaps.

    Each action shows the first key of each of its bindings (``Up/Down move``); actions whose
    bindings are all empty are left out. Fixed keys (digits, ``D``) are shown as they are.
    """
    return list(_hints(keymaps, _hint_context(state), state.background))


@functools.lru_cache(maxsize=32)
def _hints(
    keymaps: Keymaps, context: HintContext, background: bool = False
) -> tuple[tuple[str, str], ...]:
    main = keymaps.main
    dismiss = keymaps.global_.dismiss
    settings = keymaps.global_.settings
    pairs: list[tuple[str | tuple[Sequence[str], ...], str]]
    if context in ("custom", "note", "custom-images", "note-images"):
        custom = context.startswith("custom")
        ed = keymaps.editor if custom else keymaps.note_editor
        save = ed.submit if isinstance(ed, EditorKeymap) else ed.save
        # The active paste shortcut is always shown (000: "The form displays the active
        # shortcut"); without a binding the action still has a name.
        paste: tuple[Sequence[str], ...] | str = (
            (ed.paste_image,) if ed.paste_image else "Paste image"
        )
        pairs = [
            ((save,), "submit" if custom else "save note"),
            ((ed.close,), "save and close"),
            ("Tab", "complete @path"),
            ("Alt+Enter", "new line"),
            ("Ctrl+G", "$EDITOR"),
            ((ed.previous_option_when_empty, ed.next_option_when_empty), "move when empty"),
            (paste, "attach image"),
        ]
        if context.endswith("-images"):
            pairs.append(("Ctrl+Alt+D", "remove last image"))
        pairs.append(((dismiss,), "dismiss"))
    elif context == "review":
        pairs = [
            ("1", "submit"),
            ("2", "cancel"),
            ((main.confirm,), "choose"),
            ((main.previous_option, main.next_option), "move"),
            ((main.previous_tab, main.next_tab), "tabs"),
            ((settings,), "settings"),
            ((main.cancel,), "defer all" if background else "cancel"),
            ((dismiss,), "dismiss"),
        ]
    else:
        multi = context == "multi"
        pairs = [
            ("1-9", "toggle" if multi else "select"),
            ((main.toggle,), "toggle"),
            ((main.confirm,), "next" if multi else "select"),
            ((main.previous_option, main.next_option), "move"),
            ((main.previous_tab, main.next_tab), "tabs"),
            ((main.option_note,), "option note"),
            ((main.question_note,), "question note"),
            ((main.change_question_type,), "single/multi"),
            ("D", "skip"),
            ((settings,), "settings"),
            ((main.cancel,), "defer all" if background else "cancel"),
            ((dismiss,), "dismiss"),
        ]
    out: list[tuple[str, str]] = []
    for keys, action in pairs:
        if isinstance(keys, str):
            out.append((keys, action))
            continue
        shown = "/".join(format_key(binding[0]) for binding in keys if binding)
        if shown:
            out.append((shown, action))
    return tuple(out)


def _footer(state: fs.FormState, options: RenderOptions, width: int) -> list[Line]:
    alerts = [
        row
        for notice in options.config_notices
        for part in sanitize_text(notice).split("\n")
        for row in wrap_fragments([(WARNING, part)], width)
    ]
    if not state.on_review:
        alerts.extend(_question_alerts(state, options.keymaps, width))
    short = options.height is not None and options.height <= SHORT_SCREEN_ROWS
    hints: tuple[Line, ...] = ()
    if options.show_footer_hints:
        hints = _footer_lines(options.keymaps, _hint_context(state), width, state.background, short)
    if not alerts and not hints:
        return []
    return [*([] if short and not alerts else [()]), *alerts, *hints]


COMPACT_FIRST = ("select", "next", "choose", "submit", "save note", "cancel", "defer all")
"""On a short screen the one hint row starts with these actions (then the others in order)."""


@functools.lru_cache(maxsize=64)
def _footer_lines(
    keymaps: Keymaps,
    context: HintContext,
    width: int,
    background: bool = False,
    compact: bool = False,
) -> tuple[Line, ...]:
    """The hint rows; the same for every frame of one context, keymap and width. Hints wrap
    whole (a key never leaves its label); ``compact`` keeps only the hints that fit one row."""
    hints = _hints(keymaps, context, background)
    if compact:
        first = [hint for hint in hints if hint[1] in COMPACT_FIRST]
        hints = (*first, *(hint for hint in hints if hint not in first))
    rows: list[list[Fragment]] = [[]]
    used = 0
    for keys, action in hints:
        hint = [(HINT, keys), (MUTED, f" {action}")]
        size = _cells(keys) + 1 + _cells(action)
        if rows[-1] and used + 3 + size <= width:
            rows[-1].extend([(MUTED, " · "), *hint])
            used += 3 + size
        elif not rows[-1] and size <= width:
            rows[-1].extend(hint)
            used = size
        elif compact:
            continue
        elif size > width:
            rows.append([])
            rows.extend([*row] for row in wrap_fragments(hint, width, 0))
            used = width
        else:
            rows.append(hint)
            used = size
    return tuple(merge_segments(row) for row in rows if row)


# --------------------------------------------------------------------------------------------
# The frame
# --------------------------------------------------------------------------------------------


def render_form(state: fs.FormState, width: int, options: RenderOptions | None = None) -> Frame:
    """Render ``state`` at ``width`` terminal cells. Pure; see the module docstring."""
    options = options if options is not None else RenderOptions()
    width = max(10, width)
    header = _header(state, width, _short(options))
    body = (
        _review_body(state, options, width)
        if state.on_review
        else _question_body(state, options, width)
    )
    footer = _footer(state, options, width)
    frame = _Block()
    frame.append_block(header)
    frame.append_block(body)
    frame.extend(footer)
    focus = frame.focus if frame.focus is not None else len(header.lines)
    return Frame(
        lines=tuple(frame.lines),
        width=width,
        header_rows=len(header.lines),
        footer_rows=len(footer),
        targets=tuple(frame.targets),
        focus_row=focus,
        cursor=frame.cursor,
        alert_rows=tuple(frame.alerts),
        lead_rows=body.lead,
    )
