"""The transcript's rows and cards: what the ask tools show in the terminal, as styled lines.

``Line = tuple[Segment, ...]`` with ``Segment = (style, text)``; the UI maps styles to colours.
Transcript text is neutralised: control characters never reach the terminal, and line breaks
in agent or user text become separate lines. Cards never show request ids, question ids or
message types. Pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from wcwidth import wcwidth

from pi_agent_ask.form.result import AnswerResult, AskResult, BackgroundOutcome
from pi_agent_ask.form.sanitize import sanitize_text
from pi_agent_ask.form.text import (
    answer_text,
    invalid_text,
    noted_values,
    option_index,
    option_label,
    options_of,
    presentation_note,
    with_marker,
)
from pi_agent_ask.form.types import AskParams

__all__ = [
    "CALL_LABELS_LIMIT",
    "Line",
    "Segment",
    "Style",
    "background_card",
    "call_rows",
    "cell_width",
    "drawn",
    "drawn_line",
    "drawn_text",
    "line_text",
    "merge_segments",
    "receipt_row",
    "result_rows",
    "wait_confirmation",
    "wrap_line",
]

Style = Literal["text", "accent", "warning", "muted", "success", "error"]
Segment = tuple[Style, str]
Line = tuple[Segment, ...]

_S = TypeVar("_S", bound=str)
"""A style name. The line helpers (``line_text``, ``merge_segments``, ``wrap_line``) work over
any style names, not only ``Style``: the UI passes its own (prompt_toolkit class names)."""


def drawn_text(text: str, *, keep_newlines: bool = True) -> str:
    """Text from elsewhere (an agent's, a journal's, a notice) as the terminal is given it:
    neutralised (escape sequences, controls, invisible formatting: ``sanitize_text``) and
    drawn (:func:`drawn`). Newlines are kept for the caller to split into lines, or (without
    ``keep_newlines``) the text is one line."""
    return drawn(sanitize_text(text, keep_newlines=keep_newlines))


def _split(text: str) -> list[str]:
    return drawn_text(text).split("\n")


def line_text(line: Iterable[tuple[str, str]]) -> str:
    """The plain text of a styled line."""
    return "".join(text for _, text in line)


def merge_segments(segments: Iterable[tuple[_S, str]]) -> tuple[tuple[_S, str], ...]:
    """Drop empty segments and join neighbours of the same style."""
    out: list[tuple[_S, str]] = []
    for style, text in segments:
        if not text:
            continue
        if out and out[-1][0] == style:
            out[-1] = (style, out[-1][1] + text)
        else:
            out.append((style, text))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _char_width(char: str) -> int:
    # prompt_toolkit's rule, which decides where it puts every character on the screen: each
    # character on its own, as ``wcwidth.wcwidth`` says (a control character counts 0).
    width: int = wcwidth(char)
    return max(0, width)


def cell_width(text: str) -> int:
    """The terminal cells ``text`` occupies, as prompt_toolkit counts them (wide East Asian
    characters and emoji two, combining marks and the joiners of emoji nothing), so a layout
    made with it is where prompt_toolkit draws. Drawn through :func:`drawn`, a real terminal
    agrees. ASCII text (one cell per character) takes a fast path."""
    if text.isascii():
        return len(text)
    return sum(map(_char_width, text))


# What joins or restyles emoji: ZERO WIDTH JOINER, VARIATION SELECTOR-16 (emoji style) and the
# five skin-tone modifiers. prompt_toolkit counts each as nothing, terminals do not agree:
# tmux 3.3 draws a skin tone as a swatch of two cells of its own and a joined sequence as one
# picture of two cells; kitty, WezTerm or iTerm2 draw an emoji-style ``❤️`` two cells wide.
_JOINERS = re.compile("[\u200d\ufe0f\U0001f3fb-\U0001f3ff]")


def drawn(text: str) -> str:
    """``text`` as the terminal is given it: without the characters that join or restyle emoji
    (``👩‍💻`` is drawn as ``👩💻``, ``👍🏽`` as ``👍``, ``❤️`` as ``❤``), whose width terminals
    draw differently from :func:`cell_width`. Each part left is drawn as wide as it counts, in
    every terminal, and ``cell_width(drawn(text)) == cell_width(text)``: a layout made on the
    text holds on the screen. Only the screen loses them; answers and drafts keep them."""
    return text if text.isascii() else _JOINERS.sub("", text)


def drawn_line(line: Iterable[tuple[_S, str]]) -> tuple[tuple[_S, str], ...]:
    """A styled line's segments through :func:`drawn`."""
    return tuple((style, drawn(text)) for style, text in line)


