"""Property tests: the form state machine keeps its invariants under any command sequence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import (
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Option,
    Question,
)


@st.composite
def ask_params(draw: st.DrawFn) -> AskParams:
    questions = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(QUESTION_TYPES))
        presented = draw(st.sampled_from([None, "multi"])) if kind == "single" else None
        count = draw(st.integers(1, 9))
        questions.append(
            Question(
                id=f"q{i}",
                label=f"Q{i + 1}",
                prompt=f"Question {i + 1}?",
                type=kind,
                options=[Option(value=f"v{j}", label=f"Option {j}") for j in range(count)],
                presented_type=presented,
            )
        )
    return AskParams(questions=questions, title=draw(st.sampled_from([None, "Title"])))


settings = st.builds(fs.FormSettings, st.booleans(), st.booleans(), st.booleans())
images = st.builds(
    Image,
    id=st.sampled_from(["i1", "i2", "i3"]),
    mime_type=st.just("image/png"),
    data=st.just("iVBORw0KGgo="),
)

# ("attach", image, age): attach to the editor opened ``age`` openings ago (0 = the current one),
# resolved against the state when the step runs so most reads target a real editor.
attach = st.tuples(st.just("attach"), images, st.integers(0, 2))
# ("type", opener, text, closer): open an editor, type, and save -- three commands in a row
# that random sequences would seldom produce.
texts = st.sampled_from(["", " ", "a", "text", "D", "two words"])
typing = st.tuples(
    st.just("type"),
    st.sampled_from(
        [fs.OpenQuestionNote(), fs.OpenOptionNote(), fs.Toggle(), fs.Confirm(), "custom row"]
    ),
    texts,
    st.sampled_from([fs.EditorSubmit(), fs.EditorClose()]),
)

_common = st.one_of(
    st.sampled_from(
        [
            fs.NextTab(),
            fs.PreviousTab(),
            fs.NextOption(),
            fs.PreviousOption(),
            fs.Confirm(),
            fs.Toggle(),
            fs.ChangeQuestionType(),
            fs.OpenOptionNote(),
            fs.OpenQuestionNote(),
            fs.Skip(),
            fs.EditorSubmit(),
            fs.EditorClose(),
            fs.RemoveLastImage(),
        ]
    ),
    st.builds(fs.SelectTab, st.integers(-1, 7)),
    st.builds(fs.Number, st.integers(0, 11)),
    st.builds(fs.EditorChanged, texts),
    st.builds(fs.EditorMoveOption, st.sampled_from([-1, 1])),
    st.builds(fs.EditorMoveTab, st.sampled_from([-1, 1])),
    st.builds(fs.ReviewAction, st.sampled_from(fs.REVIEW_ACTIONS)),
    st.builds(fs.SettingsChanged, settings),
    attach,
    typing,
    typing,
    # Two choices, then the type key: arms the multi -> single confirmation on multi-select.
    st.just(("two choices and t",)),
)
# Cancel and Dismiss end most flows at once, so they are rare: long sequences reach the
# interesting states (notes, custom answers, armed confirmations) before the end.
_ending = st.sampled_from([fs.Cancel(), fs.Dismiss()])
commands = st.sampled_from([_common] * 24 + [_ending]).flatmap(lambda strategy: strategy)


def flatten(steps: list[Any]) -> Iterator[Any]:
    """The commands of the generated steps, in order; ``attach`` stays symbolic (see resolve)."""
    for step in steps:
        if isinstance(step, tuple) and step[0] == "type":
            _, opener, text, closer = step
            yield from (opener, fs.EditorChanged(text), closer)
        elif isinstance(step, tuple) and step[0] == "two choices and t":
            yield from (fs.Number(1), fs.Number(2), fs.ChangeQuestionType())
        else:
            yield step


def resolve(state: fs.FormState, item: Any) -> fs.Command:
    if item == "custom row":
        # A click on the current question's custom row (on Review: digit 3, which it ignores).
        row = fs.custom_row(state, state.tab) if state.tab < state.review_tab else 2
        return fs.Number(row + 1)
    if isinstance(item, tuple):
        _, image, age = item
        return fs.AttachImage(image, state.editors_opened - age)
    return item


def check_invariants(state: fs.FormState) -> None:
    questions = state.params.questions
    n = len(questions)
    assert len(state.drafts) == len(state.types) == len(state.cursors) == n
    assert 0 <= state.tab <= n
    assert 0 <= state.review_cursor < len(fs.REVIEW_ACTIONS)
    for question, kind, draft, cursor in zip(
        questions, state.types, state.drafts, state.cursors, strict=True
    ):
        count = len(question.options)
        assert 0 <= cursor <= count
        assert list(draft.selected) == sorted(set(draft.selected))
        assert all(0 <= i < count for i in draft.selected)
        if kind == "single":
            assert len(draft.selected) <= 1
            assert not (draft.selected and draft.custom_selected)
        if draft.custom_selected:
            assert fs.has_custom_content(draft)
        if draft.skipped:
            assert draft == Draft(skipped=True)
        values = {option.value for option in question.options}
        assert set(draft.option_notes) <= values
        assert set(draft.option_note_images) <= values
        assert all(text.strip() for text in draft.option_notes.values())
        assert all(draft.option_note_images.values())
    editor = state.editor
    if editor is not None:
        assert editor.question == state.tab < n
        assert 1 <= editor.serial <= state.editors_opened
        if editor.kind == "option_note":
            row = state.cursors[state.tab]
            assert editor.option_value == questions[state.tab].options[row].value
        else:
            assert editor.option_value is None
    if state.pending_review is not None:
        assert state.tab == n
        assert state.settings.double_press_review_shortcuts
    if state.pending_type_change is not None:
        assert state.pending_type_change == state.tab
        assert state.types[state.tab] == "multi"
    if state.pending_dismiss is not None:
        assert state.settings.confirm_dismiss_when_dirty
    if state.outcome is None:
        # Auto-submit never leaves a form sitting in its own trigger condition.
        assert not (
            state.settings.auto_submit_when_answered_without_notes
            and state.tab == n
            and editor is None
            and all(d.is_answered and not d.has_notes for d in state.drafts)
        )


def check_submit_reason(before: fs.FormState, command: fs.Command, after: fs.FormState) -> None:
    """A submission is the person's explicit Review action or a justified auto-submit."""
    explicit = before.on_review and isinstance(command, fs.Confirm | fs.Number | fs.ReviewAction)
    auto = (
        after.settings.auto_submit_when_answered_without_notes
        and after.on_review
        and after.editor is None
        and all(d.is_answered and not d.has_notes for d in after.drafts)
    )
    assert explicit or auto


