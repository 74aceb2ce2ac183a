"""The fast result path against a plain model of it.

``build_result`` constructs results without the public constructors' converters, and the
texts of a result (its tool result text, background answer, image blocks) are built once and
kept with the result. This file holds a straightforward model of both, written the slow and
obvious way (results through the public constructors, every text re-derived on each call),
and checks over generated forms that the real ones agree with it exactly: the same values of
the same types, the same texts byte for byte, the same dicts in the same key order; and that
nothing kept with a result goes stale when it is asked with other params or when the result
is copied with other fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import (
    AnswerResult,
    AskResult,
    BackgroundOutcome,
    QuestionMeta,
    build_result,
)
from pi_agent_ask.form.types import (
    EMPTY_DRAFT,
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Option,
    Question,
    QuestionType,
)
from tests.test_result_properties import cases, forms

# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def model_answer(question: Question, draft: Draft) -> AnswerResult:
    count = len(question.options)
    selected = sorted({i for i in draft.selected if 0 <= i < count})
    values = [question.options[i].value for i in selected]
    labels = [question.options[i].label for i in selected]
    custom_text: str | None = None
    custom_images: tuple[Image, ...] = ()
    if draft.custom_selected:
        text = draft.custom_text.strip()
        if text:
            custom_text = text
            values.append(text)
            labels.append(text)
        custom_images = draft.custom_images
    option_notes: dict[str, str] = {}
    option_note_images: dict[str, tuple[Image, ...]] = {}
    for option in question.options:
        if option.value in draft.option_notes:
            note = draft.option_notes[option.value].strip()
            if note:
                option_notes[option.value] = note
        if option.value in draft.option_note_images:
            images = tuple(draft.option_note_images[option.value])
            if images:
                option_note_images[option.value] = images
    return AnswerResult(
        values=values,
        labels=labels,
        indices=[i + 1 for i in selected],
        custom_text=custom_text,
        note=draft.note.strip() or None,
        option_notes=option_notes,
        custom_images=custom_images,
        note_images=draft.note_images,
        option_note_images=option_note_images,
    )


def model_build(
    params: AskParams,
    drafts: Sequence[Draft] | Mapping[str, Draft],
    *,
    presented_types: Sequence[QuestionType] | None = None,
    cancelled: bool = False,
    request_id: str | None = None,
) -> AskResult:
    questions = params.questions
    if isinstance(drafts, Mapping):
        ordered = [drafts.get(q.id, EMPTY_DRAFT) for q in questions]
    else:
        listed = list(drafts)
        ordered = [listed[i] if i < len(listed) else EMPTY_DRAFT for i in range(len(questions))]
    given_types = list(presented_types or ())
    answers: dict[str, AnswerResult] = {}
    skipped: list[str] = []
    metas: list[QuestionMeta] = []
    for i, (question, draft) in enumerate(zip(questions, ordered, strict=True)):
        shown = given_types[i] if i < len(given_types) else None
        if shown not in QUESTION_TYPES:
            shown = question.effective_type
        metas.append(QuestionMeta.of(question, shown))
        if draft.skipped:
            skipped.append(question.id)
            continue
        answer = model_answer(question, draft)
        if cancelled:
            answer = attrs.evolve(answer, custom_images=(), note_images=(), option_note_images={})
        if answer != AnswerResult():
            answers[question.id] = answer
    return AskResult(
        title=params.title,
        cancelled=cancelled,
        questions=metas,
        answers=answers,
        skipped_question_ids=skipped,
        request_id=request_id,
    )


def model_labels(params: AskParams | None, qid: str) -> dict[str, str] | None:
    if params is None:
        return None
    return {q.id: {o.value: o.label for o in q.options} for q in params.questions}.get(qid)


def model_noted(answer: AnswerResult, options: Mapping[str, str] | None) -> list[str]:
    noted = list(dict.fromkeys([*answer.option_notes, *answer.option_note_images]))
    if options is None or len(noted) <= 1:
        return noted
    order = {value: i for i, value in enumerate(options)}
    return sorted(noted, key=lambda v: order.get(v, len(order)))


def model_option_label(
    answer: AnswerResult, value: str, options: Mapping[str, str] | None
) -> tuple[str, bool]:
    pairs = dict(zip(answer.selected_values, answer.selected_labels, strict=True))
    if value in pairs:
        return pairs[value], True
    if options is not None and value in options:
        return options[value], False
    return value, False


def marked(text: str, count: int) -> str:
    marker = "" if count <= 0 else "[1 image]" if count == 1 else f"[{count} images]"
    if not marker:
        return text
    return f"{text} {marker}" if text else marker


def model_summary(result: AskResult, params: AskParams | None, with_ids: bool) -> list[str]:
    if result.cancelled:
        return [texts.CANCELLED_TEXT]
    lines: list[str] = []
    for meta in result.questions:
        name = f"{meta.label} [{meta.id}]" if with_ids else meta.label
        if meta.id in result.skipped_question_ids:
            lines.append(f"{name}: (skipped)")
            continue
        answer = result.answers.get(meta.id)
        if answer is None or not answer.has_answer:
            lines.append(f"{name}: (no answer)")
        else:
            lines.append(f"{name}: {marked(', '.join(answer.labels), len(answer.custom_images))}")
        if answer is None:
            continue
        if answer.note is not None or answer.note_images:
            lines.append(f"{name} note: {marked(answer.note or '', len(answer.note_images))}")
        options = model_labels(params, meta.id)
        for value in model_noted(answer, options):
            label, selected = model_option_label(answer, value, options)
            which = label if selected else f"{label} (not selected)"
            note = marked(
                answer.option_notes.get(value, ""), len(answer.option_note_images.get(value, ()))
            )
            lines.append(f"{name} / {which} note: {note}")
    note = texts.presentation_note(result)
    if note:
        lines.append(note)
    return lines or [texts.SUBMITTED_TEXT]


def model_result_text(result: AskResult, params: AskParams | None) -> str:
    if result.issues is not None:
        return texts.invalid_text(result.issues)
    body = "\n".join(model_summary(result, params, with_ids=False))
    return body if result.request_id is None else f"ask_user [{result.request_id}]\n{body}"


def model_images(
    result: AskResult, params: AskParams | None, seen: set[str]
) -> list[dict[str, Any]]:
    if result.cancelled or result.issues is not None:
        return []
    blocks: list[dict[str, Any]] = []

    def add(meta: QuestionMeta, what: str, images: Iterable[Image]) -> None:
        for image in images:
            if image.id not in seen:
                seen.add(image.id)
                caption = f"Image for [{meta.id}] {meta.prompt} — {what}:"
                blocks.append({"type": "text", "text": caption})
                blocks.append({"type": "image", "mimeType": image.mime_type, "data": image.data})

    for meta in result.questions:
        answer = result.answers.get(meta.id)
        if answer is None:
            continue
        add(meta, "custom answer", answer.custom_images)
        add(meta, "question note", answer.note_images)
        options = model_labels(params, meta.id)
        for value in model_noted(answer, options):
            label, _ = model_option_label(answer, value, options)
            add(meta, f"option note for {label}", answer.option_note_images.get(value, ()))
    return blocks


def model_answer_details(answer: AnswerResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "values": list(answer.values),
        "labels": list(answer.labels),
        "indices": list(answer.indices),
    }
    if answer.custom_text is not None:
        out["customText"] = answer.custom_text
    if answer.note is not None:
        out["note"] = answer.note
    if answer.option_notes:
        out["optionNotes"] = dict(answer.option_notes)
    if answer.custom_images:
        out["customImages"] = [i.to_json() for i in answer.custom_images]
    if answer.note_images:
        out["noteImages"] = [i.to_json() for i in answer.note_images]
    if answer.option_note_images:
        out["optionNoteImages"] = {
            v: [i.to_json() for i in images] for v, images in answer.option_note_images.items()
        }
    return out


def model_answer_structured(answer: AnswerResult) -> dict[str, Any]:
    out: dict[str, Any] = {"values": list(answer.values), "labels": list(answer.labels)}
    for key, value in model_answer_details(answer).items():
        if key in ("customText", "note", "optionNotes"):
            out[key] = value
    images = answer.images()
    if images:
        out["images"] = [{"mimeType": i.mime_type, "data": i.data} for i in images]
    return out


def model_details(result: AskResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.title is not None:
        out["title"] = result.title
    out["cancelled"] = result.cancelled
    if result.issues is not None:
        out["error"] = {"kind": "invalid_input", "issues": [i.to_json() for i in result.issues]}
    out["questions"] = [meta.to_json() for meta in result.questions]
    if result.skipped_question_ids:
        out["skippedQuestionIds"] = list(result.skipped_question_ids)
    out["answers"] = {qid: model_answer_details(a) for qid, a in result.answers.items()}
    if result.request_id is not None:
        out["requestId"] = result.request_id
    return out


def model_structured(result: AskResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.request_id is not None:
        out["requestId"] = result.request_id
    out["cancelled"] = result.cancelled
    out["answers"] = {qid: model_answer_structured(a) for qid, a in result.answers.items()}
    if result.skipped_question_ids:
        out["skippedQuestionIds"] = list(result.skipped_question_ids)
    if result.issues is not None:
        out["error"] = {"issues": [i.to_json() for i in result.issues]}
    return out


def model_tool_result(result: AskResult, params: AskParams | None) -> dict[str, Any]:
    return {
        "content": [
            {"type": "text", "text": model_result_text(result, params)},
            *model_images(result, params, set()),
        ],
        "details": model_details(result),
        "structuredContent": model_structured(result),
    }


def model_background_text(outcome: BackgroundOutcome, params: AskParams | None) -> str:
    result = outcome.result
    if result is None or result.issues is not None:
        error = outcome.error
        if error is None:
            error = (
                texts.invalid_text(result.issues or ()) if result else "No form result available."
            )
        return f"Background answer [{outcome.request_id}]:\nQuestion form failed: {error}"
    title = f" — {result.title}" if result.title else ""
    lines = [f"Background answer [{outcome.request_id}]{title}:", "Questions:"]
    lines.extend(f"- [{m.id}] {m.label}: {m.prompt}" for m in result.questions)
    lines.append("Response:")
    lines.extend(model_summary(result, params, with_ids=True))
    return "\n".join(lines)


def model_background_message(outcome: BackgroundOutcome, params: AskParams | None) -> Any:
    text = model_background_text(outcome, params)
    images = model_images(outcome.result, params, set()) if outcome.result else []
    content = [{"type": "text", "text": text}, *images] if images else text
    details: dict[str, Any] = {"requestId": outcome.request_id}
    if outcome.parent_tool_call_id is not None:
        details["parentToolCallId"] = outcome.parent_tool_call_id
    if outcome.result is not None:
        details["result"] = model_details(outcome.result)
    if outcome.error is not None:
        details["error"] = outcome.error
    return {"customType": "ask:background-answer", "content": content, "details": details}


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------


def same_value(ours: object, model: object) -> None:
    """Equal, of the same types all the way down (a list where a tuple belongs, or a plain dict
    where a frozen mapping belongs, is a difference)."""
    assert type(ours) is type(model), (ours, model)
    if attrs.has(type(model)):
        for field in attrs.fields(type(model)):
            if field.eq:
                same_value(getattr(ours, field.name), getattr(model, field.name))
    elif isinstance(model, Mapping):
        assert isinstance(ours, Mapping)
        assert list(ours) == list(model)
        for key in model:
            same_value(ours[key], model[key])
    elif isinstance(model, tuple | list):
        assert isinstance(ours, tuple | list)
        assert len(ours) == len(model)
        for a, b in zip(ours, model, strict=True):
            same_value(a, b)
    else:
        assert ours == model


def same_json(ours: object, model: object) -> None:
    """The same JSON text: equal values with the same key order."""
    assert json.dumps(ours, ensure_ascii=False) == json.dumps(model, ensure_ascii=False)


Case = tuple[AskParams, list[Draft], list[QuestionType], bool, str | None]


def _both(case: Case) -> tuple[AskResult, AskResult]:
    params, drafts, presented, cancelled, request_id = case
    options: dict[str, Any] = {
        "presented_types": presented,
        "cancelled": cancelled,
        "request_id": request_id,
    }
    return build_result(params, drafts, **options), model_build(params, drafts, **options)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@given(cases())
def test_build_result_matches_the_model_field_by_field(case: Case) -> None:
    ours, model = _both(case)
    same_value(ours, model)
    assert ours == model and hash(ours) == hash(model)
    # Keyed drafts and drafts as a generator give the same result.
    params, drafts, presented, cancelled, request_id = case
    keyed = {q.id: d for q, d in zip(params.questions, drafts, strict=True)}
    options: dict[str, Any] = {
        "presented_types": iter(presented),
        "cancelled": cancelled,
        "request_id": request_id,
    }
    expected = model_build(
        params, keyed, presented_types=presented, cancelled=cancelled, request_id=request_id
    )
    same_value(build_result(params, keyed, **options), expected)
    same_value(build_result(params, iter(drafts[:1])), model_build(params, drafts[:1]))


@given(cases())
def test_tool_result_and_background_message_match_the_model(case: Case) -> None:
    params = case[0]
    ours, model = _both(case)
    for with_params in (params, None):
        same_json(
            texts.tool_result(ours, params=with_params), model_tool_result(model, with_params)
        )
        outcome = BackgroundOutcome("r", parent_tool_call_id="c", result=ours)
        same_json(
            texts.background_answer_message(outcome, params=with_params),
            model_background_message(BackgroundOutcome("r", "c", result=model), with_params),
        )
        assert texts.summary_lines(ours, params=with_params) == model_summary(
            model, with_params, with_ids=False
        )
        assert texts.summary_lines(ours, params=with_params, with_ids=True) == model_summary(
            model, with_params, with_ids=True
        )


@given(cases(), cases())
def test_waits_over_several_outcomes_match_the_model(first: Case, second: Case) -> None:
    ours = [_both(first)[0], _both(second)[0]]
    lookup = {"r1": first[0], "r2": second[0]}
    outcomes = [BackgroundOutcome("r1", result=ours[0]), BackgroundOutcome("r2", result=ours[1])]
    out = texts.wait_complete_result(["r1", "r2"], outcomes, params=lookup)
    seen: set[str] = set()
    expected = [
        {
            "type": "text",
            "text": "\n\n".join(model_background_text(o, lookup[o.request_id]) for o in outcomes),
        },
        *(
            block
            for o in outcomes
            if o.result is not None
            for block in model_images(o.result, lookup[o.request_id], seen)
        ),
    ]
    same_json(out["content"], expected)


@settings(max_examples=50)
@given(cases(), forms(), st.sampled_from(["q", "r"]))
def test_texts_kept_with_a_result_never_go_stale(
    case: Case, other_params: AskParams, request_id: str
) -> None:
    """Asked again, with other params, without params, or after ``attrs.evolve``, a result's
    texts are what a fresh build of them says; and a caller that edits a returned tool result
    changes nothing that comes later."""
    params = case[0]
    ours, model = _both(case)
    relabelled = AskParams(
        title=params.title,
        questions=[
            attrs.evolve(q, options=[Option(o.value, f"{o.label}!") for o in q.options])
            for q in params.questions
        ],
    )
    for with_params in (params, relabelled, None, other_params, params, params):
        out = texts.tool_result(ours, params=with_params)
        same_json(out, model_tool_result(model, with_params))
        outcome = BackgroundOutcome("r", result=ours)
        same_json(
            texts.background_answer_message(outcome, params=with_params),
            model_background_message(BackgroundOutcome("r", result=model), with_params),
        )
        # Edit everything the caller got; the next round must not see it.
        for block in out["content"]:
            block["text" if block["type"] == "text" else "data"] = "edited"
        out["details"]["answers"].clear()
    # Another result of the same params (the same object) has texts of its own.
    for drafts in ((), [Draft(skipped=True)] * len(params.questions)):
        another = build_result(params, drafts, request_id=request_id)
        same_json(
            texts.tool_result(another, params=params),
            model_tool_result(model_build(params, drafts, request_id=request_id), params),
        )
    evolved = attrs.evolve(ours, request_id=request_id, title="Other")
    same_json(
        texts.tool_result(evolved, params=params),
        model_tool_result(attrs.evolve(model, request_id=request_id, title="Other"), params),
    )
    same_json(texts.tool_result(ours, params=params), model_tool_result(model, params))


@given(forms(), st.text(alphabet="abcdefghij-_", min_size=1, max_size=6))
def test_the_option_index_holds_the_labels_of_the_named_question(
    params: AskParams, qid: str
) -> None:
    index = texts.option_index(params)
    fresh = texts.option_index(params)
    assert index is not None and fresh is not None
    for question in params.questions:
        for value in [*(o.value for o in question.options), "stale"]:
            model = model_labels(params, question.id)
            expected = None if model is None else model.get(value)
            assert (fresh.of(question.id) or {}).get(value) == expected
    assert (fresh.of(qid) or {}).get("stale") == (model_labels(params, qid) or {}).get("stale")
    for question_id in [qid, *(q.id for q in params.questions), qid]:
        labels = texts.options_of(index, question_id)
        model = model_labels(params, question_id)
        assert labels == model
        assert (None if labels is None else list(labels)) == (
            None if model is None else list(model)
        )
        for value in [*(model or ()), "stale"]:
            assert (index.of(question_id) or {}).get(value) == (model or {}).get(value)


def test_duplicate_option_values_and_question_ids_read_as_the_model_says() -> None:
    """Params built directly (not validated) may repeat an option value or a question id; a
    note on such an option still names the option the model names."""
    questions = [
        Question(
            id="a",
            label="A",
            prompt="First?",
            type="multi",
            options=[Option("x", "X1"), Option("x", "X2"), Option("y", "Y"), Option("z", "Z")],
        ),
        Question(
            id="a",
            label="A again",
            prompt="Second?",
            type="single",
            options=[Option("x", "X3"), Option("z", "Z2")],
        ),
        Question(
            id="b",
            label="B",
            prompt="Third?",
            type="single",
            options=[Option("x", "X4"), Option("y", "Y2"), Option("x", "X5")],
        ),
    ]
    params = AskParams(questions=questions)
    drafts = [
        Draft(selected=[3, 0], option_notes={"x": "n1", "z": " n2 ", "y": "n3", "w": "stale"}),
        Draft(option_notes={"z": "n4", "x": "n5"}),
        Draft(option_notes={"x": "n6"}),
    ]
    ours = build_result(params, drafts, request_id="d")
    model = model_build(params, drafts, request_id="d")
    same_value(ours, model)
    same_json(texts.tool_result(ours, params=params), model_tool_result(model, params))
    outcome = BackgroundOutcome("d", result=ours)
    same_json(
        texts.background_answer_message(outcome, params=params),
        model_background_message(BackgroundOutcome("d", result=model), params),
    )


@pytest.mark.parametrize("notes", [{"a": "n"}, {"b": "n"}, {"a": "n", "b": "m"}])
def test_malformed_answers_fail_as_the_model_does(notes: dict[str, str]) -> None:
    """An answer whose selected values and labels differ in length (only a hand-built one can)
    makes the summary raise ``ValueError`` as it always did; one whose extra value lies past
    the selected options does not."""
    question = QuestionMeta(id="q", label="Q", prompt="P?", type="multi")
    params = AskParams(
        questions=[
            Question(
                id="q",
                label="Q",
                prompt="P?",
                type="multi",
                options=[Option("a", "A"), Option("b", "B")],
            )
        ]
    )
    for indices, fails in (((1, 2), True), ((1,), False)):
        answer = AnswerResult(values=("a", "b"), labels=("A",), indices=indices, option_notes=notes)
        result = AskResult(cancelled=False, questions=[question], answers={"q": answer})
        for with_params in (params, None):
            try:
                expected: object = model_summary(result, with_params, with_ids=False)
            except ValueError:
                expected = ValueError
            assert (expected is ValueError) is fails
            try:
                ours: object = texts.summary_lines(result, params=with_params)
            except ValueError:
                ours = ValueError
            assert ours == expected
