"""What the page shows, made from the board's snapshots, and what the page sends, checked.

Pure functions, no I/O. The board decides what is shown; these turn its snapshots into values
the templates render (every piece of agent text passed through ``sanitize_text``, and the
templates escape it again: text, never markup) and turn the page's JSON into the form's own
values (:class:`~pi_agent_ask.form.types.Draft`), refusing anything malformed with a sentence.

The page's draft of one question (JSON)::

    {"selected": [0, 2], "custom": "text", "customSelected": true, "note": "text",
     "optionNotes": {"value": "text"}, "skipped": false}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from pi_agent_ask.actors.form import Ended
from pi_agent_ask.desk.board import Board, Ending, Shown, form_name
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import sanitize_line, sanitize_text
from pi_agent_ask.form.types import Draft, Question
from pi_agent_ask.form.untrusted import has_surrogate
from pi_agent_ask.persistence.keys import format_key
from pi_agent_ask.ui.render.footer import held_digit_hints, hints_text, no_such_row

__all__ = [
    "ENDED_TEXT",
    "MAX_TEXT",
    "STREAMED_ENDINGS",
    "AgentRow",
    "DraftError",
    "FormView",
    "Holder",
    "OptionView",
    "QuestionView",
    "agent_rows",
    "behind",
    "board_digest",
    "draft_json",
    "draft_rev",
    "drafts_from_json",
    "ended_text",
    "ending_text",
    "form_view",
    "has_images",
    "nobody",
    "remote_answers",
]

MAX_TEXT = 100_000
"""Longest text (custom answer or note) the page may send, in characters."""

ENDED_TEXT: dict[Ended, str] = {
    "submitted": "was answered elsewhere (on the terminal or another page).",
    "cancelled": (
        "was cancelled elsewhere (on the terminal, another page or by its agent's host): its "
        "agent was told “User cancelled the ask flow”."
    ),
    "withdrawn": (
        "was withdrawn without an answer (its agent's session ended or changed, or the desk "
        "set it aside): if it still waits, it comes back here."
    ),
    "deferred": (
        "was put back for later elsewhere (on the terminal or another page): its agent's "
        "questions wait their turn."
    ),
    "failed": "ended with an error on the desk (its display failed); its agent was told.",
}
"""What a page still showing a form reads once it left (``Board.endings``), after the form's
name (:func:`ending_text`)."""
STREAMED_ENDINGS = 8
"""The newest endings each live-stream event carries."""


class DraftError(ValueError):
    """The page sent drafts that do not fit the form."""


@attrs.frozen
class OptionView:
    index: int
    value: str
    label: str
    description: str | None
    recommended: bool
    selected: bool
    note: str


@attrs.frozen
class QuestionView:
    index: int
    id: str
    label: str
    prompt: str
    multi: bool
    context: str | None
    options: tuple[OptionView, ...]
    custom: str
    custom_selected: bool
    note: str
    skipped: bool
    images: int
    """Images attached to this question's draft on the terminal (the page shows the count)."""
    held: tuple[tuple[int, str], ...] = ()
    """For each first digit that waits for a second here, what the next key does with it
    (``number_key_texts``)."""
    past: tuple[tuple[int, str], ...] = ()
    """For each number past the last row that can be typed, what the page says of it."""


@attrs.frozen
class FormView:
    """One shown form, as the page renders it."""

    form_id: str
    key: str
    flow_id: str
    title: str | None
    blocked: bool
    background: bool
    questions: tuple[QuestionView, ...]
    rev: str
    """The drafts' revision (``draft_rev``): the page notices drafts changed elsewhere."""
    behind: int
    """Questions waiting after this one, across agents."""
    held_by: str | None = None
    """Who is answering it on another desk (a team desk), in words; ``None``: no one."""
    gone: str = ""
    """What the page says of the form should it leave with no word from the board of what
    became of it (a desk that forgot it): "answered elsewhere", naming it."""


