"""The frame's sticky footer: settings problems, the warnings that ask for a second press, and
the key hints of the current context, from the live keymaps."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import sanitize_line, sanitize_text
from pi_agent_ask.form.snapshot import numbered_rows
from pi_agent_ask.form.transcript import merge_segments
from pi_agent_ask.persistence.keys import format_key
from pi_agent_ask.persistence.settings import EditorKeymap, Keymaps
from pi_agent_ask.ui.render.frame import (
    HINT,
    MUTED,
    SHORT_SCREEN_ROWS,
    WARNING,
    Fragment,
    Line,
    RenderOptions,
)
from pi_agent_ask.ui.render.lines import cells, wrap_fragments


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
    rows.extend(dismiss_warning(state.pending_dismiss, keymaps, width))
    return rows


def dismiss_warning(pending: fs.DismissAction | None, keymaps: Keymaps, width: int) -> list[Line]:
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


def digit_keys(rows: int) -> str:
    """The number keys of a question with ``rows`` numbered rows, as a hint shows them:
    ``1-4`` (two digits typed in a row from 10 on, ``1-12``)."""
    return "1" if rows == 1 else f"1-{rows}"


def held_digit_hints(
    digit: int, rows: int, confirm: str | None, cancel: str | None
) -> tuple[tuple[str, str], ...]:
    """What the next key does with ``digit``, a first digit waiting for a second on a question
    of ``rows`` numbered rows: ``1 typed · 0-2 rows 10-12 · Enter row 1 · Esc clear``, with
    ``confirm`` and ``cancel`` the names of the keys that pick the digit's own row and clear it
    (``None``: no such key). These hints stand for the others while it waits (any other key
    lets the digit act first). The web page shows them too (``hints_text``)."""
    first, last = digit * 10, min(rows, digit * 10 + 9)
    seconds = "0" if last == first else f"0-{last - first}"
    pairs: list[tuple[str, str]] = [
        (str(digit), "typed"),
        (seconds, f"row {first}" if last == first else f"rows {first}-{last}"),
    ]
    if confirm is not None:
        pairs.append((confirm, f"row {digit}"))
    if cancel is not None:
        pairs.append((cancel, "clear"))
    return tuple(pairs)


HINT_SEPARATOR = " · "
"""Between two key hints on a row, on the terminal and on the web page (``hints_text``)."""


def hints_text(hints: Sequence[tuple[str, str]]) -> str:
    """``(keys, action)`` hints as one line of text, as the footer shows them
    (``Enter row 1 · Esc clear``): for the web page, which wraps its own lines."""
    return HINT_SEPARATOR.join(f"{keys} {action}" for keys, action in hints)


def no_such_row(digit: int, rows: int) -> str:
    """What the form says of a number key past the question's last numbered row."""
    return f"No row {digit}: this question's rows are {digit_keys(rows)}."


def footer_hints(state: fs.FormState, keymaps: Keymaps) -> list[tuple[str, str]]:
    """``(keys, action)`` pairs for the current context, from the live keymaps.

    Each action shows the first key of each of its bindings (``Up/Down move``); actions whose
    bindings are all empty are left out. Fixed keys (digits, ``D``) are shown as they are:
    the digits as far as the question's numbered rows go (``1-4 select``).
    """
    return list(_hints(keymaps, _hint_context(state), state.background, _hint_rows(state)))


def _hint_rows(state: fs.FormState) -> int:
    """The numbered rows the hints name (0 where no hint names them: fewer cached frames)."""
    return numbered_rows(state) if state.editor is None else 0


@functools.lru_cache(maxsize=32)
def _hints(
    keymaps: Keymaps, context: HintContext, background: bool = False, numbered: int = 0
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
            *([(digit_keys(numbered), "toggle" if multi else "select")] if numbered else []),
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


def footer_rows(
    state: fs.FormState, options: RenderOptions, width: int
) -> tuple[list[Line], int | None]:
    """The rows under the form's body (a blank row, alerts, key hints), and which of them
    starts with a held digit's own hint (``1 typed``, its first cell the digit), if one is
    shown."""
    alerts = [
        row
        for notice in options.config_notices
        for part in sanitize_text(notice).split("\n")
        for row in wrap_fragments([(WARNING, part)], width)
    ]
    if options.notice and state.editor is None:  # an open editor shows it under its text
        alerts.extend(wrap_fragments([(WARNING, sanitize_line(options.notice))], width))
    if not state.on_review:
        alerts.extend(_question_alerts(state, options.keymaps, width))
    short = options.height is not None and options.height <= SHORT_SCREEN_ROWS
    hints: tuple[Line, ...] = ()
    held_shown = False
    context = _hint_context(state)
    if options.show_footer_hints:
        rows = _hint_rows(state)
        hints = _footer_lines(options.keymaps, context, width, state.background, short, rows)
    if options.held_digit is not None and context in ("single", "multi"):
        # In the rows the hints take anyway, so nothing on screen moves while it waits. With
        # the hints turned off these rows are its only sign (the surface puts the cursor on
        # its digit, where prompt_toolkit draws the held key, not on the ``›`` marker): they
        # show while it waits, as a mode shows its keys, and go with it.
        main = options.keymaps.main
        held_hints = held_digit_hints(
            options.held_digit,
            _hint_rows(state),
            format_key(main.confirm[0]) if main.confirm else None,
            format_key(main.cancel[0]) if main.cancel else None,
        )
        held = _wrapped(held_hints, width, short)
        hints = (*held, *[()] * (len(hints) - len(held)))
        held_shown = bool(held)
    if not alerts and not hints:
        return [], None
    lines: list[Line] = [*([] if short and not alerts else [()]), *alerts, *hints]
    return lines, (len(lines) - len(hints) if held_shown else None)


COMPACT_FIRST = ("select", "next", "choose", "submit", "save note", "cancel", "defer all")
"""On a short screen the one hint row starts with these actions (then the others in order)."""


@functools.lru_cache(maxsize=64)
def _footer_lines(
    keymaps: Keymaps,
    context: HintContext,
    width: int,
    background: bool = False,
    compact: bool = False,
    numbered: int = 0,
) -> tuple[Line, ...]:
    """The hint rows; the same for every frame of one context, keymap, width and number of
    numbered rows. Hints wrap whole (a key never leaves its label); ``compact`` keeps only
    the hints that fit one row."""
    hints = _hints(keymaps, context, background, numbered)
    if compact:
        first = [hint for hint in hints if hint[1] in COMPACT_FIRST]
        hints = (*first, *(hint for hint in hints if hint not in first))
    return _wrapped(hints, width, compact)


def _wrapped(
    hints: Sequence[tuple[str, str]], width: int, compact: bool = False
) -> tuple[Line, ...]:
    """``(keys, action)`` hints in rows of ``width``, each whole on its row; ``compact``: only
    those that fit one row."""
    rows: list[list[Fragment]] = [[]]
    used = 0
    for keys, action in hints:
        hint = [(HINT, keys), (MUTED, f" {action}")]
        size = cells(keys) + 1 + cells(action)
        if rows[-1] and used + len(HINT_SEPARATOR) + size <= width:
            rows[-1].extend([(MUTED, HINT_SEPARATOR), *hint])
            used += len(HINT_SEPARATOR) + size
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
