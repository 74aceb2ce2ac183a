"""The form state machine: one pure reducer for a tabbed ask form.

``reduce(state, command) -> (state, effects)``. No I/O, no clock, no randomness. The UI maps keys
(through the configurable keymaps) and mouse clicks to the semantic commands below; the runtime
feeds settings changes and remote answers. Commands and effects are closed sets of frozen
records dispatched with ``match``.

The rules, stated once
======================

Layout. Tabs ``0..n-1`` are the questions, tab ``n`` is Review. Each question has its own
option cursor over rows ``0..len(options)``; row ``len(options)`` is the internal
``Type your own`` (custom) row. Review has a cursor over its actions (0 Submit, 1 Cancel).
``types[i]`` is the live presented type of question ``i`` (starts at ``effective_type``).

Navigation. NextTab/PreviousTab wrap both ways over questions and Review; SelectTab jumps
(clicks). NextOption/PreviousOption move the cursor without wrapping; on Review they move
between Submit and Cancel. Entering Review highlights Submit. Whenever the option cursor *lands*
on the custom row by a move (option move, tab change, or the advance after an answer) and the
question has no custom answer (no text, no images), the custom editor opens by itself. On a
multi-select question it also opens when custom text is saved, pre-filled: that is how a person
edits saved custom text on multi-select, where Enter advances and Space toggles. Closing it
with Esc leaves the cursor on the row with the editor closed, where Space/number/click toggle
the saved answer without reopening it. The editor never opens because a number key or a click
put the cursor there; those commands have their own meaning (below).

Single-select (at most one of: one selected option, or the selected custom answer).
- Number(k) on a real option selects it and advances to the next tab (last question: Review).
- Toggle (Space) selects the highlighted option without advancing; on the selected option it
  clears the selection.
- Confirm (Enter) selects the highlighted option and advances.
- Selecting an option deselects the custom answer but keeps its text and images.
- Number/Confirm on the custom row open the custom editor with the saved text.
Multi-select.
- Toggle and Number(k) toggle the option without advancing. Confirm keeps all choices and
  advances, on any row (also a highlighted saved custom answer).
Custom row, both types.
- Toggle (and, on multi-select, Number) on a custom row with saved text or images flips
  ``custom_selected`` without opening the editor or clearing the text; on an empty custom row
  it opens the editor. Selecting the custom answer on single-select clears the option.
Custom editor.
- EditorSubmit with text or images saves them and selects the custom answer. On single-select
  it clears the option selection and advances; on multi-select it stays on the tab and keeps
  the other selections.
- EditorClose (Esc) saves without advancing. Changed non-blank content is selected as
  EditorSubmit does; unchanged content keeps its selection state (so a pre-filled editor that
  is only looked at never re-selects a deselected answer).
- Saving blank content (submit or close) clears the custom text, images and selection; option
  selections and notes stay. A blank submit does not advance.
Note editors (question note, option note on any real option, selected or not).
- EditorSubmit and EditorClose both save and close; the flow stays open. Blank text removes
  the note text; the editor's images are saved with it. Notes never count as answers.
Editors in general.
- EditorChanged replaces the editor text. AttachImage appends to the open editor only when its
  ``editor_serial`` names that editor (a clipboard read that finishes after its editor closed
  cannot attach elsewhere); RemoveLastImage drops the editor's last image.
- EditorMoveOption/EditorMoveTab (the ``*WhenEmpty`` actions) act only when the editor has no
  text and no images: they close the editor (saving, so a cleared pre-filled answer is cleared)
  and move. Otherwise they do nothing.
- Any other navigation command that arrives while an editor is open (a click, say) first closes
  the editor as EditorClose does, then applies. Skip and Cancel never do that: in an editor the
  keyboard types ``D`` and maps Esc to EditorClose, so a stray one is ignored.
Skip (``D``). On a question tab in navigation: the question becomes ``Draft(skipped=True)``
(answer, custom text, notes and images removed) and the flow advances. Any later change that
leaves a non-empty answer or note un-skips it. Skipped questions are never answered.
Type change (``t``). single -> multi at once. multi -> single at once when at most one choice
(selected options + selected custom answer) exists, keeping it; with more, the first press only
arms ``pending_type_change`` and the second press switches, clearing option selections and
deselecting the custom answer (its text, images and all notes stay).
Review. Number(1) = Submit, Number(2) = Cancel, other digits do nothing. With
``double_press_review_shortcuts`` a digit or a ReviewAction (click) arms ``pending_review`` (the
review screen shows a hint) and the same action again -- by key or click -- fires it. Confirm
(Enter) fires the highlighted action at once: it is not guarded, because reaching it already
takes a deliberate move, while digits and clicks are what slip. Review Cancel that fires
without a double press (Enter on it, or a digit or click with double press off) on a dirty form
with ``confirm_dismiss_when_dirty`` first arms ``pending_dismiss = "cancel"`` and the warning;
Cancel again (Enter, 2, a click, Esc) completes. A double press already is that confirmation.
Submit is never blocked by unanswered or skipped questions.
Pending confirmations. ``pending_type_change`` and ``pending_review`` are disarmed by every
command except the one that fires them (and SettingsChanged, which is not the person's doing).
Cancel and Dismiss. Cancel (Esc in navigation) cancels; Dismiss (Ctrl+C) dismisses from
anywhere, discarding the open editor's unsaved text. With ``confirm_dismiss_when_dirty`` and a
dirty form (any non-empty draft, skipped included, or an open editor with text or images) the
first press arms ``pending_dismiss``, which the UI shows as the warning; the same action again
completes. The warning and the armed confirmation stay together until the tab changes: other
commands keep both (a visible warning that says "press again" must be true). Pressing the
other action re-arms with that one.
Auto-submit. When ``auto_submit_when_answered_without_notes`` is on, the form is on Review, no
editor is open, every question is answered (skipped is not answered) and no note exists
anywhere, the outcome becomes submitted -- after any command, including SettingsChanged. The
Review condition is the original's: without it the first toggle on the last multi-select
question would submit before the person could pick a second option.
Outcome. Once set, every command is ignored. Completing steps emit ``Completed``; other steps
that change what ``state_to_json`` records emit ``DraftChanged`` (the runtime coalesces).

Invariants (checked by the property tests): single-select drafts hold at most one selected
option and never both an option and the custom answer; ``selected`` is sorted, unique and in
range; ``custom_selected`` implies custom text or images; a skipped draft is exactly
``Draft(skipped=True)``; an open editor belongs to the current question tab; cursors in range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar, Unpack

from pi_agent_ask import _attrs as attrs
from pi_agent_ask.form.types import (
    EMPTY_DRAFT,
    JSON,
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Question,
    QuestionType,
    frozen_mapping,
    slot_builder,
)

EditorKind = Literal["custom", "note", "option_note"]
EDITOR_KINDS: tuple[EditorKind, ...] = ("custom", "note", "option_note")
ReviewKind = Literal["submit", "cancel"]
REVIEW_ACTIONS: tuple[ReviewKind, ...] = ("submit", "cancel")
DismissAction = Literal["cancel", "dismiss"]
OutcomeKind = Literal["submitted", "cancelled", "dismissed"]

SNAPSHOT_VERSION = 1

T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


@attrs.frozen
class FormSettings:
    """The live behaviour settings a form follows (``behaviour.*`` in the settings file)."""

    auto_submit_when_answered_without_notes: bool = False
    confirm_dismiss_when_dirty: bool = True
    double_press_review_shortcuts: bool = True


def _images(items: Iterable[Image]) -> tuple[Image, ...]:
    return items if type(items) is tuple else tuple(items)


@attrs.frozen
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


@attrs.frozen
class TypeChanged:
    """Notice of the last type change on the current tab (cleared when the tab changes)."""

    question: int
    old: QuestionType
    new: QuestionType


@attrs.frozen
class Outcome:
    """How the form ended. Cancelled and dismissed both produce ``cancelled: true`` results."""

    kind: OutcomeKind

    @property
    def cancelled(self) -> bool:
        return self.kind != "submitted"


# A dict class, not slotted: the reducer copies it with one dict copy (see "Structural sharing").
@attrs.frozen(slots=False)
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
    questions = params.questions
    n = len(questions)
    # A copy of a template with the defaults, the way the reducer copies states ("Structural
    # sharing"), not the constructor: about a third of its cost, and the state's dict is an
    # ordinary one, which the first command copies at the cost of every later copy (the
    # constructor's key-sharing dict takes a slow copy) and whose fields read fast. It is
    # about 180 bytes larger than the constructor's (a queued form holds one:
    # tests/test_queue_memory, 4 KiB per queued form).
    fields = _NEW_FORM_FIELDS.copy()
    fields["params"] = params
    types = []  # a loop: a comprehension is a call of its own (CPython 3.11)
    for question in questions:
        types.append(question.presented_type or question.type)  # effective_type
    fields["types"] = tuple(types)
    try:
        # Shared by the forms of as many questions: a queued form keeps its state, and a tuple
        # of drafts is never untracked by the cyclic collector (a draft is an object).
        fields["drafts"] = _NO_DRAFTS[n]
    except IndexError:
        fields["drafts"] = (_EMPTY_DRAFT,) * n
    fields["cursors"] = (0,) * n
    if settings is not None:
        fields["settings"] = settings
    if background:
        fields["background"] = True
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


_DEFAULT_SETTINGS = FormSettings()


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


@attrs.frozen
class NextTab:
    """Next tab, wrapping from Review to the first question."""


@attrs.frozen
class PreviousTab:
    """Previous tab, wrapping from the first question to Review."""


@attrs.frozen
class SelectTab:
    """Jump to a tab (a click): ``0..n-1`` questions, ``n`` Review; others are ignored."""

    index: int


@attrs.frozen
class NextOption:
    """Cursor down (on Review: towards Cancel)."""


@attrs.frozen
class PreviousOption:
    """Cursor up (on Review: towards Submit)."""


@attrs.frozen
class Confirm:
    """Enter in navigation."""


@attrs.frozen
class Cancel:
    """Esc in navigation: cancel the flow (dirty confirmation may apply)."""


@attrs.frozen
class Toggle:
    """Space in navigation."""


@attrs.frozen
class Number:
    """Digit ``1..9``, or a click on row ``row`` (1-based, any row) or on Review action ``row``."""

    row: int


@attrs.frozen
class ChangeQuestionType:
    """``t``: single <-> multi for the current question."""


@attrs.frozen
class OpenOptionNote:
    """``n``: note on the highlighted real option."""


@attrs.frozen
class OpenQuestionNote:
    """``Shift+N``: note on the current question."""


@attrs.frozen
class Skip:
    """``D`` in question navigation: skip the current question and advance."""


@attrs.frozen
class Dismiss:
    """Ctrl+C from anywhere: dismiss the flow without saving the open editor."""


@attrs.frozen
class EditorChanged:
    """The open editor's text is now ``text``."""

    text: str


