"""The form state machine, one rule per test (contract 000 and catalog §9)."""

from __future__ import annotations

import json

import attrs
import pytest

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import EMPTY_DRAFT, AskParams, Draft, Image, Option, Question

IMG_A = Image(id="img-a", mime_type="image/png", data="iVBORw0KGgo=")
IMG_B = Image(id="img-b", mime_type="image/jpeg", data="/9j/4AAQ")


def question(qid: str, kind: str = "single", options: int = 3, presented: str | None = None):
    return Question(
        id=qid,
        label=qid.upper(),
        prompt=f"Prompt {qid}?",
        type=kind,  # type: ignore[arg-type]
        options=[Option(value=f"{qid}{i}", label=f"Option {i}") for i in range(1, options + 1)],
        presented_type=presented,  # type: ignore[arg-type]
    )


def form(*questions: Question, **settings: bool) -> fs.FormState:
    return fs.new_form(AskParams(questions=questions), fs.FormSettings(**settings))


def run(state: fs.FormState, *commands: fs.Command) -> fs.FormState:
    for command in commands:
        state, _ = fs.reduce(state, command)
    return state


def effects(state: fs.FormState, *commands: fs.Command) -> list[fs.Effect]:
    out: list[fs.Effect] = []
    for command in commands:
        state, step = fs.reduce(state, command)
        out.extend(step)
    return out


def type_custom(text: str) -> tuple[fs.Command, ...]:
    return (fs.EditorChanged(text), fs.EditorSubmit())


# --------------------------------------------------------------------------------------------
# Creation, helpers, tabs and cursors
# --------------------------------------------------------------------------------------------


def test_states_and_drafts_stay_frozen_after_a_command() -> None:
    state = run(form(question("a", "multi")), fs.Number(1), fs.Number(2))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.tab = 1  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.drafts[0].selected = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        state.drafts[0].option_notes["a1"] = "x"  # type: ignore[index]
    assert hash(state.drafts[0]) == hash(Draft(selected=(0, 1)))


def test_new_form_uses_presented_types_and_starts_on_first_question() -> None:
    state = form(question("a"), question("b", presented="multi"), question("c", "multi"))
    assert state.types == ("single", "multi", "multi")
    assert state.tab == 0
    assert state.cursors == (0, 0, 0)
    assert state.drafts == (EMPTY_DRAFT,) * 3
    assert state.editor is None
    assert state.outcome is None
    assert state.settings == fs.FormSettings(
        auto_submit_when_answered_without_notes=False,
        confirm_dismiss_when_dirty=True,
        double_press_review_shortcuts=True,
    )


def test_current_question_answered_count_and_dirty() -> None:
    state = form(question("a"), question("b"))
    assert fs.current_question(state) == state.params.questions[0]
    assert fs.answered_count(state) == 0
    assert not fs.is_dirty(state)
    state = run(state, fs.Number(1))
    assert fs.current_question(state) == state.params.questions[1]
    assert fs.answered_count(state) == 1
    assert fs.is_dirty(state)
    state = run(state, fs.Number(1))
    assert fs.current_question(state) is None
    assert fs.answered_count(state) == 2


def test_tabs_wrap_both_ways_including_review() -> None:
    state = form(question("a"), question("b"))
    assert run(state, fs.PreviousTab()).tab == 2  # first question -> Review
    assert run(state, fs.NextTab(), fs.NextTab()).tab == 2
    assert run(state, fs.NextTab(), fs.NextTab(), fs.NextTab()).tab == 0  # Review -> first


def test_select_tab_jumps_and_ignores_out_of_range() -> None:
    state = form(question("a"), question("b"))
    assert run(state, fs.SelectTab(2)).tab == 2
    assert run(state, fs.SelectTab(1)).tab == 1
    assert run(state, fs.SelectTab(3)) == state
    assert run(state, fs.SelectTab(-1)) == state


def test_option_cursor_moves_without_wrapping() -> None:
    state = form(question("a", options=2))
    assert run(state, fs.PreviousOption()).cursors == (0,)
    assert run(state, fs.NextOption()).cursors == (1,)


def test_review_cursor_moves_between_submit_and_cancel() -> None:
    state = run(form(question("a")), fs.SelectTab(1))
    assert state.review_cursor == 0
    assert run(state, fs.NextOption()).review_cursor == 1
    assert run(state, fs.NextOption(), fs.NextOption()).review_cursor == 1
    assert run(state, fs.NextOption(), fs.PreviousOption()).review_cursor == 0


def test_entering_review_highlights_submit() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.NextOption(), fs.PreviousTab())
    assert run(state, fs.NextTab()).review_cursor == 0


def test_each_question_keeps_its_own_cursor() -> None:
    state = run(form(question("a"), question("b")), fs.NextOption(), fs.NextTab())
    assert state.cursors == (1, 0)
    assert run(state, fs.PreviousTab()).cursors == (1, 0)


# --------------------------------------------------------------------------------------------
# Single-select
# --------------------------------------------------------------------------------------------


