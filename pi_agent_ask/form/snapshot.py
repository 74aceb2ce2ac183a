"""A form's state: ``FormState``, everything one open form knows, as an immutable snapshot.

The reducer (:mod:`pi_agent_ask.form.state`) makes each new snapshot from the last; the UI
renders them; the runtime journals what a person entered (:func:`state_to_json`) and reopens
a form from it (:func:`state_from_json`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from pi_agent_ask.form.types import (
    EMPTY_DRAFT,
    JSON,
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Question,
    QuestionType,
)

EditorKind = Literal["custom", "note", "option_note"]
EDITOR_KINDS: tuple[EditorKind, ...] = ("custom", "note", "option_note")
ReviewKind = Literal["submit", "cancel"]
REVIEW_ACTIONS: tuple[ReviewKind, ...] = ("submit", "cancel")
DismissAction = Literal["cancel", "dismiss"]
OutcomeKind = Literal["submitted", "cancelled", "dismissed"]

SNAPSHOT_VERSION = 1


@attrs.frozen(repr=False)
class FormSettings:
    """The live behaviour settings a form follows (``behaviour.*`` in the settings file)."""

    auto_submit_when_answered_without_notes: bool = False
    confirm_dismiss_when_dirty: bool = True
    double_press_review_shortcuts: bool = True


def _images(items: Iterable[Image]) -> tuple[Image, ...]:
    return items if isinstance(items, tuple) else tuple(items)


@attrs.frozen(repr=False)
class EditorState:
    """The open editor: what it edits and its unsaved content.

    ``serial`` identifies this opening of an editor; image reads carry it back so a late read
    never lands in a different editor.
    """

    kind: EditorKind
    question: int
    option_value: str | None = None
    text: str = ""
    images: tuple[Image, ...] = attrs.field(default=(), converter=_images)
    serial: int = 0

    @property
    def is_empty(self) -> bool:
        return not self.text and not self.images


@attrs.frozen(repr=False)
class TypeChanged:
    """Notice of the last type change on the current tab (cleared when the tab changes)."""

    question: int
    old: QuestionType
    new: QuestionType


@attrs.frozen(repr=False)
class Outcome:
    """How the form ended. Cancelled and dismissed both produce ``cancelled: true`` results."""

    kind: OutcomeKind

    @property
    def cancelled(self) -> bool:
        return self.kind != "submitted"


@attrs.frozen(repr=False)
class FormState:
    """Everything one open form knows. Build with ``new_form``; change only with ``reduce``."""

    params: AskParams
    types: tuple[QuestionType, ...]
    drafts: tuple[Draft, ...]
    cursors: tuple[int, ...]
    """Option cursor per question; ``len(options)`` is the custom row."""
    tab: int = 0
    """``0..n-1`` questions, ``n`` Review."""
    review_cursor: int = 0
    """0 Submit, 1 Cancel."""
    editor: EditorState | None = None
    editors_opened: int = 0
    """How many editors this form has opened; the next editor's serial is this plus one."""
    pending_type_change: int | None = None
    """Question whose multi -> single change waits for a second press."""
    pending_review: ReviewKind | None = None
    """Review action armed by a first digit or click (the review hint shows it)."""
    pending_dismiss: DismissAction | None = None
    """Armed dirty-dismiss confirmation; while set the UI shows the warning."""
    type_notice: TypeChanged | None = None
    settings: FormSettings = attrs.field(factory=FormSettings)
    outcome: Outcome | None = None
    background: bool = False
    """A background form: ``Cancel`` (Esc in navigation) defers the queue instead of
    cancelling (000: "Esc in the panel ... defers all questions"); Review's Cancel action and
    ``Dismiss`` still end the form."""

    @property
    def review_tab(self) -> int:
        return len(self.params.questions)

    @property
    def on_review(self) -> bool:
        return self.tab == len(self.params.questions)


def new_form(
    params: AskParams, settings: FormSettings | None = None, *, background: bool = False
) -> FormState:
    """A fresh form on the first question with empty drafts and presented types."""
    n = len(params.questions)
    return FormState(
        params=params,
        types=tuple(question.effective_type for question in params.questions),
        drafts=(EMPTY_DRAFT,) * n,
        cursors=(0,) * n,
        settings=_DEFAULT_SETTINGS if settings is None else settings,
        background=background,
    )


_DEFAULT_SETTINGS = FormSettings()


# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------


def current_question(state: FormState) -> Question | None:
    """The question on the current tab, or ``None`` on Review."""
    if state.on_review:
        return None
    return state.params.questions[state.tab]


def answered_count(state: FormState) -> int:
    """How many questions have a committed answer (notes and skips do not count)."""
    return sum(1 for draft in state.drafts if draft.is_answered)


def is_dirty(state: FormState) -> bool:
    """Whether leaving now would throw away something the person entered."""
    editor = state.editor
    if editor is not None and not editor.is_empty:
        return True
    return any(draft != EMPTY_DRAFT for draft in state.drafts)


def custom_row(state: FormState, question: int) -> int:
    """The cursor row of a question's ``Type your own`` row."""
    return len(state.params.questions[question].options)


