"""Result building (contract 000 §Output rules, §Clipboard images) and the remote answer
validation of the catalog §7.3."""

from __future__ import annotations

import pytest

from pi_agent_ask.form.result import (
    AnswerResult,
    AskResult,
    BackgroundOutcome,
    QuestionMeta,
    answers_from_remote,
    build_result,
    fallback_result,
    invalid_result,
)
from pi_agent_ask.form.types import AskParams, Draft, Image, Issue, Option, Question

IMG_A = Image(id="img-a", mime_type="image/png", data="QUFB")
IMG_B = Image(id="img-b", mime_type="image/jpeg", data="QkJC")
IMG_C = Image(id="img-c", mime_type="image/webp", data="Q0ND")


def _params(*, title: str | None = "Plan") -> AskParams:
    return AskParams(
        title=title,
        questions=[
            Question(
                id="scope",
                label="Scope",
                prompt="What scope?",
                type="single",
                options=[Option("small", "Small"), Option("large", "Large")],
            ),
            Question(
                id="stack",
                label="Stack",
                prompt="Which frameworks?",
                type="multi",
                options=[
                    Option("react", "React"),
                    Option("vue", "Vue"),
                    Option("svelte", "Svelte"),
                ],
            ),
            Question(
                id="tone",
                label="Tone",
                prompt="Which tone?",
                type="single",
                options=[Option("formal", "Formal"), Option("casual", "Casual")],
            ),
        ],
    )