def test_single_number_key_selects_and_advances() -> None:
    state = run(form(question("a"), question("b")), fs.Number(2))
    assert state.drafts[0].selected == (1,)
    assert state.cursors[0] == 1
    assert state.tab == 1


def test_single_number_key_on_last_question_advances_to_review() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Number(3))
    assert state.drafts[1].selected == (2,)
    assert state.tab == 2
    assert state.outcome is None


def test_single_space_toggles_without_advancing_and_second_press_clears() -> None:
    state = run(form(question("a"), question("b")), fs.NextOption(), fs.Toggle())
    assert state.drafts[0].selected == (1,)
    assert state.tab == 0
    state = run(state, fs.Toggle())
    assert state.drafts[0].selected == ()
    assert state.tab == 0


def test_single_space_on_another_option_replaces_the_selection() -> None:
    state = run(form(question("a")), fs.Toggle(), fs.NextOption(), fs.Toggle())
    assert state.drafts[0].selected == (1,)


def test_single_enter_selects_highlighted_option_and_advances() -> None:
    state = run(form(question("a"), question("b")), fs.NextOption(), fs.NextOption(), fs.Confirm())
    assert state.drafts[0].selected == (2,)
    assert state.tab == 1


def test_single_selecting_option_deselects_custom_but_keeps_its_text() -> None:
    state = run(form(question("a"), question("b")), fs.Number(4), *type_custom("my own"))
    assert state.drafts[0].custom_selected and state.tab == 1
    state = run(state, fs.PreviousTab(), fs.Number(1))
    assert state.drafts[0].selected == (0,)
    assert not state.drafts[0].custom_selected
    assert state.drafts[0].custom_text == "my own"


# --------------------------------------------------------------------------------------------
# Multi-select
# --------------------------------------------------------------------------------------------


def test_multi_number_keys_toggle_without_advancing_in_option_order() -> None:
    state = run(form(question("a", "multi")), fs.Number(3), fs.Number(1))
    assert state.drafts[0].selected == (0, 2)
    assert state.tab == 0
    state = run(state, fs.Number(3))
    assert state.drafts[0].selected == (0,)


def test_multi_space_toggles_highlighted_option_without_advancing() -> None:
    state = run(form(question("a", "multi")), fs.NextOption(), fs.Toggle())
    assert state.drafts[0].selected == (1,)
    assert state.tab == 0
    assert run(state, fs.Toggle()).drafts[0].selected == ()


def test_multi_enter_keeps_all_choices_and_advances() -> None:
    state = run(form(question("a", "multi"), question("b")), fs.Number(1), fs.Number(2))
    state = run(state, fs.Confirm())
    assert state.drafts[0].selected == (0, 1)
    assert state.tab == 1


def test_multi_enter_on_highlighted_saved_custom_answer_advances() -> None:
    state = run(form(question("a", "multi", options=2)), fs.Number(3), *type_custom("mine"))
    assert state.editor is None and state.cursors[0] == 2
    state = run(state, fs.Confirm())
    assert state.tab == 1
    assert state.drafts[0].custom_selected
    assert state.drafts[0].custom_text == "mine"


def test_multi_enter_on_last_question_advances_to_review() -> None:
    state = run(form(question("a", "multi")), fs.Number(1), fs.Confirm())
    assert state.tab == 1
    assert state.outcome is None


# --------------------------------------------------------------------------------------------
# The custom row and its editor
# --------------------------------------------------------------------------------------------


def test_cursor_landing_on_empty_custom_row_opens_editor() -> None:
    state = run(form(question("a", options=1)), fs.NextOption())
    assert state.cursors == (1,)
    assert state.editor == fs.EditorState(kind="custom", question=0, serial=1)


def test_tab_change_landing_on_empty_custom_row_opens_editor() -> None:
    state = run(form(question("a", options=1), question("b")), fs.NextOption(), fs.EditorMoveTab(1))
    assert state.tab == 1 and state.editor is None
    state = run(state, fs.PreviousTab())
    assert state.editor is not None and state.editor.kind == "custom"
    assert state.editor.question == 0


def test_single_landing_on_saved_custom_row_keeps_editor_closed() -> None:
    state = run(form(question("a", options=1)), fs.NextOption(), fs.EditorChanged("x"))
    state = run(state, fs.EditorClose(), fs.PreviousOption(), fs.NextOption())
    assert state.cursors == (1,)
    assert state.editor is None


def test_multi_landing_on_saved_custom_row_opens_prefilled_editor() -> None:
    state = run(form(question("a", "multi", options=1)), fs.NextOption(), *type_custom("saved"))
    state = run(state, fs.PreviousOption(), fs.NextOption())
    assert state.editor is not None
    assert state.editor.kind == "custom"
    assert state.editor.text == "saved"


