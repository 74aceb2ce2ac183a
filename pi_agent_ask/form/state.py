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
  and move. Otherwise, or with no row that way (Down on the last row, Up on the first: the
  keys typed next must reach the editor), they do nothing.
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
Cancel again (Enter, 2, a click, Esc) completes at once; a double press is that confirmation.
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar, Unpack

import attrs

from pi_agent_ask.form.commands import (
    AttachImage,
    Cancel,
    ChangeQuestionType,
    Command,
    Completed,
    Confirm,
    DeferRequested,
    Dismiss,
    DraftChanged,
    EditorChanged,
    EditorClose,
    EditorMoveOption,
    EditorMoveTab,
    EditorSubmit,
    Effect,
    ExternalCancel,
    NextOption,
    NextTab,
    Number,
    OpenOptionNote,
    OpenQuestionNote,
    PreviousOption,
    PreviousTab,
    RemoveLastImage,
    ReplaceDrafts,
    ReviewAction,
    SelectTab,
    SettingsChanged,
    Skip,
    SubmitAnswers,
    Toggle,
)
from pi_agent_ask.form.snapshot import (
    EDITOR_KINDS,
    REVIEW_ACTIONS,
    SNAPSHOT_VERSION,
    DismissAction,
    EditorKind,
    EditorState,
    FormSettings,
    FormState,
    Outcome,
    OutcomeKind,
    ReviewKind,
    TypeChanged,
    answered_count,
    current_question,
    custom_row,
    has_custom_content,
    is_dirty,
    new_form,
    state_from_json,
    state_to_json,
)
from pi_agent_ask.form.types import EMPTY_DRAFT, Draft, Image, QuestionType, frozen_mapping

# The state machine's whole vocabulary is reachable from here (``fs.NextTab``, ``fs.FormState``,
# ``fs.state_to_json``): the snapshot and the commands live in modules of their own.
__all__ = [
    "EDITOR_KINDS",
    "REVIEW_ACTIONS",
    "SNAPSHOT_VERSION",
    "AttachImage",
    "Cancel",
    "ChangeQuestionType",
    "Command",
    "Completed",
    "Confirm",
    "DeferRequested",
    "Dismiss",
    "DismissAction",
    "DraftChanged",
    "EditorChanged",
    "EditorClose",
    "EditorKind",
    "EditorMoveOption",
    "EditorMoveTab",
    "EditorState",
    "EditorSubmit",
    "Effect",
    "ExternalCancel",
    "FormSettings",
    "FormState",
    "NextOption",
    "NextTab",
    "Number",
    "OpenOptionNote",
    "OpenQuestionNote",
    "Outcome",
    "OutcomeKind",
    "PreviousOption",
    "PreviousTab",
    "RemoveLastImage",
    "ReplaceDrafts",
    "ReviewAction",
    "ReviewKind",
    "SelectTab",
    "SettingsChanged",
    "Skip",
    "SubmitAnswers",
    "Toggle",
    "TypeChanged",
    "answered_count",
    "cancel_now",
    "current_question",
    "custom_row",
    "has_custom_content",
    "is_dirty",
    "new_form",
    "reduce",
    "state_from_json",
    "state_to_json",
    "submit_with",
]

T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# The reducer
# --------------------------------------------------------------------------------------------

# Structural sharing. A command changes one or two fields of the state and keeps the others
# (``attrs.evolve``): the params, the other drafts, the cursors and the editor stay the previous
# state's own objects. ``reduce``'s check for a changed snapshot relies on it (an unchanged part
# is the same object); the property tests check that no output depends on it.


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


def _with(state: FormState, **changes: Unpack[_Changes]) -> FormState:
    return attrs.evolve(state, **changes)


def _draft_with(draft: Draft, **changes: Unpack[_DraftChanges]) -> Draft:
    """``attrs.evolve(draft, **changes)``, or ``draft`` itself when every change equals what it
    has (so ``is`` tells a change from none)."""
    if all(getattr(draft, name) == value for name, value in changes.items()):
        return draft
    return attrs.evolve(draft, **changes)


def _replace(items: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    """``items`` with ``items[index]`` replaced."""
    return (*items[:index], value, *items[index + 1 :])


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
    if new.editor is None and state.background and isinstance(command, Cancel):
        return state, _DEFER_REQUESTED
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
    """``reduce(state, SubmitAnswers(drafts))`` without the effects (remote answers)."""
    return reduce(state, SubmitAnswers(drafts))[0]


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
            return _with(state, editor=attrs.evolve(editor, text=text))
        case EditorSubmit():
            return _editor_submit(state) if state.editor is not None else state
        case EditorClose():
            return _commit_editor(state, submit=False)[0] if state.editor is not None else state
        case EditorMoveOption() | EditorMoveTab() if not (state.editor and state.editor.is_empty):
            return state
        case EditorMoveOption(delta=delta):
            moved = _move_option(closed := _commit_editor(state, submit=False)[0], delta)
            return state if moved is closed else moved  # no row that way: the editor stays
        case EditorMoveTab(delta=delta):
            state = _commit_editor(state, submit=False)[0]
            return _move_tab(state, (state.tab + delta) % (state.review_tab + 1))
        case AttachImage(image=image, editor_serial=serial):
            editor = state.editor
            if editor is None or editor.serial != serial:
                return state
            return _with(state, editor=attrs.evolve(editor, images=(*editor.images, image)))
        case RemoveLastImage():
            editor = state.editor
            if editor is None or not editor.images:
                return state
            return _with(state, editor=attrs.evolve(editor, images=editor.images[:-1]))
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
    if row >= len(options):  # ``Type your own``: a typed answer's note is the question's
        return _open_editor(state, "note", q, None)
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
    if tab == len(state.params.questions):
        return _with(state, tab=tab, review_cursor=0)  # Review: nothing to land on
    return _land(_with(state, tab=tab))


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
    return EMPTY_DRAFT if draft.skipped else draft


def _open_editor(state: FormState, kind: EditorKind, q: int, option_value: str | None) -> FormState:
    draft = _live(state.drafts[q])
    if kind == "custom":
        text, images = draft.custom_text, draft.custom_images
    elif kind == "note":
        text, images = draft.note, draft.note_images
    else:
        assert option_value is not None
        text = draft.option_notes.get(option_value, "")
        images = draft.option_note_images.get(option_value, ())
    serial = state.editors_opened + 1
    editor = EditorState(kind, q, option_value, text, images, serial)
    return _with(state, editor=editor, editors_opened=serial)


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
    base = _live(state.drafts[q])
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
        new = _draft_with(base, note=text, note_images=images)
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
    drafts = state.drafts if new is base else _replace(state.drafts, q, new)
    return _with(state, drafts=drafts, editor=None), kind == "custom" and not blank


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
    there and advance."""
    base = _live(state.drafts[q])
    new = _draft_with(base, selected=(row,), custom_selected=False)
    return _advance(_put_draft(state, q, base, new, cursor=row))


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
    base = _live(state.drafts[q])
    new = _draft_with(base, selected=_toggled(base.selected, row))
    return _put_draft(state, q, base, new, cursor=row)


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
    if not state.settings.double_press_review_shortcuts or state.pending_dismiss == kind:
        return _fire_review(state, kind)  # (a dirty-cancel warning asked for this very press)
    if state.pending_review == kind:
        return _fire_review(state, kind, confirmed=True)
    return _with(state, pending_review=kind, review_cursor=REVIEW_ACTIONS.index(kind))


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
    return _with(state, outcome=_SUBMITTED if kind == "submit" else _CANCELLED, pending_review=None)


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