@attrs.frozen
class EditorSubmit:
    """Enter in the custom editor, save in a note editor."""


@attrs.frozen
class EditorClose:
    """Esc in an editor: save the draft and close."""


@attrs.frozen
class EditorMoveOption:
    """``*OptionWhenEmpty``: close the empty editor and move the option cursor by ``delta``."""

    delta: int


@attrs.frozen
class EditorMoveTab:
    """``*TabWhenEmpty``: close the empty editor and move ``delta`` tabs (wrapping)."""

    delta: int


@attrs.frozen
class ReviewAction:
    """A click on a Review action; keeps the double-press safeguard."""

    kind: ReviewKind


@attrs.frozen
class AttachImage:
    """A clipboard image read finished for the editor whose serial is ``editor_serial``."""

    image: Image
    editor_serial: int


@attrs.frozen
class RemoveLastImage:
    """``Ctrl+Alt+D``: remove the open editor's last image."""


@attrs.frozen
class SettingsChanged:
    """Live settings changed while the form is open."""

    settings: FormSettings


def _drafts(items: Iterable[Draft]) -> tuple[Draft, ...]:
    return items if type(items) is tuple else tuple(items)


@attrs.frozen
class SubmitAnswers:
    """A validated remote answer: replace every draft and submit (the editor is discarded)."""

    drafts: tuple[Draft, ...] = attrs.field(converter=_drafts)