def test_single_choosing_custom_row_opens_editor_with_saved_text() -> None:
    state = run(form(question("a"), question("b")), fs.Number(4), *type_custom("first"))
    state = run(state, fs.PreviousTab(), fs.Number(4))
    assert state.editor is not None and state.editor.text == "first"
    assert state.tab == 0
    state = run(state, fs.PreviousOption(), fs.Confirm())
    assert state.drafts[0].selected == (2,)
    state = run(state, fs.PreviousTab(), fs.NextOption(), fs.Confirm())
    assert state.editor is not None and state.editor.text == "first"


def test_single_custom_submit_selects_clears_options_and_advances() -> None:
    state = run(form(question("a"), question("b")), fs.Toggle(), fs.Number(4))
    assert state.drafts[0].selected == (0,)
    state = run(state, *type_custom("Something else"))
    draft = state.drafts[0]
    assert draft.custom_text == "Something else"
    assert draft.custom_selected
    assert draft.selected == ()
    assert state.editor is None
    assert state.tab == 1


def test_custom_submit_of_blank_text_clears_custom_text_and_keeps_notes() -> None:
    state = run(
        form(question("a"), question("b")),
        fs.OpenQuestionNote(),
        *type_custom("keep me"),
        fs.Number(4),
        *type_custom("custom"),
        fs.PreviousTab(),
        fs.Number(4),
        *type_custom("   "),
    )
    draft = state.drafts[0]
    assert draft.custom_text == ""
    assert not draft.custom_selected
    assert draft.note == "keep me"
    assert state.tab == 0  # a blank submit does not advance
    assert state.editor is None


def test_blank_custom_save_never_touches_option_selections() -> None:
    state = run(form(question("a", options=1)), fs.Toggle(), fs.NextOption(), fs.EditorSubmit())
    assert state.drafts[0].selected == (0,)


def test_multi_custom_submit_stays_on_tab_and_keeps_selections() -> None:
    state = run(form(question("a", "multi"), question("b")), fs.Number(1), fs.Number(4))
    state = run(state, *type_custom("extra"))
    draft = state.drafts[0]
    assert draft.selected == (0,)
    assert draft.custom_selected and draft.custom_text == "extra"
    assert state.tab == 0
    assert state.editor is None


def test_multi_clearing_custom_text_keeps_other_selections() -> None:
    state = run(form(question("a", "multi", options=2)), fs.Number(1), fs.NextOption())
    state = run(state, fs.NextOption(), *type_custom("extra"), fs.PreviousOption(), fs.NextOption())
    assert state.editor is not None and state.editor.text == "extra"
    state = run(state, *type_custom(""))
    assert state.drafts[0].selected == (0,)
    assert state.drafts[0].custom_text == ""
    assert not state.drafts[0].custom_selected


def test_multi_toggling_empty_custom_row_opens_editor() -> None:
    state = run(form(question("a", "multi", options=2)), fs.Number(3))
    assert state.editor is not None and state.editor.kind == "custom"
    state = run(state, fs.EditorClose(), fs.Toggle())
    assert state.editor is not None and state.editor.kind == "custom"


def test_multi_toggling_saved_custom_row_flips_selection_without_editor() -> None:
    state = run(form(question("a", "multi", options=2)), fs.Number(1), fs.Number(3))
    state = run(state, *type_custom("mine"))
    state = run(state, fs.Toggle())
    assert not state.drafts[0].custom_selected
    assert state.drafts[0].custom_text == "mine"
    assert state.drafts[0].selected == (0,)
    assert state.editor is None
    state = run(state, fs.Number(3))  # a click on the row does the same
    assert state.drafts[0].custom_selected
    assert state.editor is None


def test_custom_editor_close_saves_without_advancing() -> None:
    state = run(form(question("a"), question("b")), fs.Toggle(), fs.Number(4))
    state = run(state, fs.EditorChanged("typed"), fs.EditorClose())
    draft = state.drafts[0]
    assert draft.custom_text == "typed" and draft.custom_selected
    assert draft.selected == ()
    assert state.tab == 0
    assert state.editor is None


def test_closing_unchanged_prefilled_editor_keeps_custom_deselected() -> None:
    state = run(form(question("a", "multi", options=1)), fs.NextOption(), *type_custom("mine"))
    state = run(state, fs.Toggle(), fs.PreviousOption(), fs.NextOption())
    assert state.editor is not None and state.editor.text == "mine"
    state = run(state, fs.EditorClose())
    assert not state.drafts[0].custom_selected
    assert state.drafts[0].custom_text == "mine"


def test_image_only_custom_answer_counts_as_answered() -> None:
    state = run(form(question("a"), question("b")), fs.Number(4))
    assert state.editor is not None
    state = run(state, fs.AttachImage(IMG_A, state.editor.serial), fs.EditorSubmit())
    draft = state.drafts[0]
    assert draft.custom_text == "" and draft.custom_images == (IMG_A,)
    assert draft.is_answered
    assert state.tab == 1


# --------------------------------------------------------------------------------------------
# Notes
# --------------------------------------------------------------------------------------------


