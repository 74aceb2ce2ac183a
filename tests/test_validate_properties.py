"""Properties of ``ask_user`` validation over generated arguments."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pi_agent_ask.form import schema_check
from pi_agent_ask.form.context_files import is_context_path
from pi_agent_ask.form.prepare import derive_label, derive_labels
from pi_agent_ask.form.tools import TOOL_NAMES
from pi_agent_ask.form.validate import params_from_saved, validate_ask_params

FIELD_NAMES = [
    "title",
    "background",
    "questions",
    "id",
    "label",
    "prompt",
    "context",
    "type",
    "options",
    "value",
    "description",
    "recommended",
    "preview",
    "previewFile",
    "query",
    "answeredOnly",
    "offset",
    "limit",
    "requestId",
    "questionId",
    "path",
    "keys",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["single", "multi", "preview", "grid", " ", "/", "-_-"])
    | st.sampled_from([0, 1, -1, 200, 201, 1.0, 2.5, float("nan"), float("inf")])
)

# JSON-like values whose keys are often the ones validation looks at, so generated values reach
# deep into the pipeline instead of failing at the root.
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=6), children, max_size=6)
    ),
    max_leaves=30,
)

kwargs = st.fixed_dictionaries(
    {"present_single_as_multi": st.booleans(), "background_only": st.booleans()}
)


@given(json_like, kwargs)
def test_arbitrary_arguments_never_raise(arguments: object, options: dict[str, bool]) -> None:
    before = repr(arguments)  # repr: NaN is not equal to itself
    validation = validate_ask_params(arguments, **options)
    _check_consistent(validation)
    assert repr(arguments) == before  # the input is never changed (no schema defaults filled)
    # Saved data goes through the same pipeline without reading files.
    params = params_from_saved(arguments)
    assert params is None or params.questions


@given(
    st.dictionaries(st.just("questions") | st.text(max_size=4), json_like, min_size=1, max_size=3),
    kwargs,
)
def test_arbitrary_objects_never_raise(arguments: dict[str, Any], options: dict[str, bool]) -> None:
    _check_consistent(validate_ask_params(arguments, **options))


def _check_consistent(validation: Any) -> None:
    if validation.params is None:
        assert validation.issues
    else:
        assert not validation.issues
        assert not validation.schema_error
    for issue in validation.issues:
        assert isinstance(issue.path, str) and issue.path
        assert isinstance(issue.message, str) and issue.message


# --------------------------------------------------------------------------------------------
# Schema-valid payloads
# --------------------------------------------------------------------------------------------

text = st.text(max_size=8) | st.sampled_from(["", " ", "  x  ", "a-b_c", "--", "Q1"])
# Contexts are text here; files have their own tests. A trimmed single-line absolute path would
# be read as a file, so it is left out of these payloads.
context_text = text.filter(lambda value: not is_context_path(value.strip())) | st.just("a\n/b")


@st.composite
def options(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"value": draw(text)}
    if draw(st.booleans()):
        out["label"] = draw(text)
    if draw(st.booleans()):
        out["description"] = draw(text)
    if draw(st.booleans()):
        out["recommended"] = draw(st.booleans())
    if draw(st.integers(0, 5)) == 0:
        out["preview"] = draw(text)
    return out


@st.composite
def questions(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": draw(text | st.sampled_from(["a", "b"])),
        "prompt": draw(text),
        "options": draw(st.lists(options(), max_size=4)),
    }
    if draw(st.booleans()):
        out["label"] = draw(text)
    if draw(st.booleans()):
        out["context"] = draw(context_text)
    if draw(st.booleans()):
        out["type"] = draw(st.sampled_from(["single", "multi", "preview"]))
    return out


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": draw(st.lists(questions(), max_size=4))}
    if draw(st.booleans()):
        out["title"] = draw(text)
    if draw(st.booleans()):
        out["background"] = draw(st.booleans())
    return out


@given(payloads(), kwargs)
def test_schema_valid_payloads_validate_or_give_semantic_issues(
    payload: dict[str, Any], options: dict[str, bool]
) -> None:
    before = copy.deepcopy(payload)
    validation = validate_ask_params(payload, **options)
    _check_consistent(validation)
    assert payload == before
    # Labels that cannot be derived fail the schema's required label; nothing else does.
    derivable_or_labelled = all(
        "label" in option or option["value"].replace("-", "").replace("_", "").strip()
        for question in payload["questions"]
        for option in question["options"]
    )
    if derivable_or_labelled:
        assert not validation.schema_error, validation.issues
        assert all(issue.path.startswith("questions") for issue in validation.issues)
    if validation.params is None:
        return
    params = validation.params
    assert params.questions
    assert params.background is (options["background_only"] or payload.get("background") is True)
    ids = [question.id for question in params.questions]
    assert len(set(ids)) == len(ids)
    for question in params.questions:
        assert question.id and question.id == question.id.strip()
        assert question.prompt and question.label
        assert question.options
        values = [option.value for option in question.options]
        assert len(set(values)) == len(values)
        assert all(
            option.label and option.label == option.label.strip() for option in question.options
        )
        if options["present_single_as_multi"] and question.type == "single":
            assert question.presented_type == "multi"
        else:
            assert question.presented_type is None


nonblank = text.filter(lambda value: bool(value.strip()))


@st.composite
def valid_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """Payloads that are valid almost always (ids and values unique and non-blank)."""
    count = draw(st.integers(1, 4))
    ids = draw(st.lists(nonblank, min_size=count, max_size=count, unique_by=str.strip))
    payload = draw(payloads())
    payload["questions"] = []
    for question_id in ids:
        question = draw(questions())
        question["id"] = question_id
        question["prompt"] = draw(nonblank)
        size = draw(st.integers(1, 4))
        values = draw(st.lists(nonblank, min_size=size, max_size=size, unique_by=str.strip))
        question["options"] = []
        for value in values:
            option = draw(options())
            option["value"] = value
            option["label"] = draw(nonblank | st.just(" ") if derive_label(value) else nonblank)
            question["options"].append(option)
        payload["questions"].append(question)
    return payload


@given(valid_payloads(), kwargs)
def test_normalised_params_round_trip(payload: dict[str, Any], options: dict[str, bool]) -> None:
    validation = validate_ask_params(payload, **options)
    assume(validation.ok)
    params = validation.params
    assert params is not None
    saved = params.to_json()
    again = validate_ask_params(saved, **options)
    assert again.ok
    assert again.params == params
    assert params_from_saved(saved, present_single_as_multi=options["present_single_as_multi"]) == (
        params
    )


# --------------------------------------------------------------------------------------------
# The schema check passes exactly what the schema allows
# --------------------------------------------------------------------------------------------

SCHEMA_VARIANTS = [(name, True) for name in TOOL_NAMES] + [("ask_user", False)]


def _agrees(tool: str, background: bool, value: object) -> None:
    """``check_schema`` finds issues exactly when jsonschema (the draft 2020-12 reference
    implementation) says the value is invalid, and never changes the value."""
    from jsonschema import Draft202012Validator

    before = repr(value)  # repr: NaN is not equal to itself
    issues = schema_check.check_schema(tool, value, background=background)
    schema = schema_check._input_schema(tool, background=background)
    assert (not issues) == Draft202012Validator(schema).is_valid(value)
    assert all(issue.path for issue in issues)
    assert repr(value) == before


@pytest.mark.parametrize(("tool", "background"), SCHEMA_VARIANTS)
@given(value=json_like)
def test_the_schema_check_agrees_with_jsonschema(
    tool: str, background: bool, value: object
) -> None:
    _agrees(tool, background, value)


@given(payloads(), st.booleans())
def test_the_schema_check_agrees_on_ask_user_payloads(
    payload: dict[str, Any], background: bool
) -> None:
    _agrees("ask_user", background, payload)
    _agrees("ask_user", background, derive_labels(payload))