def _break_units(piece: str) -> list[str]:
    """``piece`` (a word, or a run of blanks) as the units a line may break between: itself,
    except that wide (CJK) characters, written without spaces, each stand alone (with the
    zero-width marks that follow them)."""
    if piece.isascii():
        return [piece]
    units: list[str] = []
    narrow = ""
    for char in piece:
        width = _char_width(char)
        if width == 2:
            if narrow:
                units.append(narrow)
                narrow = ""
            units.append(char)
        elif width == 0 and units and not narrow:
            units[-1] += char
        else:
            narrow += char
    if narrow:
        units.append(narrow)
    return units


def wrap_line(
    line: Iterable[tuple[_S, str]], width: int, indent: int = 0
) -> list[tuple[tuple[_S | Literal["text"], str], ...]]:
    """Word-wrap a styled line to ``width`` cells; continuation lines start with ``indent``
    spaces (styled ``"text"``). Words longer than a line are split. Every returned line fits
    ``width``, except that a character wider than ``width`` (a wide character at width 1) gets a
    line of its own."""
    width = max(1, width)
    indent = max(0, min(indent, width - 1))
    tokens = [
        (style, unit)
        for style, text in line
        for piece in re.findall(r"\s+|\S+", text)
        for unit in _break_units(piece)
    ]
    lines: list[tuple[tuple[_S | Literal["text"], str], ...]] = []
    current: list[tuple[_S | Literal["text"], str]] = []
    used = 0
    start = 0  # cells at the start of the current line that are indentation

    def flush() -> None:
        nonlocal current, used, start
        while current and current[-1][1].isspace() and used > start:
            used -= cell_width(current.pop()[1])
        lines.append(merge_segments(current))
        current = [("text", " " * indent)] if indent else []
        used = start = indent

    for style, piece in tokens:
        if piece.isspace():
            if used == start and lines:
                continue  # no leading blanks on continuation lines
            if used + cell_width(piece) > width:
                flush()
                continue
            current.append((style, piece))
            used += cell_width(piece)
            continue
        rest = piece
        while rest:
            need = cell_width(rest)
            if used + need <= width:
                current.append((style, rest))
                used += need
                break
            if used > start:
                flush()
                continue
            # A word wider than a whole line: take what fits (at least one character).
            if used and used + _char_width(rest[0]) > width:
                # Not even its first character fits after the indentation: drop the indent.
                current, used, start = [], 0, 0
            taken, taken_width = "", 0
            for char in rest:
                if taken and used + taken_width + _char_width(char) > width:
                    break
                taken += char
                taken_width += _char_width(char)
            current.append((style, taken))
            used += taken_width
            rest = rest[len(taken) :]
            if rest:
                flush()
    lines.append(merge_segments(current))
    return lines


def _wrap_all(lines: Iterable[tuple[Line, int]], width: int | None) -> list[Line]:
    out: list[Line] = []
    for line, indent in lines:
        if width is None:
            out.append(line)
        else:
            out.extend(wrap_line(line, width, indent))
    return out


def _text_rows(
    prefix: Sequence[Segment], text: str, style: Style, indent: str
) -> list[tuple[Line, int]]:
    """``prefix`` + the first line of ``text``; further lines of ``text`` indented."""
    parts = _split(text)
    rows = [(merge_segments([*prefix, (style, parts[0])]), len(indent) + 2)]
    rows.extend(
        (merge_segments([("text", indent + "  "), (style, part)]), len(indent) + 2)
        for part in parts[1:]
    )
    return rows


def _truncate(text: str, limit: int) -> str:
    if cell_width(text) <= limit:
        return text
    out, used = "", 0
    for char in text:
        if used + _char_width(char) > limit - 1:
            break
        out += char
        used += _char_width(char)
    return out + "…"


CALL_LABELS_LIMIT = 60
"""Cells of the comma-joined question labels shown on an ``ask_user`` call row."""