def test_option_note_on_unselected_option_is_saved_and_flow_stays_open() -> None:
    state = run(form(question("a"), question("b")), fs.NextOption(), fs.OpenOptionNote())
    assert state.editor == fs.EditorState(
        kind="option_note", question=0, option_value="a2", serial=1
    )
    state = run(state, *type_custom("maybe later"))
    assert state.drafts[0].option_notes == {"a2": "maybe later"}
    assert state.drafts[0].selected == ()
    assert state.editor is None
    assert state.tab == 0
    assert state.outcome is None


def test_question_note_editor_submit_saves_and_close_saves_too() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote(), *type_custom("needs examples"))
    assert state.drafts[0].note == "needs examples"
    state = run(state, fs.OpenQuestionNote())
    assert state.editor is not None and state.editor.text == "needs examples"
    state = run(state, fs.EditorChanged("changed"), fs.EditorClose())
    assert state.drafts[0].note == "changed"
    assert state.editor is None


def test_blank_note_text_removes_the_note() -> None:
    state = run(
        form(question("a")),
        fs.OpenOptionNote(),
        *type_custom("note"),
        fs.OpenQuestionNote(),
        *type_custom("q note"),
    )
    state = run(state, fs.OpenOptionNote(), *type_custom(" "), fs.OpenQuestionNote())
    state = run(state, fs.EditorChanged(""), fs.EditorClose())
    assert state.drafts[0] == EMPTY_DRAFT


def test_note_images_stay_with_their_editor() -> None:
    state = run(form(question("a")), fs.OpenOptionNote())
    assert state.editor is not None
    serial = state.editor.serial
    state = run(state, fs.AttachImage(IMG_A, serial), fs.AttachImage(IMG_B, serial))
    state = run(state, fs.EditorClose(), fs.OpenOptionNote())
    assert state.editor is not None and state.editor.images == (IMG_A, IMG_B)
    state = run(state, fs.EditorClose(), fs.OpenQuestionNote())
    assert state.editor is not None and state.editor.images == ()
    assert state.drafts[0].option_note_images == {"a1": (IMG_A, IMG_B)}
    assert state.drafts[0].option_notes == {}


def test_notes_never_count_as_answers() -> None:
    state = run(
        form(question("a")),
        fs.OpenQuestionNote(),
        *type_custom("q"),
        fs.OpenOptionNote(),
        *type_custom("o"),
    )
    assert not state.drafts[0].is_answered
    assert fs.answered_count(state) == 0


def test_option_note_on_the_custom_row_is_the_question_note_and_ignored_on_review() -> None:
    state = run(form(question("a", options=1)), fs.NextOption(), fs.EditorClose())
    # A typed answer has no option value to note: ``n`` there opens the question's note.
    assert run(state, fs.OpenOptionNote()) == run(state, fs.OpenQuestionNote())
    assert run(state, fs.OpenOptionNote()).editor is not None
    review = run(state, fs.SelectTab(1))
    assert run(review, fs.OpenOptionNote()) == review
    assert run(review, fs.OpenQuestionNote()) == review


# --------------------------------------------------------------------------------------------
# Editors in general
# --------------------------------------------------------------------------------------------


def test_editor_move_option_when_empty_closes_and_moves() -> None:
    state = run(form(question("a", options=2)), fs.NextOption(), fs.NextOption())
    assert state.editor is not None
    state = run(state, fs.EditorMoveOption(-1))
    assert state.editor is None
    assert state.cursors == (1,)


def test_editor_move_actions_are_ignored_while_editor_has_text() -> None:
    state = run(form(question("a", options=2), question("b")), fs.OpenQuestionNote())
    state = run(state, fs.EditorChanged("typing"))
    assert run(state, fs.EditorMoveOption(1)) == state
    assert run(state, fs.EditorMoveTab(1)) == state


def test_editor_move_tab_when_empty_closes_and_moves_tab() -> None:
    state = run(form(question("a"), question("b")), fs.OpenQuestionNote(), fs.EditorMoveTab(-1))
    assert state.editor is None
    assert state.tab == 2


def test_editor_move_after_deleting_prefilled_text_clears_it() -> None:
    state = run(form(question("a"), question("b")), fs.OpenQuestionNote(), *type_custom("x"))
    state = run(state, fs.OpenQuestionNote(), fs.EditorChanged(""), fs.EditorMoveTab(1))
    assert state.drafts[0].note == ""
    assert state.tab == 1


def test_click_while_editor_open_saves_the_draft_then_applies() -> None:
    state = run(form(question("a", "multi")), fs.OpenQuestionNote(), fs.EditorChanged("n"))
    state = run(state, fs.Number(2))
    assert state.editor is None
    assert state.drafts[0].note == "n"
    assert state.drafts[0].selected == (1,)


def test_late_image_cannot_attach_to_another_editor() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote())
    assert state.editor is not None
    old_serial = state.editor.serial
    state = run(state, fs.EditorClose(), fs.OpenOptionNote())
    assert run(state, fs.AttachImage(IMG_A, old_serial)) == state
    closed = run(state, fs.EditorClose())
    assert run(closed, fs.AttachImage(IMG_A, old_serial)) == closed


