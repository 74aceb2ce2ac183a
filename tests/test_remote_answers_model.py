"""``answers_from_remote`` against the plain implementation it replaced (kept here as the
model): the same message or the same drafts, field by field and type by type, for generated
answers of every shape, well formed or not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form.result import answers_from_remote
from pi_agent_ask.form.types import (
    EMPTY_DRAFT,
    QUESTION_TYPES,
    AskParams,
    Draft,
    Option,
    Question,
    QuestionType,
)


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def model_answers(
    params: AskParams,
    presented_types: Sequence[QuestionType] | None,
    answers: object,
    mode: object = "submit",
) -> tuple[Draft, ...] | str:
    if not isinstance(answers, Mapping):
        return "Answer response must include an answers object."
    if mode != "submit":
        return 'Answer mode must be "submit".'
    given_types = list(presented_types or ())
    presented = [
        given_types[i]
        if i < len(given_types) and given_types[i] in QUESTION_TYPES
        else q.effective_type
        for i, q in enumerate(params.questions)
    ]
    index_of = {q.id: i for i, q in enumerate(params.questions)}
    drafts = [EMPTY_DRAFT] * len(params.questions)
    for qid, entry in answers.items():
        position = index_of.get(qid) if isinstance(qid, str) else None
        if position is None:
            return f"Unknown question id {_quote(qid)}."
        draft = model_draft(params.questions[position], presented[position], entry)
        if isinstance(draft, str):
            return draft
        drafts[position] = draft
    return tuple(drafts)


def model_draft(question: Question, presented: QuestionType, entry: object) -> Draft | str:
    qid = _quote(question.id)
    if not isinstance(entry, Mapping):
        return f"Answer for question {qid} must be an object."
    selected: list[int] = []
    if "values" in entry:
        values = entry["values"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return f"Answer values for question {qid} must be strings."
        if len(set(values)) != len(values):
            return f"Answer values for question {qid} must be unique."
        if presented != "multi" and len(values) > 1:
            return f"Question {qid} accepts only one selected value."
        positions = {option.value: i for i, option in enumerate(question.options)}
        for value in values:
            if value not in positions:
                return f"Unknown option value {_quote(value)} for question {qid}."
            selected.append(positions[value])
    custom_text = ""
    if "customText" in entry:
        raw = entry["customText"]
        if not isinstance(raw, str):
            return f"Custom text for question {qid} must be a string."
        custom_text = raw.strip()
        if custom_text and selected and presented != "multi":
            return f"Question {qid} cannot combine a selected value and custom text."
    note = ""
    if "note" in entry:
        raw = entry["note"]
        if not isinstance(raw, str):
            return f"Note for question {qid} must be a string."
        note = raw.strip()
    option_notes: dict[str, str] = {}
    if "optionNotes" in entry:
        raw_notes = entry["optionNotes"]
        if not isinstance(raw_notes, Mapping) or not all(
            isinstance(v, str) for v in raw_notes.values()
        ):
            return f"Option notes for question {qid} must be string values."
        known = {option.value for option in question.options}
        for value, text in raw_notes.items():
            if value not in known:
                return f"Unknown option note value {_quote(value)} for question {qid}."
            if text.strip():
                option_notes[value] = text.strip()
    skipped = entry.get("skipped", False)
    if not isinstance(skipped, bool):
        return f"Skipped flag for question {qid} must be a boolean."
    if skipped:
        if selected or custom_text or note or option_notes:
            return f"Skipped question {qid} cannot carry answers or notes."
        return Draft(skipped=True)
    return Draft(
        selected=sorted(selected),
        custom_text=custom_text,
        custom_selected=bool(custom_text),
        note=note,
        option_notes=option_notes,
    )


# Few names, so ids and values collide (with each other and with duplicates in a form).
names = st.sampled_from(["a", "b", "c", 'q"1', "d\\e"])
texts = st.sampled_from(["", " ", "x", " y ", "z\n"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), texts, names)


@st.composite
def forms(draw: st.DrawFn) -> AskParams:
    questions = []
    # Up to 7 questions: both the short forms' search and the longer forms' map of ids.
    for number in range(draw(st.integers(1, 7))):
        values = draw(st.lists(names, min_size=0, max_size=4))  # duplicates allowed
        questions.append(
            Question(
                id=draw(names),
                label=f"Q{number}",
                prompt="?",
                type=draw(st.sampled_from(QUESTION_TYPES)),
                presented_type=draw(st.one_of(st.none(), st.sampled_from(QUESTION_TYPES))),
                options=[Option(value, value.upper()) for value in values],
            )
        )
    return AskParams(questions=questions)


value_lists = st.one_of(
    st.lists(names, max_size=3), st.lists(scalars, max_size=3), scalars, st.tuples(names)
)
entries = st.one_of(
    scalars,
    st.lists(names, max_size=2),
    st.fixed_dictionaries(
        {},
        optional={
            "values": value_lists,
            "customText": st.one_of(texts, scalars),
            "note": st.one_of(texts, scalars),
            "optionNotes": st.one_of(
                st.dictionaries(names, st.one_of(texts, scalars), max_size=3), scalars
            ),
            "skipped": st.one_of(st.booleans(), scalars),
        },
    ),
)
answer_maps = st.one_of(
    st.dictionaries(st.one_of(names, st.integers(0, 2)), entries, max_size=4),
    scalars,
    st.lists(names, max_size=2),
)
presented_lists = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from(QUESTION_TYPES), st.just("other")), max_size=8),
    st.lists(st.sampled_from(QUESTION_TYPES), max_size=8).map(tuple),
)


def _fields(draft: Draft) -> list[tuple[str, type, Any]]:
    return [
        (field.name, type(getattr(draft, field.name)), getattr(draft, field.name))
        for field in attrs.fields(Draft)
    ]


@st.composite
def well_formed(draw: st.DrawFn, params: AskParams) -> dict[str, Any]:
    """Answers an honest client might send for ``params``: known ids, known values."""
    out: dict[str, Any] = {}
    for question in draw(st.lists(st.sampled_from(params.questions), max_size=3)):
        known = [option.value for option in question.options] or ["a"]
        entry: dict[str, Any] = {"values": draw(st.lists(st.sampled_from(known), max_size=2))}
        if draw(st.booleans()):
            entry["optionNotes"] = {draw(st.sampled_from(known)): draw(texts)}
        if draw(st.booleans()):
            entry["customText"] = draw(texts)
        out[question.id] = entry
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[AskParams, Any, Any, str]:
    params = draw(forms())
    answers = draw(st.one_of(well_formed(params), answer_maps))
    presented = draw(presented_lists)
    return params, presented, answers, draw(st.sampled_from(["submit", "submit", "other"]))


@given(cases())
def test_remote_answers_are_the_models(case: tuple[AskParams, Any, Any, str]) -> None:
    params, presented, answers, mode = case
    ours = answers_from_remote(params, presented, answers, mode=mode)
    model = model_answers(params, presented, answers, mode)
    if isinstance(model, str):
        assert ours == model
        return
    assert not isinstance(ours, str), ours
    assert type(ours) is tuple
    assert len(ours) == len(model)
    for mine, theirs in zip(ours, model, strict=True):
        assert mine == theirs
        assert type(mine) is Draft
        assert _fields(mine) == _fields(theirs)


@st.composite
def option_answers(draw: st.DrawFn) -> tuple[AskParams, dict[str, Any]]:
    """A form and answers that each pick options its question accepts, sometimes with option
    notes, a note or custom text (blank or not): every draft shape an answer makes."""
    params = draw(forms())
    out: dict[str, Any] = {}
    # An id names the last question with it (forms may repeat ids).
    for question in {question.id: question for question in params.questions}.values():
        known = [option.value for option in question.options]
        if not known or draw(st.booleans()):
            continue
        most = 1 if question.effective_type == "single" else len(set(known))
        chosen = draw(st.lists(st.sampled_from(known), unique=True, max_size=most))
        entry: dict[str, Any] = {"values": chosen}
        if draw(st.booleans()):
            entry["optionNotes"] = draw(st.dictionaries(st.sampled_from(known), texts, max_size=2))
        if draw(st.booleans()):
            entry["note"] = draw(texts)
        if not chosen and draw(st.booleans()):
            entry["customText"] = draw(texts)
        out[question.id] = entry
    return params, out


@given(option_answers())
def test_answers_that_pick_options_make_the_models_drafts(
    case: tuple[AskParams, dict[str, Any]],
) -> None:
    """Answers of the shape honest clients send, each with or without notes (the drafts of
    options alone as well)."""
    params, answers = case
    ours = answers_from_remote(params, None, answers)
    model = model_answers(params, None, answers)
    assert not isinstance(ours, str) and not isinstance(model, str), (ours, model)
    for mine, theirs in zip(ours, model, strict=True):
        assert mine == theirs
        assert type(mine) is Draft
        assert _fields(mine) == _fields(theirs)
