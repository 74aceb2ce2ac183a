"""What the form reducer takes and gives: commands (keys, clicks, settings, remote answers,
mapped by the UI and the runtime) and effects (what the runtime must perform). Both are closed
sets of frozen records, dispatched with ``match`` (:mod:`pi_agent_ask.form.state`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

import attrs

from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.form.snapshot import FormSettings, Outcome, ReviewKind
from pi_agent_ask.form.types import Draft, Image

# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


class NextTab(Fieldless):
    """Next tab, wrapping from Review to the first question."""


class PreviousTab(Fieldless):
    """Previous tab, wrapping from the first question to Review."""


@attrs.frozen(repr=False)
class SelectTab:
    """Jump to a tab (a click): ``0..n-1`` questions, ``n`` Review; others are ignored."""

    index: int


class NextOption(Fieldless):
    """Cursor down (on Review: towards Cancel)."""


class PreviousOption(Fieldless):
    """Cursor up (on Review: towards Submit)."""


class Confirm(Fieldless):
    """Enter in navigation."""


class Cancel(Fieldless):
    """Esc in navigation: cancel the flow (dirty confirmation may apply)."""


class Toggle(Fieldless):
    """Space in navigation."""


@attrs.frozen(repr=False)
class Number:
    """Digit ``1..9``, or a click on row ``row`` (1-based, any row) or on Review action ``row``."""

    row: int


class ChangeQuestionType(Fieldless):
    """``t``: single <-> multi for the current question."""


class OpenOptionNote(Fieldless):
    """``n``: note on the highlighted real option."""


class OpenQuestionNote(Fieldless):
    """``Shift+N``: note on the current question."""


class Skip(Fieldless):
    """``D`` in question navigation: skip the current question and advance."""


class Dismiss(Fieldless):
    """Ctrl+C from anywhere: dismiss the flow without saving the open editor."""


@attrs.frozen(repr=False)
class EditorChanged:
    """The open editor's text is now ``text``."""

    text: str


class EditorSubmit(Fieldless):
    """Enter in the custom editor, save in a note editor."""


class EditorClose(Fieldless):
    """Esc in an editor: save the draft and close."""


@attrs.frozen(repr=False)
class EditorMoveOption:
    """``*OptionWhenEmpty``: close the empty editor and move the option cursor by ``delta``."""

    delta: int


@attrs.frozen(repr=False)
class EditorMoveTab:
    """``*TabWhenEmpty``: close the empty editor and move ``delta`` tabs (wrapping)."""

    delta: int


@attrs.frozen(repr=False)
class ReviewAction:
    """A click on a Review action; keeps the double-press safeguard."""

    kind: ReviewKind


@attrs.frozen(repr=False)
class AttachImage:
    """A clipboard image read finished for the editor whose serial is ``editor_serial``."""

    image: Image
    editor_serial: int


class RemoveLastImage(Fieldless):
    """``Ctrl+Alt+D``: remove the open editor's last image."""


@attrs.frozen(repr=False)
class SettingsChanged:
    """Live settings changed while the form is open."""

    settings: FormSettings


def _drafts(items: Iterable[Draft]) -> tuple[Draft, ...]:
    return items if type(items) is tuple else tuple(items)


@attrs.frozen(repr=False)
class SubmitAnswers:
    """A validated remote answer: replace every draft and submit (the editor is discarded)."""

    drafts: tuple[Draft, ...] = attrs.field(converter=_drafts)


class ExternalCancel(Fieldless):
    """A remote ``cancel`` response: cancel at once, without the dirty confirmation."""


@attrs.frozen(repr=False)
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


@attrs.frozen(repr=False)
class Completed:
    """The form has its outcome; build the result from the returned state."""

    outcome: Outcome


class DraftChanged(Fieldless):
    """What ``state_to_json`` records changed; journal it (coalescing is the runtime's)."""


class DeferRequested(Fieldless):
    """Esc in a background form's navigation: hide the panel and defer every question."""


Effect: TypeAlias = Completed | DraftChanged | DeferRequested