def test_remove_last_image_drops_only_the_last_one() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote())
    assert state.editor is not None
    serial = state.editor.serial
    state = run(state, fs.AttachImage(IMG_A, serial), fs.AttachImage(IMG_B, serial))
    state = run(state, fs.EditorChanged("text"), fs.RemoveLastImage())
    assert state.editor is not None
    assert state.editor.images == (IMG_A,)
    assert state.editor.text == "text"


def test_editor_text_is_not_saved_until_close_or_submit() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote(), fs.EditorChanged("draft"))
    assert state.drafts[0] == EMPTY_DRAFT
    assert state.editor is not None and state.editor.text == "draft"
    assert fs.is_dirty(state)


# --------------------------------------------------------------------------------------------
# Skip
# --------------------------------------------------------------------------------------------


def test_skip_removes_answer_notes_images_and_advances() -> None:
    state = run(form(question("a"), question("b")), fs.Number(4))
    assert state.editor is not None
    state = run(state, fs.AttachImage(IMG_A, state.editor.serial), fs.EditorChanged("c"))
    state = run(state, fs.EditorClose(), fs.OpenQuestionNote(), *type_custom("note"))
    state = run(state, fs.PreviousOption(), fs.OpenOptionNote(), *type_custom("o"), fs.Skip())
    assert state.drafts[0] == Draft(skipped=True)
    assert state.tab == 1


def test_skip_is_ignored_on_review_and_in_editors() -> None:
    review = run(form(question("a")), fs.SelectTab(1))
    assert run(review, fs.Skip()) == review
    editing = run(form(question("a")), fs.OpenQuestionNote(), fs.EditorChanged("D"))
    assert run(editing, fs.Skip()) == editing


def test_answering_a_skipped_question_unskips_it() -> None:
    state = run(form(question("a"), question("b", "multi")), fs.Skip(), fs.Skip(), fs.SelectTab(0))
    state = run(state, fs.Toggle())
    assert state.drafts[0] == Draft(selected=(0,))
    state = run(state, fs.SelectTab(1), fs.Number(2))
    assert state.drafts[1] == Draft(selected=(1,))


def test_noting_a_skipped_question_unskips_it_but_blank_keeps_it_skipped() -> None:
    state = run(form(question("a")), fs.Skip(), fs.SelectTab(0), fs.OpenQuestionNote())
    assert state.editor is not None and state.editor.text == ""
    assert run(state, fs.EditorSubmit()).drafts[0] == Draft(skipped=True)
    state = run(state, *type_custom("why"))
    assert state.drafts[0] == Draft(note="why")


def test_landing_on_custom_row_of_skipped_question_keeps_it_skipped() -> None:
    state = run(form(question("a", options=1)), fs.Skip(), fs.SelectTab(0), fs.NextOption())
    assert state.editor is not None
    state = run(state, fs.EditorMoveOption(-1))
    assert state.drafts[0] == Draft(skipped=True)


def test_skipping_every_question_still_requires_explicit_submit() -> None:
    state = form(question("a"), question("b"), auto_submit_when_answered_without_notes=True)
    state = run(state, fs.Skip(), fs.Skip())
    assert state.tab == 2
    assert state.outcome is None
    state = run(state, fs.Confirm())
    assert state.outcome == fs.Outcome("submitted")
    assert state.drafts == (Draft(skipped=True),) * 2


# --------------------------------------------------------------------------------------------
# Question type changes
# --------------------------------------------------------------------------------------------


def test_single_to_multi_changes_at_once_and_keeps_the_answer() -> None:
    state = run(form(question("a")), fs.Toggle(), fs.ChangeQuestionType())
    assert state.types == ("multi",)
    assert state.drafts[0].selected == (0,)
    assert state.type_notice == fs.TypeChanged(0, "single", "multi")


def test_multi_to_single_with_two_choices_needs_second_press() -> None:
    state = run(form(question("a", "multi", options=2)), fs.Number(1), fs.Number(3))
    state = run(state, *type_custom("mine"), fs.OpenQuestionNote(), *type_custom("n"))
    state = run(state, fs.ChangeQuestionType())
    assert state.types == ("multi",)
    assert state.pending_type_change == 0
    state = run(state, fs.ChangeQuestionType())
    assert state.types == ("single",)
    assert state.pending_type_change is None
    draft = state.drafts[0]
    assert draft.selected == ()
    assert draft.custom_selected  # the saved custom answer stays the answer (issue 10, item 10)
    assert draft.custom_text == "mine"
    assert draft.note == "n"
    result = build_result(state.params, state.drafts, presented_types=state.types)
    assert result.answers["a"].custom_text == "mine"
    assert result.answers["a"].values == ("mine",)  # the custom answer, no option


def test_multi_to_single_without_a_custom_answer_clears_every_choice() -> None:
    state = run(form(question("a", "multi", options=3)), fs.Number(1), fs.Number(2))
    state = run(state, fs.ChangeQuestionType(), fs.ChangeQuestionType())
    assert state.types == ("single",)
    assert state.drafts[0].selected == () and not state.drafts[0].custom_selected


