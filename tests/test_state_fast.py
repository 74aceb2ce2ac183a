"""The form reducer's fast construction builds exactly what the constructors build.

``form/state.py`` builds states, drafts and editors without their attrs constructors
("Structural sharing", ``_editor``, ``_edit``). A builder that dropped, misnamed or reordered a
field, or skipped a converter's work, would give objects that compare, hash or journal
differently; these tests rebuild every object through its constructor and compare.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams, Draft, Image, Option, Question, frozen_mapping
from tests.test_state_properties import ask_params, commands, flatten, resolve, settings

IMAGE = Image(id="i1", mime_type="image/png", data="iVBORw0KGgo=")


def _names(cls: type) -> list[str]:
    return [field.name for field in attrs.fields(cls)]


def _same_as_constructed(value: Any) -> None:
    """``value`` equals, hashes and prints as its constructor's instance from its fields."""
    cls = type(value)
    fields = {name: getattr(value, name) for name in _names(cls)}
    built = cls(**fields)
    assert value == built and built == value
    assert hash(value) == hash(built)
    assert repr(value) == repr(built)
    if hasattr(value, "__dict__"):
        # Dict classes: the fast copies hold every field, in field order, and nothing else.
        assert list(vars(value)) == _names(cls)


@pytest.mark.parametrize(
    ("kind", "question", "option_value", "text", "images", "serial"),
    [
        ("custom", 0, None, "", (), 1),
        ("note", 2, None, "a note", (IMAGE,), 7),
        ("option_note", 1, "v1", " spaced ", (IMAGE, IMAGE), 3),
    ],
)
def test_an_editor_built_through_its_slots_is_the_constructors_editor(
    kind: fs.EditorKind,
    question: int,
    option_value: str | None,
    text: str,
    images: tuple[Image, ...],
    serial: int,
) -> None:
    fast = fs._editor(kind, question, option_value, text, images, serial)
    built = fs.EditorState(kind, question, option_value, text, images, serial)
    assert type(fast) is fs.EditorState
    assert fast == built and hash(fast) == hash(built) and repr(fast) == repr(built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.text = "changed"  # type: ignore[misc]
    assert fs._editor_with(fast, "other", ()) == attrs.evolve(built, text="other", images=())


@pytest.mark.parametrize(
    "changes",
    [
        {"selected": (2,)},
        {"selected": (0, 3), "custom_selected": False},
        {"note": "noted", "note_images": (IMAGE,)},
        {"custom_text": "mine", "custom_images": (IMAGE,), "custom_selected": True},
        {"option_notes": frozen_mapping({"v1": "x"})},
    ],
)
def test_an_edited_draft_is_the_evolved_draft_in_its_place(changes: dict[str, Any]) -> None:
    draft = Draft(selected=(1,), note="n", option_notes={"v0": "first"})
    drafts = (fs.new_form(_params()).drafts[0], draft, Draft(skipped=True))
    edited = fs._edit(drafts, 1, draft, **changes)
    assert edited == (drafts[0], attrs.evolve(draft, **changes), drafts[2])
    assert edited[0] is drafts[0] and edited[2] is drafts[2]  # the others are shared
    assert type(edited) is tuple
    _same_as_constructed(edited[1])
    assert draft == Draft(selected=(1,), note="n", option_notes={"v0": "first"})  # untouched


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize(
    "initial", [None, fs.FormSettings(auto_submit_when_answered_without_notes=True)]
)
def test_a_new_form_is_the_constructors_state_and_leaves_its_template_alone(
    background: bool, initial: fs.FormSettings | None
) -> None:
    """``new_form`` copies a template of the defaults; every field is filled in, in field
    order, and filling one form's fields never reaches the next form."""
    params = _params()
    state = fs.new_form(params, initial, background=background)
    _same_as_constructed(state)
    assert state == fs.FormState(
        params,
        ("single",),
        (Draft(),),
        (0,),
        settings=initial if initial is not None else fs.FormSettings(),
        background=background,
    )
    other = AskParams(questions=[Question("b", "B", "B?", "multi", [Option("x", "X")])] * 2)
    fresh = fs.new_form(other)
    assert (fresh.params, fresh.types, fresh.cursors) == (other, ("multi", "multi"), (0, 0))
    assert fresh.settings == fs.FormSettings() and fresh.background is False
    assert fs.new_form(params, initial, background=background) == state


def _params() -> AskParams:
    return AskParams(
        questions=[Question("a", "A", "A?", "single", [Option("v0", "V0"), Option("v1", "V1")])]
    )


@given(ask_params(), settings, st.lists(commands, max_size=40))
def test_every_state_draft_and_editor_is_what_the_constructors_build(
    params: AskParams, initial: fs.FormSettings, steps: list[Any]
) -> None:
    state = fs.new_form(params, initial)
    for item in flatten(steps):
        state, effects = fs.reduce(state, resolve(state, item))
        _same_as_constructed(state)
        for draft in state.drafts:
            assert type(draft) is Draft
            _same_as_constructed(draft)
            assert type(draft.selected) is tuple
        editor = state.editor
        if editor is not None:
            assert type(editor) is fs.EditorState and type(editor.images) is tuple
            _same_as_constructed(editor)
        assert type(state.drafts) is tuple and type(state.cursors) is tuple
        for effect in effects:
            _same_as_constructed(effect)


@given(ask_params(), settings, st.lists(commands, max_size=30), st.data())
def test_submit_with_is_the_reducers_submit_step(
    params: AskParams, initial: fs.FormSettings, steps: list[Any], data: st.DataObject
) -> None:
    """``submit_with`` (written out) is ``reduce(state, SubmitAnswers(drafts))`` from any state
    the reducer reaches: armed confirmations, open editors, finished forms."""
    state = fs.new_form(params, initial)
    drafts = [
        Draft(selected=(0,), note=data.draw(st.sampled_from(["", "n"]))) for _ in params.questions
    ]
    for item in [None, *flatten(steps)]:
        if item is not None:
            state, _ = fs.reduce(state, resolve(state, item))
        ours = fs.submit_with(state, drafts)
        theirs, _ = fs.reduce(state, fs.SubmitAnswers(tuple(drafts)))
        assert ours == theirs
        _same_as_constructed(ours)
        assert (ours is state) == (theirs is state)
    for review, change in (("submit", None), (None, 0), ("cancel", 0)):
        armed = attrs.evolve(
            fs.new_form(params, initial), pending_review=review, pending_type_change=change
        )
        ours = fs.submit_with(armed, drafts)
        assert ours == fs.reduce(armed, fs.SubmitAnswers(tuple(drafts)))[0]
        assert ours.pending_review is None and ours.pending_type_change is None
    with pytest.raises(ValueError, match="SubmitAnswers needs"):
        fs.submit_with(fs.new_form(params, initial), [*drafts, Draft()])
