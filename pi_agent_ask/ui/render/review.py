"""The Review tab's body: every question with its answers and notes, the Submit and Cancel
actions, and the rows reserved under them for their warnings."""

from __future__ import annotations

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.transcript import merge_segments
from pi_agent_ask.form.types import Draft, Question
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui.render.editor import with_images
from pi_agent_ask.ui.render.footer import dismiss_warning
from pi_agent_ask.ui.render.frame import (
    ACCENT,
    ACTIVE,
    MUTED,
    NO_POINTER,
    NOTE,
    POINTER,
    POINTER_TEXT,
    PROMPT,
    SUCCESS,
    TEXT,
    WARNING,
    Fragment,
    Line,
    RenderOptions,
    Target,
)
from pi_agent_ask.ui.render.lines import (
    Block,
    cells,
    clean_line,
    clean_parts,
    line_width,
    paragraphs,
    wrap_fragments,
)

NOT_SELECTED = "(not selected)"

REVIEW_LABELS = {"submit": "Submit", "cancel": "Cancel"}


def review_body(state: fs.FormState, options: RenderOptions, width: int) -> Block:
    block = Block()
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
        start = cells(POINTER_TEXT)
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
    return dismiss_warning(action, keymaps, width)


def _review_slot(state: fs.FormState, keymaps: Keymaps, width: int, block: Block) -> list[Line]:
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
    label = clean_line(question.label)
    rows: list[Line] = []
    if draft.skipped:
        head: list[Fragment] = [(MUTED, "– ")]
    elif draft.is_answered:
        head = [(SUCCESS, "✓ ")]
    else:
        head = [(WARNING, "? ")]
    prompt = clean_parts(question.prompt)
    rows.extend(wrap_fragments([*head, (TEXT, label), (MUTED, ": "), (MUTED, prompt[0])], width, 2))
    for part in prompt[1:]:
        rows.extend(wrap_fragments([(TEXT, "  "), (MUTED, part)], width, 2))
    if draft.skipped:
        rows.extend(wrap_fragments([(TEXT, "  "), (MUTED, "→ (skipped)")], width, 4))
        return rows
    rows.extend(_review_answers(state, q, question, draft, width))
    if draft.note.strip() or draft.note_images:
        rows.extend(
            paragraphs(
                [(TEXT, "  "), (NOTE, "note: ")],
                with_images(draft.note, len(draft.note_images)),
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
        which = clean_line(option.label)
        if index not in draft.selected:
            which += f" {NOT_SELECTED}"
        rows.extend(
            paragraphs(
                [(TEXT, "  "), (NOTE, f"{which} note: ")],
                with_images(note, images),
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
                [(TEXT, "  "), (ACCENT, "→ "), (TEXT, clean_line(option.label))], width, 4
            )
        )
    if draft.custom_selected and fs.has_custom_content(draft):
        rows.extend(
            paragraphs(
                [(TEXT, "  "), (ACCENT, "→ "), (MUTED, "(wrote) ")],
                with_images(draft.custom_text, len(draft.custom_images)),
                TEXT,
                width,
                4,
            )
        )
    if not rows:
        rows.extend(wrap_fragments([(TEXT, "  "), (WARNING, "→ (no answer)")], width, 4))
    return rows