def test_pending_type_change_is_cleared_by_any_other_command() -> None:
    state = run(form(question("a", "multi", options=3)), fs.Number(1), fs.Number(2))
    state = run(state, fs.ChangeQuestionType(), fs.NextOption())
    assert state.pending_type_change is None
    state = run(state, fs.ChangeQuestionType())
    assert state.types == ("multi",)
    assert state.pending_type_change == 0


def test_multi_to_single_with_one_choice_switches_at_once_keeping_it() -> None:
    state = run(form(question("a", "multi")), fs.Number(2), fs.ChangeQuestionType())
    assert state.types == ("single",)
    assert state.drafts[0].selected == (1,)


def test_live_type_change_changes_what_keys_do() -> None:
    state = run(form(question("a"), question("b")), fs.ChangeQuestionType(), fs.Number(1))
    assert state.tab == 0  # now multi: a number toggles without advancing
    assert state.drafts[0].selected == (0,)


# --------------------------------------------------------------------------------------------
# Review
# --------------------------------------------------------------------------------------------


def test_review_digit_one_needs_second_press_to_submit() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.Number(1))
    assert state.pending_review == "submit"
    assert state.outcome is None
    assert run(state, fs.Number(1)).outcome == fs.Outcome("submitted")


def test_review_digit_two_needs_second_press_to_cancel() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.Number(2))
    assert state.pending_review == "cancel"
    assert state.review_cursor == 1
    assert run(state, fs.Number(2)).outcome == fs.Outcome("cancelled")


def test_review_pending_action_is_disarmed_by_other_commands() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.Number(1))
    assert run(state, fs.NextOption()).pending_review is None
    assert run(state, fs.Number(5)).pending_review is None
    switched = run(state, fs.Number(2))
    assert switched.pending_review == "cancel"
    assert switched.outcome is None


def test_review_other_digits_are_ignored() -> None:
    state = run(form(question("a")), fs.SelectTab(1))
    for digit in (3, 4, 9):
        assert run(state, fs.Number(digit)) == state


def test_review_digits_fire_at_once_without_double_press() -> None:
    state = run(form(question("a"), double_press_review_shortcuts=False), fs.SelectTab(1))
    assert run(state, fs.Number(1)).outcome == fs.Outcome("submitted")
    assert run(state, fs.Number(2)).outcome == fs.Outcome("cancelled")


def test_review_click_keeps_double_press_safeguard() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.ReviewAction("cancel"))
    assert state.pending_review == "cancel" and state.outcome is None
    assert run(state, fs.ReviewAction("cancel")).outcome == fs.Outcome("cancelled")
    armed_by_key = run(state, fs.Number(1))
    assert run(armed_by_key, fs.ReviewAction("submit")).outcome == fs.Outcome("submitted")


def test_review_click_is_ignored_on_question_tabs() -> None:
    state = form(question("a"))
    assert run(state, fs.ReviewAction("submit")) == state


def test_review_enter_fires_highlighted_action_at_once() -> None:
    state = run(form(question("a")), fs.SelectTab(1))
    assert run(state, fs.Confirm()).outcome == fs.Outcome("submitted")
    assert run(state, fs.NextOption(), fs.Confirm()).outcome == fs.Outcome("cancelled")


def test_submit_is_never_blocked_by_unanswered_questions() -> None:
    state = run(form(question("a"), question("b")), fs.SelectTab(2), fs.Number(1), fs.Number(1))
    assert state.outcome == fs.Outcome("submitted")
    assert fs.answered_count(state) == 0


def test_disabling_double_press_disarms_pending_review() -> None:
    state = run(form(question("a")), fs.SelectTab(1), fs.Number(1))
    state = run(state, fs.SettingsChanged(fs.FormSettings(double_press_review_shortcuts=False)))
    assert state.pending_review is None
    assert state.outcome is None


# --------------------------------------------------------------------------------------------
# Cancel and dismiss
# --------------------------------------------------------------------------------------------


def test_cancel_of_clean_form_cancels_at_once() -> None:
    state = run(form(question("a")), fs.Cancel())
    assert state.outcome == fs.Outcome("cancelled")
    assert state.outcome.cancelled


def test_dismiss_of_clean_form_dismisses_at_once() -> None:
    state = run(form(question("a")), fs.Dismiss())
    assert state.outcome == fs.Outcome("dismissed")
    assert state.outcome.cancelled


def test_dirty_cancel_needs_the_same_action_twice() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Cancel())
    assert state.outcome is None
    assert state.pending_dismiss == "cancel"
    assert run(state, fs.Cancel()).outcome == fs.Outcome("cancelled")
    other = run(state, fs.Dismiss())
    assert other.outcome is None and other.pending_dismiss == "dismiss"
    assert run(other, fs.Dismiss()).outcome == fs.Outcome("dismissed")


def test_dirty_warning_stays_until_the_tab_changes() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Cancel())
    state = run(state, fs.NextOption(), fs.Toggle(), fs.ChangeQuestionType())
    assert state.pending_dismiss == "cancel"
    assert run(state, fs.Cancel()).outcome == fs.Outcome("cancelled")
    state = run(state, fs.NextTab())
    assert state.pending_dismiss is None
    assert run(state, fs.Cancel()).outcome is None