def _build(drafts: dict[str, Draft], **kwargs: object) -> AskResult:
    return build_result(_params(), drafts, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


def test_single_selection_uses_arrays_and_one_based_indices() -> None:
    result = _build({"scope": Draft(selected=[1])})
    assert result.answers["scope"].to_details() == {
        "values": ["large"],
        "labels": ["Large"],
        "indices": [2],
    }


def test_multi_selection_keeps_option_order_not_selection_order() -> None:
    result = _build({"stack": Draft(selected=[2, 0])})
    answer = result.answers["stack"]
    assert answer.values == ("react", "svelte")
    assert answer.labels == ("React", "Svelte")
    assert answer.indices == (1, 3)


def test_multi_custom_text_is_appended_last_and_has_no_index() -> None:
    draft = Draft(selected=[1], custom_text="Solid", custom_selected=True)
    answer = _build({"stack": draft}).answers["stack"]
    assert answer.values == ("vue", "Solid")
    assert answer.labels == ("Vue", "Solid")
    assert answer.indices == (2,)
    assert answer.custom_text == "Solid"


def test_single_custom_answer_alone() -> None:
    draft = Draft(custom_text="Something else", custom_selected=True)
    assert _build({"scope": draft}).answers["scope"].to_details() == {
        "values": ["Something else"],
        "labels": ["Something else"],
        "indices": [],
        "customText": "Something else",
    }


def test_deselected_custom_text_and_images_are_not_submitted() -> None:
    draft = Draft(selected=[0], custom_text="Solid", custom_selected=False, custom_images=[IMG_A])
    answer = _build({"stack": draft}).answers["stack"]
    assert answer.values == ("react",)
    assert answer.custom_text is None
    assert answer.custom_images == ()


def test_image_only_custom_answer_counts_without_synthetic_values() -> None:
    draft = Draft(custom_selected=True, custom_images=[IMG_A])
    answer = _build({"scope": draft}).answers["scope"]
    assert answer.has_answer
    assert answer.to_details() == {
        "values": [],
        "labels": [],
        "indices": [],
        "customImages": [{"id": "img-a", "mimeType": "image/png", "data": "QUFB"}],
    }


def test_unanswered_question_without_notes_is_omitted() -> None:
    result = _build({"scope": Draft(selected=[0])})
    assert list(result.answers) == ["scope"]
    assert [q.id for q in result.questions] == ["scope", "stack", "tone"]


def test_note_only_entry_is_kept() -> None:
    result = _build({"tone": Draft(note="needs examples")})
    assert result.answers["tone"].to_details() == {
        "values": [],
        "labels": [],
        "indices": [],
        "note": "needs examples",
    }
    assert not result.answers["tone"].has_answer


def test_option_notes_cover_every_option_selected_or_not_in_option_order() -> None:
    draft = Draft(
        selected=[0],
        option_notes={"svelte": "  later ", "react": "now", "vue": "   ", "gone": "stale"},
    )
    answer = _build({"stack": draft}).answers["stack"]
    assert list(answer.option_notes.items()) == [("react", "now"), ("svelte", "later")]


def test_option_note_on_unselected_option_alone_keeps_an_entry() -> None:
    answer = _build({"stack": Draft(option_notes={"vue": "maybe later"})}).answers["stack"]
    assert answer.values == ()
    assert answer.option_notes == {"vue": "maybe later"}


def test_images_on_every_option_note_and_on_the_question_note_are_submitted() -> None:
    draft = Draft(
        selected=[0],
        note_images=[IMG_A],
        option_note_images={"vue": [IMG_B], "gone": [IMG_C]},
    )
    answer = _build({"stack": draft}).answers["stack"]
    assert answer.note_images == (IMG_A,)
    assert answer.note is None
    assert dict(answer.option_note_images) == {"vue": (IMG_B,)}


def test_text_is_trimmed_and_blank_texts_are_dropped() -> None:
    draft = Draft(custom_text="  ", custom_selected=True, note=" \n ")
    assert "scope" not in _build({"scope": draft}).answers
    draft = Draft(custom_text="  mine \n", custom_selected=True, note="  why  ")
    answer = _build({"scope": draft}).answers["scope"]
    assert answer.custom_text == "mine"
    assert answer.values == ("mine",)
    assert answer.note == "why"


def test_out_of_range_and_repeated_selections_are_ignored() -> None:
    answer = _build({"stack": Draft(selected=[5, 1, 1, -1])}).answers["stack"]
    assert answer.values == ("vue",)
    assert answer.indices == (2,)


def test_drafts_may_be_a_sequence_aligned_with_the_questions() -> None:
    result = build_result(_params(), [Draft(), Draft(selected=[2])])
    assert list(result.answers) == ["stack"]
    assert result.answers["stack"].values == ("svelte",)


def test_skipped_questions_are_listed_in_order_and_lose_answers_and_notes() -> None:
    drafts = {
        "tone": Draft(skipped=True, note="ignored", selected=[0]),
        "scope": Draft(skipped=True, custom_images=[IMG_A], custom_selected=True),
        "stack": Draft(selected=[0]),
    }
    result = _build(drafts)
    assert result.skipped_question_ids == ("scope", "tone")
    assert list(result.answers) == ["stack"]
    assert [q.id for q in result.questions] == ["scope", "stack", "tone"]
    assert result.to_details()["skippedQuestionIds"] == ["scope", "tone"]
    assert result.to_structured()["skippedQuestionIds"] == ["scope", "tone"]


def test_all_questions_skipped() -> None:
    result = _build({q: Draft(skipped=True) for q in ("scope", "stack", "tone")})
    assert result.answers == {}
    assert result.skipped_question_ids == ("scope", "stack", "tone")
    assert not result.cancelled


def test_cancelled_result_keeps_partial_answers_but_strips_images() -> None:
    drafts = {
        "scope": Draft(custom_selected=True, custom_images=[IMG_A]),
        "stack": Draft(selected=[0], note_images=[IMG_B], option_note_images={"vue": [IMG_C]}),
    }
    result = _build(drafts, cancelled=True)
    assert result.cancelled
    assert list(result.answers) == ["stack"]
    assert result.answers["stack"].to_details() == {
        "values": ["react"],
        "labels": ["React"],
        "indices": [1],
    }
    assert "images" not in result.to_structured()["answers"]["stack"]


def test_presented_type_is_recorded_only_when_it_differs() -> None:
    result = _build({}, presented_types=["multi", "multi", "single"])
    assert [q.to_json() for q in result.questions] == [
        {
            "id": "scope",
            "label": "Scope",
            "prompt": "What scope?",
            "type": "single",
            "presentedType": "multi",
        },
        {"id": "stack", "label": "Stack", "prompt": "Which frameworks?", "type": "multi"},
        {"id": "tone", "label": "Tone", "prompt": "Which tone?", "type": "single"},
    ]


def test_presented_types_default_to_the_question_presentation() -> None:
    question = Question(
        id="q",
        label="Q1",
        prompt="Pick",
        type="single",
        presented_type="multi",
        options=[Option("a", "A")],
    )
    result = build_result(AskParams(questions=[question]), [])
    assert result.questions[0].presented_type == "multi"
    # A live toggle back to the requested type removes presentedType.
    result = build_result(AskParams(questions=[question]), [], presented_types=["single"])
    assert result.questions[0].presented_type is None


def test_title_and_request_id() -> None:
    result = _build({}, request_id="req-1")
    details = result.to_details()
    assert details["title"] == "Plan"
    assert details["requestId"] == "req-1"
    assert result.to_structured()["requestId"] == "req-1"
    untitled = build_result(_params(title=None), {})
    assert "title" not in untitled.to_details()
    assert "requestId" not in untitled.to_details()
    assert "requestId" not in untitled.to_structured()


# --------------------------------------------------------------------------------------------
# details vs structuredContent
# --------------------------------------------------------------------------------------------


def test_details_and_structured_content_differ_as_000_says() -> None:
    drafts = {
        "stack": Draft(
            selected=[0],
            custom_text="Solid",
            custom_selected=True,
            custom_images=[IMG_A],
            note="check licences",
            note_images=[IMG_B],
            option_notes={"vue": "maybe later"},
            option_note_images={"vue": [IMG_C], "react": [IMG_A]},
        )
    }
    result = _build(drafts, request_id="req-9")
    assert result.to_details() == {
        "title": "Plan",
        "cancelled": False,
        "questions": [
            {"id": "scope", "label": "Scope", "prompt": "What scope?", "type": "single"},
            {"id": "stack", "label": "Stack", "prompt": "Which frameworks?", "type": "multi"},
            {"id": "tone", "label": "Tone", "prompt": "Which tone?", "type": "single"},
        ],
        "answers": {
            "stack": {
                "values": ["react", "Solid"],
                "labels": ["React", "Solid"],
                "indices": [1],
                "customText": "Solid",
                "note": "check licences",
                "optionNotes": {"vue": "maybe later"},
                "customImages": [IMG_A.to_json()],
                "noteImages": [IMG_B.to_json()],
                "optionNoteImages": {"react": [IMG_A.to_json()], "vue": [IMG_C.to_json()]},
            }
        },
        "requestId": "req-9",
    }
    # Compact: no indices, no metadata, images inline (custom, note, option notes), once each.
    assert result.to_structured() == {
        "requestId": "req-9",
        "cancelled": False,
        "answers": {
            "stack": {
                "values": ["react", "Solid"],
                "labels": ["React", "Solid"],
                "customText": "Solid",
                "note": "check licences",
                "optionNotes": {"vue": "maybe later"},
                "images": [
                    {"mimeType": "image/png", "data": "QUFB"},
                    {"mimeType": "image/jpeg", "data": "QkJC"},
                    {"mimeType": "image/webp", "data": "Q0ND"},
                ],
            }
        },
    }


def test_no_mode_elaboration_or_continuation_is_emitted() -> None:
    result = _build({"scope": Draft(selected=[0], note="n")}, request_id="r")
    for data in (result.to_details(), result.to_structured()):
        assert not {"mode", "elaboration", "continuation"} & set(data)


# --------------------------------------------------------------------------------------------
# Invalid input and the non-TUI fallback
# --------------------------------------------------------------------------------------------


def test_invalid_result_shape() -> None:
    issue = Issue("questions[1].id", 'Question 2: duplicate question id "scope"')
    result = invalid_result("  Raw title ", [issue])
    assert result.is_error
    assert result.to_details() == {
        "title": "  Raw title ",
        "cancelled": True,
        "error": {
            "kind": "invalid_input",
            "issues": [
                {"path": "questions[1].id", "message": 'Question 2: duplicate question id "scope"'}
            ],
        },
        "questions": [],
        "answers": {},
    }
    assert result.to_structured() == {
        "cancelled": True,
        "answers": {},
        "error": {
            "issues": [
                {"path": "questions[1].id", "message": 'Question 2: duplicate question id "scope"'}
            ]
        },
    }


@pytest.mark.parametrize("raw", [None, "   ", 42, ["x"]])
def test_invalid_result_omits_a_blank_or_non_string_title(raw: object) -> None:
    result = invalid_result(raw, [Issue("questions", "At least one question is required")])
    assert "title" not in result.to_details()


def test_fallback_result_has_metadata_and_no_answers() -> None:
    result = fallback_result(_params(), "req-2")
    assert result.cancelled
    assert result.answers == {}
    assert [q.id for q in result.questions] == ["scope", "stack", "tone"]
    assert result.to_details()["requestId"] == "req-2"
    assert result.to_structured() == {"requestId": "req-2", "cancelled": True, "answers": {}}


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


def test_from_details_round_trips() -> None:
    drafts = {
        "scope": Draft(custom_selected=True, custom_images=[IMG_A]),
        "stack": Draft(
            selected=[2, 1], option_notes={"react": "x"}, option_note_images={"react": [IMG_B]}
        ),
        "tone": Draft(skipped=True),
    }
    result = _build(drafts, presented_types=["multi", "multi", "single"], request_id="r1")
    assert AskResult.from_details(result.to_details()) == result
    invalid = invalid_result("T", [Issue("questions", "At least one question is required")])
    assert AskResult.from_details(invalid.to_details()) == invalid


def test_from_details_ignores_keys_of_older_releases() -> None:
    data = {
        "cancelled": False,
        "mode": "submit",
        "continuation": {"strategy": "refine_only"},
        "questions": [{"id": "a", "label": "A", "prompt": "P?", "type": "single"}],
        "answers": {"a": {"values": ["x"], "labels": ["X"], "indices": [1]}},
    }
    result = AskResult.from_details(data)
    assert result.answers["a"] == AnswerResult(values=["x"], labels=["X"], indices=[1])
    assert result.questions == (QuestionMeta("a", "A", "P?", "single"),)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"cancelled": "no", "questions": [], "answers": {}},
        {"cancelled": False, "questions": [{"id": "a"}], "answers": {}},
        {"cancelled": False, "questions": [], "answers": {"a": {"values": [1], "labels": ["x"]}}},
        {"cancelled": False, "questions": [], "answers": {"a": {"values": ["a"], "labels": []}}},
        {"cancelled": False, "questions": [], "answers": {"a": {"indices": [True]}}},
        {
            "cancelled": False,
            "questions": [{"id": "a", "label": "A", "prompt": "P", "type": "preview"}],
            "answers": {},
        },
        {"cancelled": False, "questions": [], "answers": {"a": {"customImages": [{"id": "i"}]}}},
        {"cancelled": False, "questions": [], "answers": [], "error": None},
    ],
)
def test_from_details_rejects_malformed_data(data: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        AskResult.from_details(data)


def test_background_outcome_round_trips() -> None:
    result = _build({"scope": Draft(selected=[0])}, request_id="r")
    outcome = BackgroundOutcome("r", parent_tool_call_id="call-1", result=result)
    assert outcome.to_json() == {
        "requestId": "r",
        "parentToolCallId": "call-1",
        "result": result.to_details(),
    }
    assert BackgroundOutcome.from_json(outcome.to_json()) == outcome
    failed = BackgroundOutcome("r2", error="UI failed")
    assert failed.to_json() == {"requestId": "r2", "error": "UI failed"}
    assert BackgroundOutcome.from_json(failed.to_json()) == failed
    with pytest.raises(ValueError):
        BackgroundOutcome.from_json({"error": "x"})


# --------------------------------------------------------------------------------------------
# Remote answers (catalog §7.3; `mode` only "submit")
# --------------------------------------------------------------------------------------------

TYPES = ("single", "multi", "single")


def _remote(answers: object, **kwargs: object) -> tuple[Draft, ...] | str:
    return answers_from_remote(_params(), TYPES, answers, **kwargs)  # type: ignore[arg-type]


def test_remote_answers_become_drafts_and_labels_are_computed_locally() -> None:
    drafts = _remote(
        {
            "stack": {
                "values": ["svelte", "react"],
                "customText": " Solid ",
                "note": "  ",
                "optionNotes": {"vue": "maybe", "react": " "},
            },
            "scope": {"values": ["large"], "note": "why not"},
        }
    )
    assert isinstance(drafts, tuple)
    assert drafts[0] == Draft(selected=[1], note="why not")
    assert drafts[1] == Draft(
        selected=[0, 2], custom_text="Solid", custom_selected=True, option_notes={"vue": "maybe"}
    )
    assert drafts[2] == Draft()
    result = build_result(_params(), drafts, presented_types=TYPES)
    assert result.answers["stack"].to_details() == {
        "values": ["react", "svelte", "Solid"],
        "labels": ["React", "Svelte", "Solid"],
        "indices": [1, 3],
        "customText": "Solid",
        "optionNotes": {"vue": "maybe"},
    }
    assert "tone" not in result.answers


def test_remote_skipped_flag() -> None:
    drafts = _remote({"tone": {"skipped": True}, "scope": {"skipped": False, "values": ["small"]}})
    assert isinstance(drafts, tuple)
    assert drafts[2] == Draft(skipped=True)
    assert drafts[0] == Draft(selected=[0])


def test_remote_mode_submit_is_accepted() -> None:
    assert isinstance(_remote({}, mode="submit"), tuple)


@pytest.mark.parametrize(
    ("answers", "kwargs", "message"),
    [
        (None, {}, "Answer response must include an answers object."),
        (["x"], {}, "Answer response must include an answers object."),
        ({}, {"mode": "elaborate"}, 'Answer mode must be "submit".'),
        ({"nope": {}}, {}, 'Unknown question id "nope".'),
        ({"scope": "small"}, {}, 'Answer for question "scope" must be an object.'),
        ({"scope": {"values": "small"}}, {}, 'Answer values for question "scope" must be strings.'),
        ({"scope": {"values": [1]}}, {}, 'Answer values for question "scope" must be strings.'),
        ({"scope": {"values": None}}, {}, 'Answer values for question "scope" must be strings.'),
        (
            {"stack": {"values": ["vue", "vue"]}},
            {},
            'Answer values for question "stack" must be unique.',
        ),
        (
            {"scope": {"values": ["small", "large"]}},
            {},
            'Question "scope" accepts only one selected value.',
        ),
        (
            {"scope": {"values": ["medium"]}},
            {},
            'Unknown option value "medium" for question "scope".',
        ),
        (
            {"scope": {"customText": 3}},
            {},
            'Custom text for question "scope" must be a string.',
        ),
        (
            {"scope": {"values": ["small"], "customText": "mine"}},
            {},
            'Question "scope" cannot combine a selected value and custom text.',
        ),
        ({"scope": {"note": ["n"]}}, {}, 'Note for question "scope" must be a string.'),
        (
            {"scope": {"optionNotes": {"small": 1}}},
            {},
            'Option notes for question "scope" must be string values.',
        ),
        (
            {"scope": {"optionNotes": "small"}},
            {},
            'Option notes for question "scope" must be string values.',
        ),
        (
            {"scope": {"optionNotes": {"tiny": "x"}}},
            {},
            'Unknown option note value "tiny" for question "scope".',
        ),
        (
            {"scope": {"skipped": "yes"}},
            {},
            'Skipped flag for question "scope" must be a boolean.',
        ),
        (
            {"scope": {"skipped": True, "values": ["small"]}},
            {},
            'Skipped question "scope" cannot carry answers or notes.',
        ),
    ],
)
def test_remote_answer_errors(answers: object, kwargs: dict[str, object], message: str) -> None:
    assert _remote(answers, **kwargs) == message


def test_remote_single_presented_as_multi_accepts_several_values_and_custom_text() -> None:
    drafts = answers_from_remote(
        _params(),
        ("multi", "multi", "single"),
        {"scope": {"values": ["large", "small"], "customText": "both"}},
    )
    assert isinstance(drafts, tuple)
    assert drafts[0] == Draft(selected=[0, 1], custom_text="both", custom_selected=True)


def test_remote_blank_custom_text_with_a_selection_is_fine_on_single() -> None:
    drafts = _remote({"scope": {"values": ["small"], "customText": "   "}})
    assert isinstance(drafts, tuple)
    assert drafts[0] == Draft(selected=[0])
