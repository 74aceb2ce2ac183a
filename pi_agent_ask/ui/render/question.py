"""A question tab's body: prompt, type hint, option rows with their notes and editors, the
custom row, the question note, and the context beside or below the options."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.transcript import merge_segments
from pi_agent_ask.form.types import Draft, Option
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui.render.editor import add_editor, with_images
from pi_agent_ask.ui.render.frame import (
    ACCENT,
    ACTIVE,
    CONTEXT,
    MARK,
    MARK_ON,
    MUTED,
    NO_POINTER,
    NOTE,
    POINTER,
    POINTER_TEXT,
    PROMPT,
    RULE,
    TEXT,
    WARNING,
    Fragment,
    Line,
    RenderOptions,
    Target,
    is_short,
)
from pi_agent_ask.ui.render.lines import (
    CACHED_TEXT_MAX,
    Block,
    cells,
    clean_line,
    clean_parts,
    line_width,
    paragraphs,
    wrap_fragments,
)

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


@functools.lru_cache(maxsize=4096)
def _beside(left_line: Line, right_line: Line, left: int) -> Line:
    """A row of the option column padded to ``left`` cells, the rule, a row of context."""
    return merge_segments([*_pad(left_line, left), (RULE, SEPARATOR), *right_line])


def _pad(line: Line, width: int) -> Line:
    missing = width - line_width(line)
    return (*line, (TEXT, " " * missing)) if missing > 0 else line


def _mark(selected: bool, multi: bool) -> tuple[str, str]:
    if multi:
        return ("[x] " if selected else "[ ] "), (MARK_ON if selected else MARK)
    return ("(•) " if selected else "( ) "), (MARK_ON if selected else MARK)


def _number_text(row: int, rows: int) -> str:
    digits = len(str(rows))
    return f"{row + 1}.".rjust(digits + 1) + " "


def _option_rows(
    state: fs.FormState, options: RenderOptions, q: int, width: int
) -> tuple[Block, bool]:
    """The option list of question ``q`` (with notes, custom text and editors under their
    rows). Returns the block and whether the custom row is the highlighted one."""
    question = state.params.questions[q]
    draft = state.drafts[q]
    live = Draft() if draft.skipped else draft
    multi = state.types[q] == "multi"
    cursor = state.cursors[q]
    editor = state.editor if state.editor is not None and state.editor.question == q else None
    count = len(question.options) + 1
    block = Block()
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
            add_editor(block, state, options, indent, width, ADD_NOTE_PLACEHOLDER, "Note: ")
        else:
            note = live.option_notes.get(option.value, "")
            images = len(live.option_note_images.get(option.value, ()))
            if note.strip() or images:
                block.extend(
                    paragraphs(
                        [(TEXT, " " * indent), (NOTE, "Note: ")],
                        with_images(note, images),
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
        add_editor(block, state, options, indent, width, CUSTOM_PLACEHOLDER, "> ", ACCENT)
    elif fs.has_custom_content(live):
        style = TEXT if custom_on else MUTED
        block.extend(
            paragraphs(
                [(TEXT, " " * indent)],
                with_images(live.custom_text, len(live.custom_images)),
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
    label = clean_line(option.label)
    description = clean_line(option.description) if option.description else None
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
    state: fs.FormState, options: RenderOptions, q: int, width: int, block: Block
) -> None:
    draft = state.drafts[q]
    editor = state.editor
    if editor is not None and editor.question == q and editor.kind == "note":
        block.blank()
        add_editor(block, state, options, 2, width, ADD_NOTE_PLACEHOLDER, "Question note: ")
        return
    if draft.note.strip() or draft.note_images:
        block.blank()
        block.extend(
            paragraphs(
                [(TEXT, "  "), (NOTE, "Question note: ")],
                with_images(draft.note, len(draft.note_images)),
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
    return cells(match.group(1)) if match else 0


def _context_rows(context: str, width: int) -> list[Line]:
    rows: list[Line] = []
    for part in clean_parts(context):
        indent = _hanging_indent(part)
        rows.extend(wrap_fragments([(CONTEXT, part)], width, indent if indent < width // 2 else 0))
    return rows


@functools.lru_cache(maxsize=4096)
def _remembered_longest_word(text: str) -> int:
    return max((cells(word) for word in text.split()), default=0)


def _longest_word(texts: Iterable[str]) -> int:
    return max(
        (
            _remembered_longest_word(text)
            if len(text) <= CACHED_TEXT_MAX
            else max((cells(word) for word in text.split()), default=0)
            for text in texts
        ),
        default=0,
    )


def _type_hint(state: fs.FormState, q: int) -> list[Fragment]:
    multi = state.types[q] == "multi"
    return [(MUTED, "Select any number of options." if multi else "Select one option.")]


def question_body(state: fs.FormState, options: RenderOptions, width: int) -> Block:
    q = state.tab
    question = state.params.questions[q]
    keymaps = options.keymaps
    block = Block()
    block.extend(paragraphs([], question.prompt, PROMPT, width, 0))
    block.lead = len(block.lines)
    block.extend(wrap_fragments(_type_hint(state, q), width))
    block.extend(_notices(state, keymaps, width))
    if state.drafts[q].skipped:
        block.extend(
            wrap_fragments(
                [(WARNING, "Skipped."), (MUTED, " Answering or adding a note un-skips it.")], width
            )
        )
    if not is_short(options):
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
        right = max(1, width - left - cells(SEPARATOR))
        options_block, _ = _option_rows(state, options, q, left)
        _question_note_rows(state, options, q, left, options_block)
        context_lines = _context_rows(context, right)
        rows = max(len(options_block.lines), len(context_lines))
        # Everything the option column says of its rows, but its lines: those are merged.
        merged = Block(
            targets=options_block.targets,
            focus=options_block.focus,
            cursor=options_block.cursor,
            alerts=options_block.alerts,
            editor_room=options_block.editor_room,
        )
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