def test_dirty_confirmation_off_cancels_at_once() -> None:
    state = form(question("a"), question("b"), confirm_dismiss_when_dirty=False)
    assert run(state, fs.Number(1), fs.Cancel()).outcome == fs.Outcome("cancelled")


def test_disabling_dirty_confirmation_disarms_the_warning() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Dismiss())
    state = run(state, fs.SettingsChanged(fs.FormSettings(confirm_dismiss_when_dirty=False)))
    assert state.pending_dismiss is None


def test_dismiss_from_editor_discards_the_unsaved_draft() -> None:
    state = run(form(question("a"), confirm_dismiss_when_dirty=False), fs.OpenQuestionNote())
    state = run(state, fs.EditorChanged("lost on purpose"), fs.Dismiss())
    assert state.outcome == fs.Outcome("dismissed")
    assert state.drafts[0] == EMPTY_DRAFT
    assert state.editor is None


def test_dirty_dismiss_from_editor_needs_second_press_and_keeps_editor() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote(), fs.EditorChanged("typed"))
    state = run(state, fs.Dismiss())
    assert state.outcome is None
    assert state.editor is not None and state.editor.text == "typed"
    assert run(state, fs.Dismiss()).outcome == fs.Outcome("dismissed")


def test_empty_editor_on_untouched_form_dismisses_at_once() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote(), fs.Dismiss())
    assert state.outcome == fs.Outcome("dismissed")


def test_cancel_is_ignored_while_an_editor_is_open() -> None:
    state = run(form(question("a")), fs.OpenQuestionNote(), fs.EditorChanged("x"))
    assert run(state, fs.Cancel()) == state


def test_skipped_question_makes_the_form_dirty() -> None:
    state = run(form(question("a"), question("b")), fs.Skip())
    assert fs.is_dirty(state)
    assert run(state, fs.Cancel()).outcome is None


# --------------------------------------------------------------------------------------------
# Auto-submit
# --------------------------------------------------------------------------------------------


def test_auto_submit_when_last_answer_reaches_review() -> None:
    state = form(question("a"), question("b"), auto_submit_when_answered_without_notes=True)
    state, out = fs.reduce(run(state, fs.Number(1)), fs.Number(2))
    assert state.outcome == fs.Outcome("submitted")
    assert out == (fs.Completed(fs.Outcome("submitted")),)


def test_auto_submit_waits_while_notes_exist() -> None:
    state = form(question("a"), auto_submit_when_answered_without_notes=True)
    state = run(state, fs.NextOption(), fs.OpenOptionNote(), *type_custom("hm"), fs.Number(1))
    assert state.tab == 1
    assert state.outcome is None


def test_auto_submit_waits_for_unanswered_questions() -> None:
    state = form(question("a"), question("b"), auto_submit_when_answered_without_notes=True)
    state = run(state, fs.Number(1), fs.SelectTab(2))
    assert state.outcome is None


def test_auto_submit_does_not_fire_on_a_multi_toggle_before_review() -> None:
    state = form(question("a", "multi"), auto_submit_when_answered_without_notes=True)
    state = run(state, fs.Number(1))
    assert state.outcome is None
    assert run(state, fs.Number(2), fs.Confirm()).outcome == fs.Outcome("submitted")


def test_enabling_auto_submit_on_review_with_everything_answered_submits() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Number(1))
    assert state.tab == 2 and state.outcome is None
    on = fs.FormSettings(auto_submit_when_answered_without_notes=True)
    state, out = fs.reduce(state, fs.SettingsChanged(on))
    assert state.outcome == fs.Outcome("submitted")
    assert out == (fs.Completed(fs.Outcome("submitted")),)


def test_enabling_auto_submit_elsewhere_does_not_submit() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1), fs.Number(1), fs.SelectTab(0))
    on = fs.FormSettings(auto_submit_when_answered_without_notes=True)
    assert run(state, fs.SettingsChanged(on)).outcome is None


# --------------------------------------------------------------------------------------------
# Outcome, remote answers, effects
# --------------------------------------------------------------------------------------------


def test_commands_after_the_outcome_change_nothing() -> None:
    done = run(form(question("a")), fs.Cancel())
    for command in (fs.Number(1), fs.Confirm(), fs.SubmitAnswers((Draft(selected=(0,)),))):
        assert fs.reduce(done, command) == (done, ())


def test_submit_answers_replaces_drafts_and_submits() -> None:
    state = run(form(question("a"), question("b")), fs.Number(2), fs.OpenQuestionNote())
    remote = (Draft(selected=(2,)), Draft(skipped=True))
    state, out = fs.reduce(state, fs.SubmitAnswers(remote))
    assert state.drafts == remote
    assert state.editor is None
    assert out == (fs.Completed(fs.Outcome("submitted")),)
    assert fs.submit_with(form(question("a")), [Draft(note="n")]).drafts == (Draft(note="n"),)