def call_rows(arguments: Mapping[str, Any], *, width: int | None = None) -> list[Line]:
    """The transcript row of an ``ask_user`` call, from its raw arguments:
    ``ask_user <n> question(s) (<labels>)`` with ``Q<n>`` for missing labels, truncated."""
    raw = arguments.get("questions") if isinstance(arguments, Mapping) else None
    questions = raw if isinstance(raw, list) else []
    labels = []
    for number, question in enumerate(questions, start=1):
        label = question.get("label") if isinstance(question, Mapping) else None
        text = label.strip() if isinstance(label, str) else ""
        labels.append(" ".join(_split(text)) if text else f"Q{number}")
    segments: list[Segment] = [("accent", "ask_user"), ("text", f" {len(questions)} question(s)")]
    if labels:
        segments.append(("muted", f" ({_truncate(', '.join(labels), CALL_LABELS_LIMIT)})"))
    line = merge_segments(segments)
    if width is not None and cell_width(line_text(line)) > width:
        return wrap_line(line, width, 2)
    return [line]


def result_rows(
    result: AskResult, *, params: AskParams | None = None, width: int | None = None
) -> list[Line]:
    """The transcript rows of a foreground ``ask_user`` result."""
    if result.issues is not None:
        rows: list[tuple[Line, int]] = [(merge_segments([("warning", "Invalid tool payload")]), 2)]
        for issue in result.issues:
            rows.extend(
                _text_rows(
                    [("muted", f"  - {drawn_text(issue.path)}: ")], issue.message, "muted", "  "
                )
            )
        return _wrap_all(rows, width)
    if result.cancelled:
        return _wrap_all([(merge_segments([("warning", "Cancelled")]), 2)], width)
    rows = []
    index = option_index(params)
    skipped = set(result.skipped_question_ids)
    for meta in result.questions:
        label = " ".join(_split(meta.label))
        if meta.id in skipped:
            rows.append(
                (
                    merge_segments(
                        [("muted", "- "), ("text", f"{label}: "), ("muted", "(skipped)")]
                    ),
                    2,
                )
            )
            continue
        answer = result.answers.get(meta.id)
        if answer is not None and answer.has_answer:
            wrote: list[Segment] = [] if answer.indices else [("muted", "(wrote) ")]
            rows.extend(
                _text_rows(
                    [("success", "✓ "), ("text", f"{label}: "), *wrote],
                    answer_text(answer),
                    "text",
                    "",
                )
            )
        else:
            rows.append(
                (
                    merge_segments(
                        [("warning", "? "), ("text", f"{label}: "), ("muted", "(no answer)")]
                    ),
                    2,
                )
            )
        if answer is not None:
            rows.extend(_note_rows(answer, options_of(index, meta.id), "  "))
    note = presentation_note(result)
    if note:
        rows.append((merge_segments([("muted", f"  {note}")]), 2))
    if not rows:
        rows.append((merge_segments([("success", "Submitted")]), 2))
    return _wrap_all(rows, width)


def _note_rows(
    answer: AnswerResult,
    options: Mapping[str, str] | None,
    indent: str,
    *,
    selected_notes: bool = True,
    question_note: bool = True,
) -> list[tuple[Line, int]]:
    """Question note and option notes of an answer, as ``note:`` rows. With
    ``selected_notes=False`` notes of selected options are left to the caller, with
    ``question_note=False`` the question's own note."""
    rows: list[tuple[Line, int]] = []
    if question_note and (answer.note is not None or answer.note_images):
        text = with_marker(answer.note or "", len(answer.note_images))
        rows.extend(_text_rows([("muted", f"{indent}note: ")], text, "text", indent))
    for value in noted_values(answer, options):
        label, selected = option_label(answer, value, options)
        if selected and not selected_notes:
            continue
        which = " ".join(_split(label)) + ("" if selected else " (not selected)")
        text = with_marker(
            answer.option_notes.get(value, ""), len(answer.option_note_images.get(value, ()))
        )
        rows.extend(_text_rows([("muted", f"{indent}{which} note: ")], text, "text", indent))
    return rows


def receipt_row(details: Mapping[str, Any]) -> Line:
    """The transcript row of a queued receipt: ``<k> question(s) queued · <n> form(s) pending``."""
    question_ids = details.get("questionIds")
    count = len(question_ids) if isinstance(question_ids, list) else 0
    pending = details.get("pendingRequests", 0)
    return merge_segments(
        [
            ("accent", f"{count} question(s) queued"),
            ("muted", f" · {pending if isinstance(pending, int) else 0} form(s) pending"),
        ]
    )