def numbered_rows(state: FormState) -> int:
    """The rows a number key (or a click) picks on the current tab: the question's options
    and ``Type your own``, numbered from 1; 0 on Review."""
    return 0 if state.on_review else custom_row(state, state.tab) + 1


def has_custom_content(draft: Draft) -> bool:
    """Saved custom text or images, selected or not."""
    return bool(draft.custom_text.strip()) or bool(draft.custom_images)


# --------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------


def state_to_json(state: FormState) -> dict[str, JSON]:
    """What the person entered and where they were, for the draft journal.

    Recorded: live types, drafts, tab, cursors, the open editor with its unsaved text and
    images, and the editor counter. Not recorded (transient): pending confirmations, the
    dirty-dismiss warning, the type-change notice, the outcome, and the settings (the runtime
    passes current settings back to ``state_from_json``).
    """
    out: dict[str, JSON] = {
        "version": SNAPSHOT_VERSION,
        "types": list(state.types),
        "drafts": [draft.to_json() for draft in state.drafts],
        "tab": state.tab,
        "cursors": list(state.cursors),
        "reviewCursor": state.review_cursor,
        "editorsOpened": state.editors_opened,
    }
    editor = state.editor
    if editor is not None:
        data: dict[str, JSON] = {
            "kind": editor.kind,
            "question": editor.question,
            "text": editor.text,
            "images": [image.to_json() for image in editor.images],
            "serial": editor.serial,
        }
        if editor.option_value is not None:
            data["optionValue"] = editor.option_value
        out["editor"] = data
    return out


def state_from_json(
    params: AskParams, data: Mapping[str, Any], settings: FormSettings | None = None
) -> FormState:
    """Restore a form from ``state_to_json`` output for the same ``params``.

    Raises ``ValueError`` when the snapshot does not fit the params or breaks an invariant.
    """
    try:
        return _from_json(params, data, settings if settings is not None else FormSettings())
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"malformed form snapshot: {exc!r}") from exc


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"invalid form snapshot: {message}")


def _from_json(params: AskParams, data: Mapping[str, Any], settings: FormSettings) -> FormState:
    _check(data.get("version") == SNAPSHOT_VERSION, f"unsupported version {data.get('version')!r}")
    questions = params.questions
    n = len(questions)
    types = tuple(data["types"])
    _check(len(types) == n and all(t in QUESTION_TYPES for t in types), "question types")
    drafts = tuple(Draft.from_json(item) for item in data["drafts"])
    _check(len(drafts) == n, "draft count")
    for i, (question, kind, draft) in enumerate(zip(questions, types, drafts, strict=True)):
        _check_draft(i, question, kind, draft)
    cursors = tuple(int(c) for c in data["cursors"])
    _check(len(cursors) == n, "cursor count")
    _check(
        all(0 <= c <= len(q.options) for c, q in zip(cursors, questions, strict=True)), "cursors"
    )
    tab = int(data["tab"])
    _check(0 <= tab <= n, "tab")
    review_cursor = int(data["reviewCursor"])
    _check(0 <= review_cursor < len(REVIEW_ACTIONS), "review cursor")
    editors_opened = int(data["editorsOpened"])
    _check(editors_opened >= 0, "editor counter")
    editor = None
    if data.get("editor") is not None:
        raw = data["editor"]
        editor_kind = raw["kind"]
        _check(editor_kind in EDITOR_KINDS, "editor kind")
        editor_question = int(raw["question"])
        _check(editor_question == tab < n, "editor question")
        option_value = raw.get("optionValue")
        if editor_kind == "option_note":
            # An option-note editor always belongs to the highlighted real option.
            options = questions[editor_question].options
            row = cursors[editor_question]
            _check(row < len(options) and option_value == options[row].value, "editor option")
        else:
            _check(option_value is None, "editor option")
        editor = EditorState(
            kind=editor_kind,
            question=editor_question,
            option_value=option_value,
            text=str(raw["text"]),
            images=tuple(Image.from_json(image) for image in raw["images"]),
            serial=int(raw["serial"]),
        )
        _check(1 <= editor.serial <= editors_opened, "editor serial")
    return FormState(
        params=params,
        types=types,
        drafts=drafts,
        cursors=cursors,
        tab=tab,
        review_cursor=review_cursor,
        editor=editor,
        editors_opened=editors_opened,
        settings=settings,
    )


def _check_draft(i: int, question: Question, kind: QuestionType, draft: Draft) -> None:
    count = len(question.options)
    _check(
        list(draft.selected) == sorted(set(draft.selected))
        and all(0 <= s < count for s in draft.selected),
        f"selection of question {i}",
    )
    if kind == "single":
        _check(
            len(draft.selected) + (1 if draft.custom_selected else 0) <= 1,
            f"single-select question {i} has more than one choice",
        )
    _check(
        not draft.custom_selected or has_custom_content(draft),
        f"question {i} selects an empty custom answer",
    )
    _check(not draft.skipped or draft == Draft(skipped=True), f"skipped question {i} has content")