def test_submit_answers_needs_one_draft_per_question() -> None:
    with pytest.raises(ValueError, match="needs 2 drafts"):
        fs.reduce(form(question("a"), question("b")), fs.SubmitAnswers((EMPTY_DRAFT,)))


def test_external_cancel_skips_the_dirty_confirmation() -> None:
    state = run(form(question("a"), question("b")), fs.Number(1))
    assert fs.cancel_now(state).outcome == fs.Outcome("cancelled")
    assert run(state, fs.ExternalCancel()).outcome == fs.Outcome("cancelled")


def test_draft_changed_is_emitted_for_changes_only() -> None:
    state = form(question("a"), question("b"))
    assert effects(state, fs.Number(1)) == [fs.DraftChanged()]
    assert effects(state, fs.NextOption()) == [fs.DraftChanged()]
    assert effects(state, fs.PreviousOption()) == []
    assert effects(state, fs.OpenQuestionNote(), fs.EditorChanged("a")) == [fs.DraftChanged()] * 2
    assert effects(state, fs.SettingsChanged(fs.FormSettings())) == []


# --------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------


def test_snapshot_restores_drafts_position_and_open_editor() -> None:
    params = AskParams(questions=[question("a", "multi"), question("b")])
    state = fs.new_form(params)
    state = run(
        state,
        fs.Number(1),
        fs.Number(3),
        fs.ChangeQuestionType(),
        fs.Number(4),
        *type_custom("mine"),
        fs.NextTab(),
        fs.NextOption(),
        fs.OpenOptionNote(),
    )
    assert state.editor is not None
    state = run(state, fs.AttachImage(IMG_A, state.editor.serial), fs.EditorChanged("half"))
    data = json.loads(json.dumps(fs.state_to_json(state)))
    restored = fs.state_from_json(params, data, state.settings)
    assert restored == attrs.evolve(state, pending_type_change=None, type_notice=None)
    assert restored.editor == fs.EditorState(
        kind="option_note",
        question=1,
        option_value="b2",
        text="half",
        images=(IMG_A,),
        serial=state.editor.serial,
    )


def test_snapshot_leaves_out_pending_confirmations() -> None:
    params = AskParams(questions=[question("a")])
    state = run(fs.new_form(params), fs.Number(1), fs.Cancel(), fs.Number(1))
    assert state.pending_review == "submit" and state.pending_dismiss == "cancel"
    restored = fs.state_from_json(params, fs.state_to_json(state))
    assert restored.pending_review is None
    assert restored.pending_dismiss is None
    assert restored.drafts == state.drafts


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 99}, "unsupported version"),
        ({"drafts": []}, "draft count"),
        ({"types": ["single", "preview"]}, "question types"),
        ({"tab": 5}, "tab"),
        ({"cursors": [0, 9]}, "cursors"),
        ({"drafts": [{"selected": [0, 1]}, {}]}, "single-select question 0"),
        ({"drafts": [{"selected": [7]}, {}]}, "selection of question 0"),
        ({"drafts": [{"skipped": True, "note": "x"}, {}]}, "skipped question 0"),
        ({"drafts": [{"customSelected": True}, {}]}, "empty custom answer"),
        ({"editor": {"kind": "custom", "question": 1}}, "editor question"),
        (
            {"editor": {"kind": "option_note", "question": 0, "optionValue": "a2"}},
            "editor option",
        ),
        (
            {
                "editorsOpened": 1,
                "editor": {"kind": "note", "question": 0, "text": "", "images": [], "serial": 2},
            },
            "editor serial",
        ),
        ({"tab": None}, "malformed"),
    ],
)
def test_snapshot_that_does_not_fit_is_rejected(change: dict[str, object], message: str) -> None:
    params = AskParams(questions=[question("a"), question("b")])
    data = {**fs.state_to_json(fs.new_form(params)), **change}
    with pytest.raises(ValueError, match=message):
        fs.state_from_json(params, data)


def test_esc_in_a_background_form_asks_to_defer_instead_of_cancelling() -> None:
    from pi_agent_ask.form.types import AskParams, Option, Question

    params = AskParams(questions=(Question("a", "Q1", "P?", "single", (Option("x", "X"),)),))
    state = fs.new_form(params, background=True)
    state, _ = fs.reduce(state, fs.Number(1))
    after, effects = fs.reduce(state, fs.Cancel())
    assert effects == (fs.DeferRequested(),)
    assert after == state and after.outcome is None
    # Review's Cancel action and Ctrl+C still end a background form.
    review = fs.reduce(after, fs.SelectTab(1))[0]
    review = fs.reduce(fs.reduce(review, fs.ReviewAction("cancel"))[0], fs.ReviewAction("cancel"))[
        0
    ]
    assert review.outcome == fs.Outcome("cancelled")
    dismissed = fs.reduce(fs.reduce(after, fs.Dismiss())[0], fs.Dismiss())[0]
    assert dismissed.outcome == fs.Outcome("dismissed")