def background_card(
    outcome: BackgroundOutcome, *, width: int, params: AskParams | None = None
) -> list[Line]:
    """The transcript card of a background answer, in the form's Review style: accent rules,
    status (with the form title), each prompt with ``→`` answer lines and saved notes. No ids,
    no message type; every line fits ``width``."""
    width = max(1, width)
    rule: Line = (("accent", "─" * width),)
    result = outcome.result
    rows: list[tuple[Line, int]] = []
    title: list[Segment] = []
    if result is not None and result.title:
        title = [("text", " ".join(_split(result.title))), ("muted", " · ")]
    if result is None or result.issues is not None:
        error = outcome.error
        if error is None and result is not None:
            error = invalid_text(result.issues or ())
        rows.append((merge_segments([*title, ("error", "! Question form failed")]), 2))
        for part in _split(error or "No form result available."):
            rows.append((merge_segments([("text", part)]), 0))
    elif result.cancelled:
        rows.append((merge_segments([*title, ("warning", "? Questions cancelled")]), 2))
        rows.append((merge_segments([("muted", "No approval given.")]), 0))
    else:
        rows.append((merge_segments([*title, ("success", "✓ Answers received")]), 2))
        rows.extend(_card_body(result, params))
    return [rule, *_wrap_all(rows, width), rule]


def _card_body(result: AskResult, params: AskParams | None) -> list[tuple[Line, int]]:
    index = option_index(params)
    rows: list[tuple[Line, int]] = []
    skipped = set(result.skipped_question_ids)
    for meta in result.questions:
        rows.append(((), 0))
        rows.extend((merge_segments([("text", part)]), 0) for part in _split(meta.prompt))
        if meta.id in skipped:
            rows.append((merge_segments([("muted", "→ skipped")]), 2))
            continue
        answer = result.answers.get(meta.id)
        if answer is not None and (answer.note is not None or answer.note_images):
            # The question's note sits under its prompt, before the answer lines: indented
            # under the last answer it read as that answer's note.
            text = with_marker(answer.note or "", len(answer.note_images))
            rows.extend(_text_rows([("muted", "Question note: ")], text, "text", "  "))
        if answer is None or not answer.has_answer:
            rows.append((merge_segments([("warning", "→ unanswered")]), 2))
            if answer is not None:
                rows.extend(
                    _note_rows(answer, options_of(index, meta.id), "  ", question_note=False)
                )
            continue
        for value, label in zip(answer.selected_values, answer.selected_labels, strict=True):
            rows.extend(_text_rows([("accent", "→ ")], label, "text", ""))
            note = answer.option_notes.get(value, "")
            images = len(answer.option_note_images.get(value, ()))
            if note or images:
                text = with_marker(note, images)
                rows.extend(_text_rows([("muted", "  note: ")], text, "text", "  "))
        if answer.custom_text is not None or answer.custom_images:
            text = with_marker(answer.custom_text or "", len(answer.custom_images))
            rows.extend(_text_rows([("accent", "→ ")], text, "text", ""))
        rows.extend(
            _note_rows(
                answer,
                options_of(index, meta.id),
                "  ",
                selected_notes=False,
                question_note=False,
            )
        )
    presented = presentation_note(result)
    if presented:
        rows.append(((), 0))
        rows.append((merge_segments([("muted", presented)]), 0))
    return rows


def wait_confirmation(details: Mapping[str, Any]) -> Line:
    """The short transcript row of a ``wait_for_answers`` result (the full answer cards stay at
    the calls that asked)."""
    results = details.get("results")
    count = len(results) if isinstance(results, list) else 0
    forms = "1 form" if count == 1 else f"{count} forms"
    if details.get("status") == "deferred":
        pending_ids = details.get("pendingRequestIds")
        pending = len(pending_ids) if isinstance(pending_ids, list) else 0
        why = {"user_message": "user message", "mode_changed": "background-only mode"}.get(
            str(details.get("reason")), "panel hidden"
        )
        segments: list[Segment] = [
            ("warning", f"Wait released ({why})"),
            ("muted", f" · {pending} form{'' if pending == 1 else 's'} still pending"),
        ]
        if count:
            segments.append(("muted", f" · received answers for {forms}"))
        return merge_segments(segments)
    if count == 0:
        return merge_segments([("muted", "No outstanding answers")])
    return merge_segments([("success", f"Received answers for {forms}")])