def check_roundtrip(state: fs.FormState) -> None:
    data = json.loads(json.dumps(fs.state_to_json(state)))
    restored = fs.state_from_json(state.params, data, state.settings)
    # Documented as not journaled: pending confirmations, the type notice, the outcome.
    expected = attrs.evolve(
        state,
        pending_review=None,
        pending_type_change=None,
        pending_dismiss=None,
        type_notice=None,
        outcome=None,
    )
    assert restored == expected


@given(ask_params(), settings, st.lists(commands, min_size=10, max_size=60))
def test_invariants_hold_after_every_step(
    params: AskParams, initial: fs.FormSettings, steps: list[Any]
) -> None:
    state = fs.new_form(params, initial)
    check_invariants(state)
    for item in flatten(steps):
        command = resolve(state, item)
        before = state
        state, effects = fs.reduce(state, command)
        if before.outcome is not None:
            assert state is before
            assert effects == ()
            continue
        check_invariants(state)
        check_roundtrip(state)
        if state.outcome is not None:
            assert effects == (fs.Completed(state.outcome),)
            if state.outcome.kind == "submitted":
                check_submit_reason(before, command, state)
        else:
            assert all(isinstance(effect, fs.DraftChanged) for effect in effects)
            if fs.state_to_json(before) != fs.state_to_json(state):
                assert effects == (fs.DraftChanged(),)


def rebuilt(state: fs.FormState) -> fs.FormState:
    """An equal state that shares no object with ``state`` but its params: every draft, tuple
    and record built again by its constructor."""

    def draft(d: Draft) -> Draft:
        return Draft(**{field.name: getattr(d, field.name) for field in attrs.fields(Draft)})

    editor = state.editor
    return fs.FormState(
        params=state.params,
        types=(*state.types,),
        drafts=tuple([draft(d) for d in state.drafts]),
        cursors=(*state.cursors,),
        tab=state.tab,
        review_cursor=state.review_cursor,
        editor=None if editor is None else attrs.evolve(editor, images=list(editor.images)),
        editors_opened=state.editors_opened,
        pending_type_change=state.pending_type_change,
        pending_review=state.pending_review,
        pending_dismiss=state.pending_dismiss,
        type_notice=None if state.type_notice is None else attrs.evolve(state.type_notice),
        settings=attrs.evolve(state.settings),
        outcome=None if state.outcome is None else attrs.evolve(state.outcome),
        background=state.background,
    )


@given(ask_params(), settings, st.lists(commands, min_size=10, max_size=60))
def test_no_output_depends_on_what_states_share(
    params: AskParams, initial: fs.FormSettings, steps: list[Any]
) -> None:
    # The reducer shares every part a command does not touch. Sharing must never show: the
    # same command on an equal state built from fresh objects gives an equal state and the same
    # effects, and a step never changes the state it started from.
    state = fs.new_form(params, initial)
    for item in flatten(steps):
        command = resolve(state, item)
        fresh = rebuilt(state)
        kept = rebuilt(state)
        assert fresh == state == kept
        new, effects = fs.reduce(state, command)
        assert state == kept
        assert all(d == k for d, k in zip(state.drafts, kept.drafts, strict=True))
        from_fresh, fresh_effects = fs.reduce(fresh, command)
        assert from_fresh == new
        assert fresh_effects == effects
        assert fs.state_to_json(from_fresh) == fs.state_to_json(new)
        state = new


@given(ask_params(), st.lists(commands, max_size=40))
def test_remote_answers_always_submit_the_given_drafts(params: AskParams, steps: list[Any]) -> None:
    state = fs.new_form(params, fs.FormSettings(auto_submit_when_answered_without_notes=False))
    for item in flatten(steps):
        state, _ = fs.reduce(state, resolve(state, item))
    if state.outcome is not None:
        return
    remote = tuple(Draft(note=f"remote {i}") for i in range(len(params.questions)))
    done, effects = fs.reduce(state, fs.SubmitAnswers(remote))
    assert done.drafts == remote
    assert done.editor is None
    assert effects == (fs.Completed(fs.Outcome("submitted")),)


@given(ask_params(), st.lists(commands, max_size=40))
def test_dismiss_twice_always_ends_the_flow(params: AskParams, steps: list[Any]) -> None:
    state = fs.new_form(params)
    for item in flatten(steps):
        state, _ = fs.reduce(state, resolve(state, item))
    if state.outcome is not None:
        return
    state, _ = fs.reduce(state, fs.Dismiss())
    state, _ = fs.reduce(state, fs.Dismiss())
    assert state.outcome == fs.Outcome("dismissed")