@attrs.frozen
class ExternalCancel:
    """A remote ``cancel`` response: cancel at once, without the dirty confirmation."""


@attrs.frozen
class ReplaceDrafts:
    """Drafts edited in another view of the form (the web desk): replace every draft and stay
    open. An open editor stays open with its unsaved text (it saves over its own field)."""

    drafts: tuple[Draft, ...] = attrs.field(converter=_drafts)


Command: TypeAlias = (
    NextTab
    | PreviousTab
    | SelectTab
    | NextOption
    | PreviousOption
    | Confirm
    | Cancel
    | Toggle
    | Number
    | ChangeQuestionType
    | OpenOptionNote
    | OpenQuestionNote
    | Skip
    | Dismiss
    | EditorChanged
    | EditorSubmit
    | EditorClose
    | EditorMoveOption
    | EditorMoveTab
    | ReviewAction
    | AttachImage
    | RemoveLastImage
    | SettingsChanged
    | SubmitAnswers
    | ExternalCancel
    | ReplaceDrafts
)


# --------------------------------------------------------------------------------------------
# Effects
# --------------------------------------------------------------------------------------------


@attrs.frozen
class Completed:
    """The form has its outcome; build the result from the returned state."""

    outcome: Outcome


@attrs.frozen
class DraftChanged:
    """What ``state_to_json`` records changed; journal it (coalescing is the runtime's)."""


@attrs.frozen
class DeferRequested:
    """Esc in a background form's navigation: hide the panel and defer every question."""


Effect: TypeAlias = Completed | DraftChanged | DeferRequested


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


def has_custom_content(draft: Draft) -> bool:
    """Saved custom text or images, selected or not."""
    return bool(draft.custom_text.strip()) or bool(draft.custom_images)


# --------------------------------------------------------------------------------------------
# The reducer
# --------------------------------------------------------------------------------------------

# Structural sharing. A command changes one or two fields of the state and keeps the others,
# and building objects is most of what a command costs. So a command builds only what it
# touches: ``_with`` copies the state as one copy of its ``__dict__`` with the changed fields
# (``FormState`` and ``Draft`` are frozen dict classes for this; attrs's own ``__init__`` for
# such classes fills ``__dict__`` the same way, and the values given are already in the form
# the constructor's converters would make), a draft change copies one ``Draft`` the same way
# and replaces it by index in the drafts tuple, and every other part -- the params, the other
# drafts, the cursors, the editor -- is the previous state's own object. A copy is complete
# before it is returned and nothing is ever written to an object another state can see.
# ``reduce``'s check for a changed snapshot relies on the sharing (an unchanged part is the
# same object); the property tests check that no output depends on it.


class _Changes(TypedDict, total=False):
    """The fields a command may change (``params`` and ``background`` never change)."""

    types: tuple[QuestionType, ...]
    drafts: tuple[Draft, ...]
    cursors: tuple[int, ...]
    tab: int
    review_cursor: int
    editor: EditorState | None
    editors_opened: int
    pending_type_change: int | None
    pending_review: ReviewKind | None
    pending_dismiss: DismissAction | None
    type_notice: TypeChanged | None
    settings: FormSettings
    outcome: Outcome | None


class _DraftChanges(TypedDict, total=False):
    """The fields an edit may change (never ``skipped``); mappings already frozen."""

    selected: tuple[int, ...]
    custom_text: str
    custom_selected: bool
    note: str
    option_notes: Mapping[str, str]
    custom_images: tuple[Image, ...]
    note_images: tuple[Image, ...]
    option_note_images: Mapping[str, tuple[Image, ...]]


_new_object = object.__new__
# Assigning a new ``__dict__`` (rather than filling the one ``object.__new__`` gives, or the one
# attrs's ``__init__`` fills) keeps the copy's attribute reads on CPython's fast path: a
# materialised instance dict that shares its keys with the class is read the slow way.
_set_attribute = object.__setattr__


