"""Property tests of result building and result texts, over generated forms and drafts."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form import schemas
from pi_agent_ask.form.result import (
    AskResult,
    BackgroundOutcome,
    answers_from_remote,
    build_result,
)
from pi_agent_ask.form.text import (
    tool_result,
    wait_complete_result,
    wait_deferred_result,
)
from pi_agent_ask.form.transcript import (
    background_card,
    cell_width,
    line_text,
    result_rows,
)
from pi_agent_ask.form.types import (
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Option,
    Question,
    QuestionType,
)

# Letters and blanks, plus the characters that matter to text and terminals: line breaks, tabs,
# escapes and C1 controls, bidi marks, combining and wide characters.
texts = st.text(
    alphabet=st.sampled_from("ab Z.,-\n\t\x1b\x07\x9b\u200f\u0301é日語\u0e5c😀"),
    max_size=12,
)
names = st.text(alphabet="abcdefghij-_", min_size=1, max_size=6)
types = st.sampled_from(QUESTION_TYPES)
images = st.builds(
    Image,
    id=st.sampled_from(["i1", "i2", "i3", "i4"]),
    mime_type=st.sampled_from(["image/png", "image/jpeg"]),
    data=st.text(alphabet="QUFBQkJD=", min_size=1, max_size=8),
)
# Strategies are built once: building them inside every draw dominates the run time.
shown_texts = texts.filter(str.strip)
labels = st.one_of(st.none(), shown_texts)
value_lists = st.lists(names, min_size=1, max_size=5, unique=True)
id_lists = st.lists(names, min_size=1, max_size=5, unique=True)
optional_types = st.one_of(st.none(), types)
selections = st.lists(st.integers(-1, 6), max_size=4)
# Option keys by position; positions past the last option stand for a stale key.
note_maps = st.dictionaries(st.integers(0, 5), texts, max_size=3)
image_lists = st.lists(images, max_size=2)
image_maps = st.dictionaries(st.integers(0, 5), image_lists, max_size=2)
skips = st.integers(0, 5).map(lambda n: n == 0)


@st.composite
def forms(draw: st.DrawFn) -> AskParams:
    questions = []
    for number, qid in enumerate(draw(id_lists), start=1):
        label = draw(labels)
        questions.append(
            Question(
                id=qid,
                label=label if label is not None else f"Q{number}",
                prompt=draw(shown_texts),
                type=draw(types),
                presented_type=draw(optional_types),
                options=[Option(value, draw(shown_texts)) for value in draw(value_lists)],
            )
        )
    return AskParams(title=draw(labels), questions=questions)


def _key(question: Question, position: int) -> str:
    return question.options[position].value if position < len(question.options) else "stale"


def _draft(draw: st.DrawFn, question: Question, *, with_images: bool) -> Draft:
    no_images: list[Image] = []
    return Draft(
        selected=draw(selections),
        custom_text=draw(texts),
        custom_selected=draw(st.booleans()),
        note=draw(texts),
        option_notes={_key(question, k): v for k, v in draw(note_maps).items()},
        custom_images=draw(image_lists) if with_images else no_images,
        note_images=draw(image_lists) if with_images else no_images,
        option_note_images=(
            {_key(question, k): v for k, v in draw(image_maps).items()} if with_images else {}
        ),
        skipped=draw(skips),
    )


@st.composite
def cases(
    draw: st.DrawFn, *, with_images: bool = True
) -> tuple[AskParams, list[Draft], list[QuestionType], bool, str | None]:
    params = draw(forms())
    drafts = [_draft(draw, q, with_images=with_images) for q in params.questions]
    presented = draw(st.lists(types, max_size=len(params.questions)))
    cancelled = draw(st.booleans())
    request_id = draw(st.one_of(st.none(), names))
    return params, drafts, presented, cancelled, request_id


def _build(case: tuple[AskParams, list[Draft], list[QuestionType], bool, str | None]) -> AskResult:
    params, drafts, presented, cancelled, request_id = case
    return build_result(
        params, drafts, presented_types=presented, cancelled=cancelled, request_id=request_id
    )


# Validators are built once per module; they hold no state between validations.
OUTPUT = jsonschema.Draft202012Validator(schemas.ask_user_output_schema())
DETAILS = jsonschema.Draft202012Validator(schemas.ask_result_schema())
WAIT = jsonschema.Draft202012Validator(schemas.wait_for_answers_output_schema())


@given(cases())
def test_structured_content_matches_the_output_schema(case: Any) -> None:
    result = _build(case)
    OUTPUT.validate(result.to_structured())
    DETAILS.validate(result.to_details())


@given(cases())
def test_indices_are_one_based_positions_of_selected_options(case: Any) -> None:
    params, drafts, *_ = case
    result = _build(case)
    for question, draft in zip(params.questions, drafts, strict=True):
        answer = result.answers.get(question.id)
        expected = sorted({i for i in draft.selected if 0 <= i < len(question.options)})
        if draft.skipped:
            assert answer is None
            assert question.id in result.skipped_question_ids
            continue
        if answer is None:
            assert not expected
            continue
        assert answer.indices == tuple(i + 1 for i in expected)
        chosen = [question.options[i - 1] for i in answer.indices]
        assert answer.values[: len(chosen)] == tuple(o.value for o in chosen)
        assert answer.labels[: len(chosen)] == tuple(o.label for o in chosen)
        extra = answer.values[len(chosen) :]
        assert extra == (() if answer.custom_text is None else (answer.custom_text,))
        if case[3]:  # cancelled
            assert not answer.images()


@given(cases())
def test_details_round_trip(case: Any) -> None:
    result = _build(case)
    assert AskResult.from_details(result.to_details()) == result
    assert AskResult.from_details(json.loads(json.dumps(result.to_details()))) == result


@given(cases())
def test_tool_result_is_json_and_images_follow_their_caption(case: Any) -> None:
    params = case[0]
    result = _build(case)
    out = tool_result(result, params=params)
    json.dumps(out)
    content = out["content"]
    assert content[0]["type"] == "text"
    rest = content[1:]
    assert len(rest) % 2 == 0
    for caption, image in zip(rest[::2], rest[1::2], strict=True):
        assert caption["type"] == "text"
        assert caption["text"].startswith("Image for [")
        assert image["type"] == "image"
    if result.cancelled:
        assert rest == []
    count = len(rest) // 2
    assert count == len({i.id for a in result.answers.values() for i in a.images()})


@given(cases(), st.integers(2, 50))
def test_transcript_lines_fit_and_hold_no_control_characters(case: Any, width: int) -> None:
    params = case[0]
    result = _build(case)
    outcome = BackgroundOutcome("r", result=result)
    lines = [
        *background_card(outcome, width=width, params=params),
        *result_rows(result, params=params, width=width),
    ]
    for line in lines:
        text = line_text(line)
        assert cell_width(text) <= width
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


@given(cases(), st.sampled_from(["hidden", "user_message"]))
def test_wait_results_match_the_wait_schema(case: Any, reason: str) -> None:
    outcomes = [BackgroundOutcome("r1", result=_build(case)), BackgroundOutcome("r2", error="x")]
    complete = wait_complete_result(["r1", "r2"], outcomes)
    deferred = wait_deferred_result(reason, ["r1", "r2", "r3"], ["r3"], outcomes)  # type: ignore[arg-type]
    for out in (complete, deferred):
        WAIT.validate(out["structuredContent"])
        json.dumps(out)


@given(cases(with_images=False))
def test_remote_answers_rebuild_the_same_result(case: Any) -> None:
    """Feeding a submitted result back as a remote answer gives the same result, unless a
    single-select question holds what a single-select remote answer may not."""
    params, drafts_in, presented_in, _, request_id = case
    original = _build((params, drafts_in, presented_in, False, request_id))
    presented = [q.presented_type or q.effective_type for q in original.questions]
    payload: dict[str, Any] = {qid: {"skipped": True} for qid in original.skipped_question_ids}
    for qid, answer in original.answers.items():
        entry: dict[str, Any] = {"values": list(answer.selected_values)}
        if answer.custom_text is not None:
            entry["customText"] = answer.custom_text
        if answer.note is not None:
            entry["note"] = answer.note
        if answer.option_notes:
            entry["optionNotes"] = dict(answer.option_notes)
        payload[qid] = entry
    drafts = answers_from_remote(params, presented, payload)
    conflict = any(
        presented[i] == "single"
        and (len(a.selected_values) > 1 or (a.selected_values and a.custom_text is not None))
        for i, q in enumerate(params.questions)
        if (a := original.answers.get(q.id)) is not None
    )
    if conflict:
        assert isinstance(drafts, str)
        return
    assert not isinstance(drafts, str), drafts
    rebuilt = build_result(params, drafts, presented_types=presented, request_id=request_id)
    assert rebuilt == original