@attrs.frozen
class AgentRow:
    key: str
    pending: int
    blocked: bool
    waiting: bool
    form_id: str | None
    """The agent's shown form (its turn on the board), if any."""
    current: bool


def _text(value: str) -> str:
    return sanitize_text(value)


def form_id(shown: Shown) -> str:
    """The page's name of a shown form: stable while it is shown, unique across agents."""
    return f"{shown.key}/{shown.flow_id}"


def ending_text(ending: Ending) -> str:
    """What a page says of a form that left: its desk's words, else the page's own; either
    way naming the form, as the terminal does (the page says it above the next form)."""
    return sanitize_line(ending.said or f"“{ending.name}” {ENDED_TEXT[ending.ended]}")


def ended_text(board: Board, wanted: str) -> str | None:
    """What became of the form the page names ``wanted`` (``form_id``), if the board
    remembers it leaving."""
    key, _, flow_id = wanted.rpartition("/")
    ending = board.ended(key, flow_id)
    return ending_text(ending) if ending is not None else None


def draft_rev(drafts: Sequence[Draft]) -> str:
    """A short name of these drafts' value, equal for equal drafts (within one desk process)."""
    return format(hash(tuple(drafts)) & 0xFFFFFFFFFFFF, "x")


Holder = Callable[[Shown], str | None]
"""Who is answering a shown form on another desk, in words (a team desk's claims)."""


def nobody(_shown: Shown) -> str | None:
    return None


def form_view(board: Board, shown: Shown, holder: Holder = nobody) -> FormView:
    state = shown.state
    questions = []
    for q, question in enumerate(state.params.questions):
        draft = state.drafts[q]
        questions.append(_question_view(q, question, state.types[q] == "multi", draft))
    title = state.params.title
    return FormView(
        form_id=form_id(shown),
        key=sanitize_line(shown.key),
        flow_id=shown.flow_id,
        title=sanitize_line(title) if title else None,
        blocked=board.is_blocked(shown),
        background=state.background,
        questions=tuple(questions),
        rev=draft_rev(state.drafts),
        behind=behind(board),
        held_by=_held(holder, shown),
        gone=ending_text(Ending("submitted", name=form_name(state.params))),
    )


def behind(board: Board) -> int:
    """Questions waiting after the one on the page, across agents ("N more waiting")."""
    return max(0, sum(agent.pending for agent in board.agents()) - 1)


def _held(holder: Holder, shown: Shown) -> str | None:
    text = holder(shown)
    return sanitize_line(text) if text else None


ENTER, ESC = format_key("enter"), format_key("escape")
"""The page's keys that pick a held digit's row and clear it (keys.js), named as the
terminal names keys."""