def _build(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of the frozen dict class ``cls`` holding ``fields`` (its every field, each
    already what the constructor's converters would make of it)."""
    instance: T = _new_object(cls)
    _set_attribute(instance, "__dict__", fields)
    return instance


def _with(state: FormState, **changes: Unpack[_Changes]) -> FormState:
    """``attrs.evolve(state, **changes)``, sharing every unchanged field, at far less cost."""
    copy: FormState = _new_object(FormState)
    _set_attribute(copy, "__dict__", {**state.__dict__, **changes})
    return copy


# A step that changes a state makes its copy in two statements, written out where it copies
# (a call of a helper for them costs about a quarter of the copy):
#     copy = _new_object(FormState); _set_attribute(copy, "__dict__", fields)
# with ``fields`` a copy of a state's ``__dict__`` (``{**state.__dict__}``: it keeps the field
# order, and makes an ordinary dict of a constructor's key-sharing one, whose copies would be
# slow) with the changed fields stored into it. The hot steps copy this way rather than
# through ``_with``: a call with keyword arguments builds a dict for them and merges it, about
# a quarter of the copy's cost.


def _draft_with(draft: Draft, **changes: Unpack[_DraftChanges]) -> Draft:
    """``attrs.evolve(draft, **changes)`` for an edit, sharing every unchanged field; ``draft``
    itself when every change equals what it has (so ``is`` tells a change from none)."""
    fields = draft.__dict__
    if changes.items() <= fields.items():
        return draft
    copy: Draft = _new_object(Draft)
    _set_attribute(copy, "__dict__", {**fields, **changes})
    return copy


def _edit(
    drafts: tuple[Draft, ...], q: int, draft: Draft, **changes: Unpack[_DraftChanges]
) -> tuple[Draft, ...]:
    """``_replace(drafts, q, _draft_with(draft, **changes))`` for a change known to change the
    draft, in one step: without the comparison (about a third of the copy's cost) and one call
    fewer (a call costs about as much as a tuple copy)."""
    copy: Draft = _new_object(Draft)
    _set_attribute(copy, "__dict__", {**draft.__dict__, **changes})
    items = [*drafts]
    items[q] = copy
    return tuple(items)


# ``EMPTY_DRAFT``'s twin with a fast-path dict: what new forms hold and what edits of an empty or
# skipped draft start from.
_EMPTY_DRAFT = _build(Draft, dict(EMPTY_DRAFT.__dict__))
_NO_DRAFTS = tuple((_EMPTY_DRAFT,) * n for n in range(17))
"""A new form's drafts by its number of questions (``new_form``)."""

# A new form's fields, in field order, with the defaults; ``new_form`` fills in the rest.
_NEW_FORM_FIELDS: dict[str, Any] = {
    "params": None,
    "types": (),
    "drafts": (),
    "cursors": (),
    "tab": 0,
    "review_cursor": 0,
    "editor": None,
    "editors_opened": 0,
    "pending_type_change": None,
    "pending_review": None,
    "pending_dismiss": None,
    "type_notice": None,
    "settings": _DEFAULT_SETTINGS,
    "outcome": None,
    "background": False,
}


def _replace(items: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    """``items`` with ``items[index]`` replaced (one list copy: cheaper than slicing twice)."""
    copy = [*items]  # not list(items): calling the type costs more
    copy[index] = value
    return tuple(copy)


def _put_draft(
    state: FormState, q: int, base: Draft, new: Draft, cursor: int | None = None
) -> FormState:
    """Question ``q``'s draft becomes ``new`` (made by ``_draft_with`` from ``base``, its live
    draft: a skipped draft starts over from empty) and, when given, its cursor ``cursor``, in
    one copy. ``new is base`` is no change, so a skipped draft stays skipped unless the change
    leaves something in it."""
    drafts = state.drafts
    if new is not base:
        drafts = _replace(drafts, q, new)
    cursors = state.cursors
    if cursor is not None and cursor != cursors[q]:
        cursors = _replace(cursors, q, cursor)
    elif drafts is state.drafts:
        return state
    return _with(state, drafts=drafts, cursors=cursors)


_NO_EFFECTS: tuple[Effect, ...] = ()
_DRAFT_CHANGED: tuple[Effect, ...] = (DraftChanged(),)
_DEFER_REQUESTED: tuple[Effect, ...] = (DeferRequested(),)
_SUBMITTED = Outcome("submitted")
_CANCELLED = Outcome("cancelled")
_DISMISSED = Outcome("dismissed")
_SKIPPED = Draft(skipped=True)
# The effects of a completing step, one per outcome kind (built once, as the outcomes are).
_COMPLETED: dict[OutcomeKind, tuple[Effect, ...]] = {
    outcome.kind: (Completed(outcome),) for outcome in (_SUBMITTED, _CANCELLED, _DISMISSED)
}

# Commands that leave an armed confirmation alone; every other command disarms it.
_KEEPS_PENDING_REVIEW = (Number, ReviewAction, SettingsChanged)
_KEEPS_PENDING_TYPE = (ChangeQuestionType, SettingsChanged)


def reduce(state: FormState, command: Command) -> tuple[FormState, tuple[Effect, ...]]:
    """Apply one command; return the new state and the effects the runtime must perform."""
    if state.outcome is not None:
        return state, _NO_EFFECTS
    if state.pending_review is None and state.pending_type_change is None:
        new = state
    else:
        new = _disarm(state, command)
    if new.editor is None:
        if state.background and isinstance(command, Cancel):
            return state, _DEFER_REQUESTED
        # Most keys are navigation with no editor open: straight to their step.
        step = _NAVIGATION.get(type(command))
        new = _dispatch(new, command) if step is None else step(new, command)
    else:
        new = _dispatch(new, command)
    if new is state:
        if state.settings.auto_submit_when_answered_without_notes and _should_auto_submit(state):
            return _with(state, outcome=_SUBMITTED), _COMPLETED["submitted"]
        return state, _NO_EFFECTS
    moved = new.tab != state.tab
    if moved and (new.pending_dismiss is not None or new.type_notice is not None):
        # The dirty warning and the type notice are visible until the tab changes.
        new = _with(new, pending_dismiss=None, type_notice=None)
    outcome = new.outcome
    if outcome is None:
        if new.settings.auto_submit_when_answered_without_notes and _should_auto_submit(new):
            return _with(new, outcome=_SUBMITTED), _COMPLETED["submitted"]
        # Identity checks keep this O(1): a command shares every part it did not change (see
        # "Structural sharing"); a rebuilt-but-equal tuple only costs a spare journal write.
        # (The most common changes first: the tests are all of one ``or``.)
        if (
            moved
            or new.drafts is not state.drafts
            or new.editor is not state.editor
            or new.cursors is not state.cursors
            or new.types is not state.types
            or new.review_cursor != state.review_cursor
        ):
            return new, _DRAFT_CHANGED
        return new, _NO_EFFECTS
    return new, _COMPLETED[outcome.kind]


def submit_with(state: FormState, drafts: Sequence[Draft]) -> FormState:
    """``reduce(state, SubmitAnswers(drafts))`` without the effects (remote answers).

    That step written out (``tests/test_state_fast.py`` holds the two equal): it disarms any
    armed confirmation, replaces the drafts, closes the editor and submits, on the same tab."""
    if state.outcome is not None:
        return state
    submitted = drafts if type(drafts) is tuple else tuple(drafts)
    if len(submitted) != len(state.drafts):
        raise ValueError(f"SubmitAnswers needs {len(state.drafts)} drafts, got {len(submitted)}")
    fields = {**state.__dict__}
    if state.pending_review is not None:  # _disarm: SubmitAnswers keeps neither
        fields["pending_review"] = None
    if state.pending_type_change is not None:
        fields["pending_type_change"] = None
    fields["drafts"] = submitted
    fields["editor"] = None
    fields["outcome"] = _SUBMITTED
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


def cancel_now(state: FormState) -> FormState:
    """``reduce(state, ExternalCancel())`` without the effects (remote cancel)."""
    return reduce(state, ExternalCancel())[0]


def _disarm(state: FormState, command: Command) -> FormState:
    clear_review = state.pending_review is not None and not isinstance(
        command, _KEEPS_PENDING_REVIEW
    )
    clear_type = state.pending_type_change is not None and not isinstance(
        command, _KEEPS_PENDING_TYPE
    )
    if not (clear_review or clear_type):
        return state
    return _with(
        state,
        pending_review=None if clear_review else state.pending_review,
        pending_type_change=None if clear_type else state.pending_type_change,
    )


def _should_auto_submit(state: FormState) -> bool:
    return (
        state.settings.auto_submit_when_answered_without_notes
        and state.on_review
        and state.editor is None
        and all(draft.is_answered and not draft.has_notes for draft in state.drafts)
    )


def _dispatch(state: FormState, command: Command) -> FormState:
    """Editor and form-level commands, and navigation while an editor is open."""
    match command:
        case EditorChanged(text=text):
            editor = state.editor
            if editor is None or editor.text == text:
                return state
            fields = {**state.__dict__}
            fields["editor"] = _editor_with(editor, text, editor.images)
            copy = _new_object(FormState)  # see "A step that changes a state"
            _set_attribute(copy, "__dict__", fields)
            return copy
        case EditorSubmit():
            return _editor_submit(state) if state.editor is not None else state
        case EditorClose():
            return _commit_editor(state, submit=False)[0] if state.editor is not None else state
        case EditorMoveOption(delta=delta):
            if state.editor is None or not state.editor.is_empty:
                return state
            return _move_option(_commit_editor(state, submit=False)[0], delta)
        case EditorMoveTab(delta=delta):
            if state.editor is None or not state.editor.is_empty:
                return state
            state = _commit_editor(state, submit=False)[0]
            return _move_tab(state, (state.tab + delta) % (state.review_tab + 1))
        case AttachImage(image=image, editor_serial=serial):
            editor = state.editor
            if editor is None or editor.serial != serial:
                return state
            return _with(state, editor=_editor_with(editor, editor.text, (*editor.images, image)))
        case RemoveLastImage():
            editor = state.editor
            if editor is None or not editor.images:
                return state
            return _with(state, editor=_editor_with(editor, editor.text, editor.images[:-1]))
        case Dismiss():
            return _exit(state, "dismiss")
        case SettingsChanged(settings=settings):
            return _with(
                state,
                settings=settings,
                pending_review=state.pending_review
                if settings.double_press_review_shortcuts
                else None,
                pending_dismiss=state.pending_dismiss
                if settings.confirm_dismiss_when_dirty
                else None,
            )
        case SubmitAnswers(drafts=drafts):
            if len(drafts) != len(state.drafts):
                raise ValueError(
                    f"SubmitAnswers needs {len(state.drafts)} drafts, got {len(drafts)}"
                )
            return _with(state, drafts=drafts, editor=None, outcome=_SUBMITTED)
        case ExternalCancel():
            return _with(state, editor=None, outcome=_CANCELLED)
        case ReplaceDrafts(drafts=drafts):
            if len(drafts) != len(state.drafts):
                raise ValueError(
                    f"ReplaceDrafts needs {len(state.drafts)} drafts, got {len(drafts)}"
                )
            return state if drafts == state.drafts else _with(state, drafts=drafts)
        case Skip() | Cancel() if state.editor is not None:
            return state
        case _:
            if state.editor is not None:
                state = _commit_editor(state, submit=False)[0]
            step = _NAVIGATION.get(type(command))
            return state if step is None else step(state, command)


def _editor_with(editor: EditorState, text: str, images: tuple[Image, ...]) -> EditorState:
    return _editor(editor.kind, editor.question, editor.option_value, text, images, editor.serial)


def _editor(
    kind: EditorKind,
    question: int,
    option_value: str | None,
    text: str,
    images: tuple[Image, ...],
    serial: int,
) -> EditorState:
    """``EditorState(kind, question, option_value, text, images, serial)`` filled as a plain
    object that then becomes an ``EditorState`` (``types.slot_builder``: about a third of the
    constructor's cost, no converter), for values already in their final types (``images`` a
    tuple)."""
    editor = _new_object(_EDITOR_BUILDER)
    editor.kind = kind
    editor.question = question
    editor.option_value = option_value
    editor.text = text
    editor.images = images
    editor.serial = serial
    editor.__class__ = EditorState
    return editor  # type: ignore[no-any-return]


_EDITOR_BUILDER = slot_builder(EditorState)


# --------------------------------------------------------------------------------------------
# Navigation steps (no editor is open when they run)
# --------------------------------------------------------------------------------------------


def _next_tab(state: FormState, command: NextTab) -> FormState:
    return _move_tab(state, (state.tab + 1) % (len(state.params.questions) + 1))


def _previous_tab(state: FormState, command: PreviousTab) -> FormState:
    return _move_tab(state, (state.tab - 1) % (len(state.params.questions) + 1))


def _select_tab(state: FormState, command: SelectTab) -> FormState:
    index = command.index
    return _move_tab(state, index) if 0 <= index <= len(state.params.questions) else state


def _next_option(state: FormState, command: NextOption) -> FormState:
    return _move_option(state, 1)


def _previous_option(state: FormState, command: PreviousOption) -> FormState:
    return _move_option(state, -1)


def _cancel(state: FormState, command: Cancel) -> FormState:
    return _exit(state, "cancel")


def _open_option_note(state: FormState, command: OpenOptionNote) -> FormState:
    q = state.tab
    questions = state.params.questions
    if q == len(questions):
        return state
    row = state.cursors[q]
    options = questions[q].options
    if row >= len(options):
        return state
    return _open_editor(state, "option_note", q, options[row].value)


def _open_question_note(state: FormState, command: OpenQuestionNote) -> FormState:
    q = state.tab
    return state if q == len(state.params.questions) else _open_editor(state, "note", q, None)


def _skip(state: FormState, command: Skip) -> FormState:
    if state.on_review:
        return state
    state = _with(state, drafts=_replace(state.drafts, state.tab, _SKIPPED))
    return _advance(state)


def _review_action(state: FormState, command: ReviewAction) -> FormState:
    return _review_press(state, command.kind) if state.on_review else state


def _move_tab(state: FormState, tab: int) -> FormState:
    if tab == state.tab:
        return state
    questions = state.params.questions
    fields = {**state.__dict__}
    fields["tab"] = tab
    if tab == len(questions):
        fields["review_cursor"] = 0  # Review: nothing to land on
        copy = _new_object(FormState)  # see "A step that changes a state"
        _set_attribute(copy, "__dict__", fields)
        return copy
    state = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(state, "__dict__", fields)
    return _land(state) if state.cursors[tab] == len(questions[tab].options) else state


def _advance(state: FormState) -> FormState:
    return _move_tab(state, min(state.tab + 1, len(state.params.questions)))


def _move_option(state: FormState, delta: int) -> FormState:
    q = state.tab
    questions = state.params.questions
    if q == len(questions):
        cursor = min(max(state.review_cursor + delta, 0), len(REVIEW_ACTIONS) - 1)
        return _with(state, review_cursor=cursor) if cursor != state.review_cursor else state
    row = min(max(state.cursors[q] + delta, 0), len(questions[q].options))
    if row == state.cursors[q]:
        return state
    return _land(_with(state, cursors=_replace(state.cursors, q, row)))


def _set_cursor(state: FormState, q: int, row: int) -> FormState:
    if state.cursors[q] == row:
        return state
    return _with(state, cursors=_replace(state.cursors, q, row))


def _land(state: FormState) -> FormState:
    """The cursor arrived on its row by a move: open the custom editor where the rules say."""
    q = state.tab
    questions = state.params.questions
    if state.editor is not None or q == len(questions):
        return state
    if state.cursors[q] != len(questions[q].options):
        return state
    if state.types[q] == "multi" or not has_custom_content(_live(state.drafts[q])):
        return _open_editor(state, "custom", q, None)
    return state


def _live(draft: Draft) -> Draft:
    """What a change starts from: a skipped draft starts over from empty."""
    return _EMPTY_DRAFT if draft.skipped else draft


def _open_editor(state: FormState, kind: EditorKind, q: int, option_value: str | None) -> FormState:
    draft = state.drafts[q]
    if draft.skipped:
        draft = _EMPTY_DRAFT  # _live(draft)
    if kind == "custom":
        text, images = draft.custom_text, draft.custom_images
    elif kind == "note":
        text, images = draft.note, draft.note_images
    else:
        assert option_value is not None
        text = draft.option_notes.get(option_value, "")
        images = draft.option_note_images.get(option_value, ())
    serial = state.editors_opened + 1
    fields = {**state.__dict__}
    fields["editor"] = _editor(kind, q, option_value, text, images, serial)
    fields["editors_opened"] = serial
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


def _commit_editor(state: FormState, *, submit: bool) -> tuple[FormState, bool]:
    """Save the open editor into its draft and close it, in one copy.

    Returns the new state and whether a non-blank custom answer was saved.
    """
    editor = state.editor
    assert editor is not None
    text = editor.text if editor.text.strip() else ""
    images = editor.images
    blank = not text and not images
    q = editor.question
    drafts = state.drafts
    draft = drafts[q]
    base = _EMPTY_DRAFT if draft.skipped else draft  # _live(draft)
    new = base
    kind = editor.kind
    if kind == "custom":
        if blank:
            new = _draft_with(base, custom_text="", custom_images=(), custom_selected=False)
        elif submit or text != base.custom_text or images != base.custom_images:
            single = state.types[q] == "single"
            new = _draft_with(
                base,
                custom_text=text,
                custom_images=images,
                custom_selected=True,
                selected=() if single else base.selected,
            )
    elif kind == "note":
        if text != base.note or images != base.note_images:
            changed = {**base.__dict__}
            changed["note"] = text
            changed["note_images"] = images
            new = _build(Draft, changed)
    else:
        assert editor.option_value is not None
        value = editor.option_value
        notes = dict(base.option_notes)
        note_images = dict(base.option_note_images)
        if text:
            notes[value] = text
        else:
            notes.pop(value, None)
        if images:
            note_images[value] = images
        else:
            note_images.pop(value, None)
        new = _draft_with(
            base,
            option_notes=frozen_mapping(notes),
            option_note_images=frozen_mapping(note_images),
        )
    fields = {**state.__dict__}
    if new is not base:
        items = [*drafts]
        items[q] = new
        fields["drafts"] = tuple(items)
    fields["editor"] = None
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy, kind == "custom" and not blank


def _editor_submit(state: FormState) -> FormState:
    editor = state.editor
    assert editor is not None
    state, saved_answer = _commit_editor(state, submit=True)
    if saved_answer and state.types[editor.question] == "single":
        return _advance(state)
    return state


def _toggled(selected: tuple[int, ...], row: int) -> tuple[int, ...]:
    """A multi-select selection with ``row`` toggled (sorted, unique)."""
    if row in selected:
        return tuple([i for i in selected if i != row])
    return tuple(sorted((*selected, row)))


def _custom_toggled(draft: Draft, single: bool) -> Draft:
    """The saved custom answer selected or deselected (selecting it clears a single option)."""
    if draft.custom_selected:
        return _draft_with(draft, custom_selected=False)
    return _draft_with(draft, custom_selected=True, selected=() if single else draft.selected)


def _confirm(state: FormState, command: Confirm) -> FormState:
    q = state.tab
    questions = state.params.questions
    if q == len(questions):
        return _fire_review(state, REVIEW_ACTIONS[state.review_cursor])
    if state.types[q] == "multi":
        return _move_tab(state, q + 1)
    row = state.cursors[q]
    if row == len(questions[q].options):
        return _open_editor(state, "custom", q, None)
    return _answer_and_advance(state, q, row)


def _answer_and_advance(state: FormState, q: int, row: int) -> FormState:
    """Select option ``row`` of single-select question ``q`` (the current tab), put its cursor
    there and advance, in one copy."""
    fields = {**state.__dict__}
    drafts = state.drafts
    draft = drafts[q]
    if draft.skipped or draft.selected != (row,) or draft.custom_selected:
        # ``_edit``, spelled out: an empty draft (a skipped one starts over) or this one, with
        # this option selected and the custom answer not.
        changed = {**(_EMPTY_DRAFT if draft.skipped else draft).__dict__}
        changed["selected"] = (row,)
        changed["custom_selected"] = False
        items = [*drafts]
        items[q] = _build(Draft, changed)
        fields["drafts"] = tuple(items)
    cursors = state.cursors
    if cursors[q] != row:
        positions = [*cursors]
        positions[q] = row
        cursors = fields["cursors"] = tuple(positions)
    tab = fields["tab"] = q + 1
    questions = state.params.questions
    if tab == len(questions):
        fields["review_cursor"] = 0
        copy = _new_object(FormState)  # see "A step that changes a state"
        _set_attribute(copy, "__dict__", fields)
        return copy
    state = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(state, "__dict__", fields)
    return _land(state) if cursors[tab] == len(questions[tab].options) else state


def _toggle(state: FormState, command: Toggle) -> FormState:
    q = state.tab
    questions = state.params.questions
    if q == len(questions):
        return state
    row = state.cursors[q]
    single = state.types[q] == "single"
    base = _live(state.drafts[q])
    if row == len(questions[q].options):
        if has_custom_content(base):
            return _put_draft(state, q, base, _custom_toggled(base, single))
        return _open_editor(state, "custom", q, None)
    if not single:
        return _put_draft(state, q, base, _draft_with(base, selected=_toggled(base.selected, row)))
    if base.selected == (row,):
        return _put_draft(state, q, base, _draft_with(base, selected=()))
    return _put_draft(state, q, base, _draft_with(base, selected=(row,), custom_selected=False))


def _number(state: FormState, command: Number) -> FormState:
    q = state.tab
    questions = state.params.questions
    number = command.row
    if q == len(questions):
        if 1 <= number <= len(REVIEW_ACTIONS):
            return _review_press(state, REVIEW_ACTIONS[number - 1])
        # An ignored digit is still another key: it disarms a pending review action.
        return _with(state, pending_review=None) if state.pending_review else state
    row = number - 1
    custom = len(questions[q].options)
    if not 0 <= row <= custom:
        return state
    single = state.types[q] == "single"
    if row == custom:
        base = _live(state.drafts[q])
        if not single and has_custom_content(base):
            return _put_draft(state, q, base, _custom_toggled(base, single), cursor=row)
        return _open_editor(_set_cursor(state, q, row), "custom", q, None)
    if single:
        return _answer_and_advance(state, q, row)
    # A multi-select toggle, the commonest key: ``_toggled`` and ``_put_draft`` spelled out (a
    # toggle always changes the draft).
    draft = state.drafts[q]
    base = _EMPTY_DRAFT if draft.skipped else draft
    selected = base.selected
    if row in selected:
        selected = tuple([i for i in selected if i != row])
    elif not selected or row > selected[-1]:
        selected += (row,)  # still sorted: options are mostly picked top to bottom
    else:
        selected = tuple(sorted((*selected, row)))
    changed = {**base.__dict__}
    changed["selected"] = selected
    items = [*state.drafts]
    items[q] = _build(Draft, changed)
    fields = {**state.__dict__}
    fields["drafts"] = tuple(items)
    cursors = state.cursors
    if cursors[q] != row:
        positions = [*cursors]
        positions[q] = row
        fields["cursors"] = tuple(positions)
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


def _change_type(state: FormState, command: ChangeQuestionType) -> FormState:
    if state.on_review:
        return state
    q = state.tab
    old = state.types[q]
    if old == "single":
        return _set_type(state, q, "multi")
    draft = _live(state.drafts[q])
    choices = len(draft.selected) + (1 if draft.has_custom_answer else 0)
    if choices <= 1:
        return _set_type(state, q, "single")
    if state.pending_type_change != q:
        return _with(state, pending_type_change=q)
    # The options are cleared; a saved custom answer stays selected as the one answer (000).
    cleared = _draft_with(draft, selected=(), custom_selected=draft.has_custom_answer)
    state = _put_draft(state, q, draft, cleared)
    return _with(_set_type(state, q, "single"), pending_type_change=None)


def _set_type(state: FormState, q: int, new: QuestionType) -> FormState:
    return _with(
        state,
        types=_replace(state.types, q, new),
        type_notice=TypeChanged(q, state.types[q], new),
    )


def _review_press(state: FormState, kind: ReviewKind) -> FormState:
    if not state.settings.double_press_review_shortcuts:
        return _fire_review(state, kind)
    if state.pending_review == kind:
        return _fire_review(state, kind, confirmed=True)
    fields = {**state.__dict__}
    fields["pending_review"] = kind
    fields["review_cursor"] = 0 if kind == "submit" else 1  # REVIEW_ACTIONS.index(kind)
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


def _fire_review(state: FormState, kind: ReviewKind, *, confirmed: bool = False) -> FormState:
    if (
        kind == "cancel"
        and not confirmed
        and state.settings.confirm_dismiss_when_dirty
        and state.pending_dismiss != "cancel"
        and is_dirty(state)
    ):
        return _with(
            state,
            pending_dismiss="cancel",
            pending_review=None,
            review_cursor=REVIEW_ACTIONS.index("cancel"),
        )
    fields = {**state.__dict__}
    fields["outcome"] = _SUBMITTED if kind == "submit" else _CANCELLED
    fields["pending_review"] = None
    copy = _new_object(FormState)  # see "A step that changes a state"
    _set_attribute(copy, "__dict__", fields)
    return copy


def _exit(state: FormState, action: DismissAction) -> FormState:
    if (
        state.settings.confirm_dismiss_when_dirty
        and state.pending_dismiss != action
        and is_dirty(state)
    ):
        return _with(state, pending_dismiss=action)
    outcome = _CANCELLED if action == "cancel" else _DISMISSED
    return _with(state, editor=None, outcome=outcome)


# The step of each navigation command.
_NAVIGATION: dict[type, Callable[[FormState, Any], FormState]] = {
    NextTab: _next_tab,
    PreviousTab: _previous_tab,
    SelectTab: _select_tab,
    NextOption: _next_option,
    PreviousOption: _previous_option,
    Confirm: _confirm,
    Cancel: _cancel,
    Toggle: _toggle,
    Number: _number,
    ChangeQuestionType: _change_type,
    OpenOptionNote: _open_option_note,
    OpenQuestionNote: _open_question_note,
    Skip: _skip,
    ReviewAction: _review_action,
}


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
