"""The frame's header: the title, the progress line and the tab bar (a window of tabs around
the current one when they do not fit)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import sanitize_line
from pi_agent_ask.form.transcript import merge_segments
from pi_agent_ask.ui.render.frame import (
    MUTED,
    SUCCESS,
    TAB,
    TAB_ACTIVE,
    TEXT,
    TITLE,
    Fragment,
    Target,
)
from pi_agent_ask.ui.render.lines import (
    CACHED_TEXT_MAX,
    Block,
    cells,
    clean_line,
    line_width,
    truncate,
    wrap_fragments,
)

TAB_LABEL_MAX = 24
"""Cells of a tab label before it is truncated with an ellipsis."""
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
    text = f" {truncate(sanitize_line(label), TAB_LABEL_MAX)} "
    return text, cells(text)


def _tab_bar(state: fs.FormState, width: int, all_answered: bool) -> Block:
    """One row of tabs. When they do not fit, a window of tabs around the current one is shown,
    with ``‹ +k`` / ``+k ›`` counting the hidden tabs on each side. Only the tabs shown are
    built: the cost of a frame does not grow with the tabs out of view."""
    questions = state.params.questions
    labels = [_tab_label(question.label) for question in questions]
    review_text = f" {'✓' if all_answered else '→'} Review "
    widths = [1 + TAB_MARK_CELLS + cells for _, cells in labels]
    widths.append(cells(review_text))
    total = sum(widths) + len(widths) - 1
    first, last = 0, len(widths)
    if total > width:
        first, last = _tab_window(widths, state.tab, width)
    fragments: list[Fragment] = []
    targets: list[Target] = []
    col = 0
    review = len(questions)

    def select(index: int) -> fs.Command:
        return fs.SelectTab(state.review_tab if index == review else index)

    # The counts of hidden tabs read as arrows: a click on one shows the nearest hidden tab.
    if first > 0:
        more = f"‹ +{first} "
        fragments.append((MUTED, more))
        targets.append(
            Target("tab", ("tab", first - 1, 1), 0, 1, 0, cells(more), select(first - 1))
        )
        col += cells(more)
    for index in range(first, last):
        if index > first:
            fragments.append((TEXT, " "))
            col += 1
        active = index == state.tab
        style = TAB_ACTIVE if active else TAB
        if index == review:
            fragments.append((style, review_text))
        else:
            mark, mark_style = _tab_mark(state, index)
            fragments.extend(
                [(style, " "), (style if active else mark_style, mark), (style, labels[index][0])]
            )
        span = (col, col + widths[index])
        targets.append(Target("tab", ("tab", index, 0), 0, 1, *span, select(index)))
        col += widths[index]
    if last < len(widths):
        more = f" +{len(widths) - last} ›"
        fragments.append((MUTED, more))
        targets.append(Target("tab", ("tab", last, 1), 0, 1, col, col + cells(more), select(last)))
    return Block(lines=[merge_segments(fragments)], targets=targets)


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


def header_block(state: fs.FormState, width: int, short: bool = False) -> Block:
    block = Block()
    title = state.params.title
    answered = sum(1 for draft in state.drafts if draft.is_answered)
    progress = progress_text(state, answered)
    if title:
        rows = wrap_fragments([(TITLE, clean_line(title))], width)
        if progress and line_width(rows[-1]) + 3 + cells(progress) <= width:
            rows[-1] = merge_segments([*rows[-1], (MUTED, f" · {progress}")])
            progress = None
        block.extend(rows)
    tabs = _tab_bar(state, width, answered == len(state.drafts))
    if progress and line_width(tabs.lines[0]) + 3 + cells(progress) <= width:
        tabs.lines[0] = merge_segments([*tabs.lines[0], (MUTED, f"   {progress}")])
    elif progress and not short:
        # The tabs fill their row (many questions): the count of what is left is the one
        # overview of the whole form, so it takes a row of its own above them.
        block.extend(wrap_fragments([(MUTED, progress)], width))
    block.append_block(tabs)
    if not short:
        block.blank()
    return block