def number_key_texts(
    rows: int,
) -> tuple[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]:
    """What the page's number keys say on a question of ``rows`` numbered rows, in the
    terminal's words (one implementation: ``ui.render.footer``), keys.js showing them: for
    each first digit that waits for a second (``d`` with a row ``d0``), what the next key does
    with it, the page's own keys (Enter, Esc) named; and for each number past the last row
    that can be typed (``7`` of 5 rows; ``15`` of 13, its first digit beginning a row), that
    there is no such row."""
    if rows < 10:
        return (), tuple((n, no_such_row(n, rows)) for n in range(rows + 1, 10))
    held = tuple(
        (digit, hints_text(held_digit_hints(digit, rows, ENTER, ESC)))
        for digit in range(1, 10)
        if digit * 10 <= rows
    )
    past = tuple((n, no_such_row(n, rows)) for n in range(rows + 1, min(rows // 10 * 10 + 10, 100)))
    return held, past


def _question_view(q: int, question: Question, multi: bool, draft: Draft) -> QuestionView:
    options = tuple(
        OptionView(
            index=i,
            value=option.value,
            label=sanitize_line(option.label),
            description=_text(option.description) if option.description else None,
            recommended=bool(option.recommended),
            selected=i in draft.selected,
            note=draft.option_notes.get(option.value, ""),
        )
        for i, option in enumerate(question.options)
    )
    held, past = number_key_texts(len(options) + 1)
    return QuestionView(
        index=q,
        id=question.id,
        label=sanitize_line(question.label),
        prompt=_text(question.prompt),
        multi=multi,
        context=_text(question.context) if question.context else None,
        options=options,
        custom=draft.custom_text,
        custom_selected=draft.custom_selected,
        note=draft.note,
        skipped=draft.skipped,
        images=len(draft.custom_images)
        + len(draft.note_images)
        + sum(len(images) for images in draft.option_note_images.values()),
        held=held,
        past=past,
    )


def agent_rows(board: Board, current: Shown | None) -> list[AgentRow]:
    """The queue: every agent, its pending count, whether it is blocked, and its shown form."""
    shown_by = {shown.key: shown for shown in board.shown_forms()}
    rows = []
    for agent in board.agents():
        shown = shown_by.get(agent.key)
        rows.append(
            AgentRow(
                key=sanitize_line(agent.key),
                pending=agent.pending,
                blocked=agent.blocked,
                waiting=agent.waiting,
                form_id=form_id(shown) if shown is not None else None,
                current=shown is not None and shown is current,
            )
        )
    return rows


def board_digest(board: Board, holder: Holder = nobody) -> dict[str, Any]:
    """What the page's live stream says about the board: its shown forms and its agents.

    The page compares it with what it shows: a form that left the list was answered (here or
    elsewhere), a new one can be opened, and the queue is redrawn."""
    notice = board.notice
    return {
        "forms": [
            {
                "id": form_id(shown),
                "blocked": board.is_blocked(shown),
                "rev": draft_rev(shown.state.drafts),
                "held": holder(shown),
                # Which showing of the form: a form shown again (an answer its journal could
                # not record) is told from one still shown.
                "shown": shown.seq,
            }
            for shown in board.shown_forms()
        ],
        "agents": [
            [agent.key, agent.pending, agent.blocked, agent.waiting] for agent in board.agents()
        ],
        # The form's "N more waiting", which follows forms arriving and leaving live.
        "behind": behind(board),
        # What became of the forms that left last: a page still showing one says so (it
        # reads this in the event that drops the form; older endings stay on the desk, for
        # the API and a notification's link).
        "ended": {
            f"{key}/{flow_id}": ending_text(ending)
            for key, flow_id, ending in board.endings()[-STREAMED_ENDINGS:]
        },
        # The desk's latest notice (a journal that cannot be written: what is typed stays in
        # the desk and is written later), which the terminal shows on its status line.
        "notice": None if notice is None else [notice.serial, notice.text, notice.at],
    }


# -- what the page sends ------------------------------------------------------------------------


def _string(value: object, where: str, box: str) -> str:
    """A text the person typed into ``box`` (the page's words for it), checked."""
    if not isinstance(value, str):
        raise DraftError(f"{where} must be a string.")
    if len(value) > MAX_TEXT:
        # Said in the page's words (the person pasted too much), the JSON's name after them.
        raise DraftError(
            f"The text in {box} is {len(value):,} characters long, over the {MAX_TEXT:,} the "
            f"desk takes: shorten it ({where})."
        )
    if has_surrogate(value):
        # Valid JSON ("\ud800") but not text: the journal cannot store it (untrusted.py).
        raise DraftError(f"{where} holds a lone UTF-16 surrogate, which is not text.")
    return value


def _draft(question: Question, multi: bool, data: object, q: int, kept: Draft) -> Draft:
    """Question ``q``'s draft from the page. The page edits no images: those attached on the
    terminal (``kept``, the form's draft now) stay with the draft, so nothing is lost."""
    where = f"drafts[{q}]"
    if not isinstance(data, Mapping):
        raise DraftError(f"{where} must be an object.")
    unknown = set(data) - {
        "selected",
        "custom",
        "customSelected",
        "note",
        "optionNotes",
        "skipped",
    }
    if unknown:
        raise DraftError(f"{where} has unknown fields: {', '.join(sorted(map(str, unknown)))}.")
    selected_raw = data.get("selected", [])
    if not isinstance(selected_raw, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in selected_raw
    ):
        raise DraftError(f"{where}.selected must be a list of option numbers.")
    selected = sorted(set(selected_raw))
    if any(not 0 <= i < len(question.options) for i in selected):
        raise DraftError(f"{where}.selected names an option the question does not have.")
    custom = _string(
        data.get("custom", ""), f"{where}.custom", f"question {q + 1}'s “Type your own” box"
    )
    custom_selected = data.get("customSelected", False)
    skipped = data.get("skipped", False)
    if not isinstance(custom_selected, bool) or not isinstance(skipped, bool):
        raise DraftError(f"{where}.customSelected and .skipped must be true or false.")
    note = _string(data.get("note", ""), f"{where}.note", f"question {q + 1}'s “Note” box")
    notes_raw = data.get("optionNotes", {})
    if not isinstance(notes_raw, Mapping):
        raise DraftError(f"{where}.optionNotes must be an object.")
    values = {option.value for option in question.options}
    option_notes = {}
    for value, text in notes_raw.items():
        if value not in values:
            raise DraftError(f"{where}.optionNotes names an option the question does not have.")
        text = _string(text, f"{where}.optionNotes", f"a note on an option of question {q + 1}")
        if text.strip():
            option_notes[value] = text
    custom_selected = custom_selected and (bool(custom.strip()) or bool(kept.custom_images))
    if not multi and len(selected) + custom_selected > 1:
        raise DraftError(f"{where}: a single-choice question takes one answer.")
    if skipped:
        return Draft(skipped=True)
    return Draft(
        selected=tuple(selected),
        custom_text=custom,
        custom_selected=custom_selected,
        note=note,
        option_notes=option_notes,
        custom_images=kept.custom_images,
        note_images=kept.note_images,
        option_note_images=kept.option_note_images,
    )


def has_images(drafts: Sequence[Draft]) -> bool:
    """Images attached on the terminal, which a remote answer (the page's Submit) cannot carry."""
    return any(
        d.custom_images or d.note_images or any(d.option_note_images.values()) for d in drafts
    )


def drafts_from_json(state: fs.FormState, data: object) -> tuple[Draft, ...]:
    """The page's drafts (one per question, in order), checked against the form."""
    questions = state.params.questions
    if not isinstance(data, list) or len(data) != len(questions):
        raise DraftError(f"drafts must be a list of {len(questions)} objects.")
    return tuple(
        _draft(question, state.types[q] == "multi", data[q], q, state.drafts[q])
        for q, question in enumerate(questions)
    )


def draft_json(draft: Draft) -> dict[str, Any]:
    """A draft as the page holds it (the inverse of ``drafts_from_json`` for one question)."""
    return {
        "selected": list(draft.selected),
        "custom": draft.custom_text,
        "customSelected": draft.custom_selected,
        "note": draft.note,
        "optionNotes": dict(draft.option_notes),
        "skipped": draft.skipped,
    }


def remote_answers(state: fs.FormState, drafts: Sequence[Draft]) -> dict[str, Any]:
    """The drafts as a remote ``answer`` response's ``answers`` (``pi-agent-ask:submit``): the
    form checks them and submits them the way it does any remote answer."""
    answers: dict[str, Any] = {}
    for question, draft in zip(state.params.questions, drafts, strict=True):
        if draft.skipped:
            answers[question.id] = {"skipped": True}
            continue
        entry: dict[str, Any] = {"values": [question.options[i].value for i in draft.selected]}
        if draft.has_custom_answer:
            entry["customText"] = draft.custom_text
        if draft.note.strip():
            entry["note"] = draft.note
        if draft.option_notes:
            entry["optionNotes"] = dict(draft.option_notes)
        answers[question.id] = entry
    return answers
