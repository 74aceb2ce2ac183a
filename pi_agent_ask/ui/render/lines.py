"""Rows of styled text: cell widths, neutralised agent strings (remembered by value), word
wrapping, and :class:`Block`, the rows of a frame part under construction with their targets."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import attrs

from pi_agent_ask.form.sanitize import sanitize_line, sanitize_text
from pi_agent_ask.form.transcript import cell_width, merge_segments, wrap_line
from pi_agent_ask.ui.render.frame import TEXT, Fragment, Line, Target


def line_width(line: Line) -> int:
    total = 0
    for _, text in line:
        total += len(text) if text.isascii() else cells(text)
    return total


def cells(text: str) -> int:
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


def clean_line(text: str) -> str:
    """``sanitize_line(text)``, remembered for short strings."""
    return _remembered_line(text) if len(text) <= CACHED_TEXT_MAX else sanitize_line(text)


def clean_parts(text: str) -> tuple[str, ...]:
    """``sanitize_text(text)`` split at its line breaks, remembered for short strings."""
    if len(text) <= CACHED_TEXT_MAX:
        return _remembered_parts(text)
    return tuple(sanitize_text(text).split("\n"))


@attrs.define(repr=False)
class Block:
    """Rows under construction, with targets relative to the block's first row."""

    lines: list[Line] = attrs.field(factory=list)
    targets: list[Target] = attrs.field(factory=list)
    focus: int | None = None
    cursor: tuple[int, int] | None = None
    alerts: list[int] = attrs.field(factory=list)
    lead: int = 0
    """Rows at the block's start that stay on screen with the header when there is room (the
    question's prompt)."""
    editor_room: int | None = None
    """The cells a row of the open editor's text is wrapped to (``None``: no editor open)."""

    def add(self, line: Line) -> None:
        self.lines.append(line)

    def extend(self, lines: Iterable[Line]) -> None:
        self.lines.extend(lines)

    def blank(self) -> None:
        self.lines.append(())

    def append_block(self, other: Block) -> None:
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
        if other.editor_room is not None:
            self.editor_room = other.editor_room

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


def paragraphs(
    prefix: Sequence[Fragment], text: str, style: str, width: int, indent: int
) -> list[Line]:
    """``prefix`` + sanitised ``text`` wrapped to ``width``; the text's own line breaks start
    new rows indented by ``indent`` cells."""
    parts = clean_parts(text)
    rows = wrap_fragments([*prefix, (style, parts[0])], width, indent)
    for part in parts[1:]:
        rows.extend(wrap_fragments([(TEXT, " " * indent), (style, part)], width, indent))
    return rows


def truncate(text: str, limit: int) -> str:
    if cells(text) <= limit:
        return text
    out, used = "", 0
    for char in text:
        w = cells(char)
        if used + w > limit - 1:
            break
        out += char
        used += w
    return out + "…"
