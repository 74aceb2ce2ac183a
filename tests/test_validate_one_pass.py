"""The one pass of ``ask_user`` validation against the stages it replaces on the hot path.

``form/validate.py`` validates arguments of the current shape in one walk (``_one_pass``) and
leaves everything else (schema errors, legacy fields, boundary refusals, unusual types) to the
stages (``_in_stages``: boundary check, legacy conversion, label derivation, jsonschema,
semantic checks, context files, normalisation), which are the reference. These tests hold the
two together:

- whenever the one pass decides, its outcome is exactly the stages' (issues with their paths,
  messages and order; the normalised params; ``schema_error``), in every mode;
- the one pass decides every call of the current shape (so a regression that quietly hands
  everything to the stages, correct but slow, fails here, not only in the benchmark);
- at the bounds of the boundary (text, values, depth, surrogates, key types) the public
  outcome is the stages' to the character and value.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pi_agent_ask.form import untrusted
from pi_agent_ask.form import validate as validate_module
from pi_agent_ask.form.types import Issue, Validation
from pi_agent_ask.form.validate import (
    derive_label,
    is_context_path,
    params_from_saved,
    validate_ask_params,
    validate_bounded_params,
    validate_checked_params,
)

MODES = st.sampled_from(sorted(validate_module._MODES.values(), key=repr))


def reference(arguments: object, *, checked: bool, load_files: bool = True, **flags: bool) -> Any:
    mode = validate_module._MODES[
        checked,
        load_files,
        flags.get("present_single_as_multi", False),
        flags.get("background_only", False),
    ]
    return validate_module._in_stages(arguments, mode)


class Key(StrEnum):
    """A ``str`` subclass, as a Python caller might use for keys or values."""

    LABEL = "label"
    TITLE = "title"
    VALUE = "value"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Context paths: a text file, an empty file, binary data, a directory, a missing file."""
    root = tmp_path_factory.mktemp("contexts")
    (root / "notes.md").write_text("  Some notes.\n")
    (root / "empty.txt").write_text(" \n")
    (root / "data.bin").write_bytes(b"\x00\x01")
    return [str(root / name) for name in ("notes.md", "empty.txt", "data.bin", "missing")] + [
        str(root)
    ]


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

# Text that exercises trimming, duplicates after trimming, label derivation and non-ASCII;
# mostly not blank, so that a good share of the generated calls is valid.
CLEAN_TEXT = st.one_of(
    *[st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)] * 12,
    *[st.sampled_from(["a", " a ", "b", "a-b_c", "-x-", "Q1", "größe", "x\ny", "\x00", " /x"])] * 3,
    st.sampled_from(["", " ", "--", "\t"]),
)


def some(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Lists of one to four, now and then empty."""
    return st.one_of(*[st.lists(elements, min_size=1, max_size=4)] * 9, st.just([]))


HOSTILE_TEXT = st.sampled_from(["\ud800", "a\udfffb", "ok\udc80"])

_DEEP: Any = "leaf"
for _ in range(70):
    _DEEP = {"k": _DEEP}

# Values a field should not hold, or should hold only in another form.
ODD = (
    st.sampled_from(
        [None, 0, 1.5, True, [], {}, ["x"], {"k": "v"}, Key.VALUE, "preview", _DEEP, b"x"]
    )
    | HOSTILE_TEXT
)
EXTRA_KEYS = st.sampled_from(
    ["extra", "required", "preview", "previewFile", 1, Key.LABEL, "\udcff", "", "background"]
)
EXTRA_VALUES = st.sampled_from([None, 1, "text", " /abs", [1, [2]], {"k": None}, _DEEP, "\ud800"])


ROOT_FIELDS = ["questions", "title", "background"]
QUESTION_FIELDS = ["id", "prompt", "options", "label", "context", "type"]
OPTION_FIELDS = ["value", "label", "description", "recommended"]


@st.composite
def options(draw: st.DrawFn) -> dict[Any, Any]:
    out: dict[Any, Any] = {"value": draw(CLEAN_TEXT)}
    if draw(st.booleans()) or derive_label(out["value"]) is None:
        out["label"] = draw(CLEAN_TEXT)
    if draw(st.booleans()):
        out["description"] = draw(CLEAN_TEXT)
    if draw(st.booleans()):
        out["recommended"] = draw(st.booleans())
    return out


@st.composite
def questions(draw: st.DrawFn, paths: list[str]) -> dict[Any, Any]:
    out: dict[Any, Any] = {
        "id": draw(st.one_of(CLEAN_TEXT, CLEAN_TEXT, CLEAN_TEXT, st.sampled_from(["a", " a"]))),
        "prompt": draw(CLEAN_TEXT),
        "options": draw(some(options())),
    }
    if draw(st.booleans()):
        out["label"] = draw(CLEAN_TEXT)
    if draw(st.booleans()):
        path = st.sampled_from(paths[:1] * 4 + paths).map(lambda path: f" {path} ")
        out["context"] = draw(CLEAN_TEXT | path)
    if draw(st.booleans()):
        out["type"] = draw(st.sampled_from(["single", "multi"]))
    return out


@st.composite
def arguments(draw: st.DrawFn, paths: list[str], *, defects: int = 0) -> Any:
    """``ask_user`` arguments of the current shape, half of them valid, the rest with semantic
    issues; then up to ``defects`` defects (an odd value for a field, an extra, legacy or
    hostile key, a missing field, an object replaced by an odd value), so that most defective
    calls are valid but for the defect."""
    out: dict[Any, Any] = {"questions": draw(some(questions(paths)))}
    if draw(st.booleans()):
        out["title"] = draw(CLEAN_TEXT)
    if draw(st.booleans()):
        out["background"] = draw(st.booleans())
    if draw(st.booleans()):
        out = repaired(out, paths[0])
    if not defects:
        return out
    for _ in range(draw(st.integers(1, defects))):
        places: list[tuple[dict[Any, Any], list[str], list[Any] | None]] = [
            (out, ROOT_FIELDS, None)
        ]
        for question in out["questions"] if isinstance(out.get("questions"), list) else ():
            if not isinstance(question, dict):
                continue
            places.append((question, QUESTION_FIELDS, out["questions"]))
            for option in question["options"] if isinstance(question.get("options"), list) else ():
                if isinstance(option, dict):
                    places.append((option, OPTION_FIELDS, question["options"]))
        target, fields, container = draw(st.sampled_from(places))
        kind = draw(st.sampled_from(["odd value", "extra key", "missing", "replaced", "legacy"]))
        if kind == "legacy":
            # The fields of older releases, which the stages convert.
            if fields is QUESTION_FIELDS:
                target["type"] = "preview"
            else:
                legacy = draw(st.sampled_from(["preview", "previewFile"]))
                target[legacy] = draw(st.sampled_from([" text ", "", "relative", *paths]))
        elif kind == "odd value":
            target[draw(st.sampled_from(fields))] = draw(ODD)
        elif kind == "extra key":
            extra: object = draw(EXTRA_KEYS)
            target.pop(extra, None)  # a dict keeps the first of equal keys: Key.LABEL must be new
            target[extra] = draw(EXTRA_VALUES)
        elif kind == "missing":
            target.pop(draw(st.sampled_from(fields)), None)
        elif container is None:
            return draw(ODD)
        else:
            container[container.index(target)] = draw(ODD)
    return out


def repaired(arguments: dict[str, Any], good_path: str) -> dict[str, Any]:
    """``arguments`` with every semantic problem mended (so they are valid): Hypothesis
    favours blank text and empty lists, which would make valid calls rare."""
    if not arguments["questions"]:
        arguments["questions"] = [{"id": "q", "prompt": "P", "options": []}]
    ids: set[str] = set()
    for q_index, question in enumerate(arguments["questions"]):
        if not question["id"].strip() or question["id"].strip() in ids:
            question["id"] = f" id{q_index} "
        ids.add(question["id"].strip())
        if not question["prompt"].strip():
            question["prompt"] = "P"
        context = question.get("context")
        if isinstance(context, str) and is_context_path(context.strip()):
            question["context"] = good_path
        if not question["options"]:
            question["options"] = [{"value": "v"}]
        values: set[str] = set()
        for o_index, option in enumerate(question["options"]):
            if not option["value"].strip() or option["value"].strip() in values:
                option["value"] = f"v{o_index} "
            values.add(option["value"].strip())
            if not option.get("label", " ").strip() and derive_label(option["value"]) is None:
                option["label"] = "L"
    return arguments


# --------------------------------------------------------------------------------------------
# The one pass agrees with the stages
# --------------------------------------------------------------------------------------------


@settings(max_examples=400)
@given(data=st.data(), mode=MODES)
def test_the_one_pass_gives_the_stages_outcome_or_leaves_it_to_them(
    files: list[str], data: st.DataObject, mode: Any
) -> None:
    value = data.draw(arguments(files, defects=3))
    fast = validate_module._one_pass(value, mode)
    event("one pass decided" if fast is not None else "left to the stages")
    if fast is not None:
        event("valid" if fast.ok else "semantic issues")
        assert fast == validate_module._in_stages(value, mode)


@settings(max_examples=300)
@given(data=st.data(), mode=MODES)
def test_the_one_pass_decides_every_call_of_the_current_shape(
    files: list[str], data: st.DataObject, mode: Any
) -> None:
    value = data.draw(arguments(files))
    fast = validate_module._one_pass(value, mode)
    assert fast is not None, value
    assert fast == validate_module._in_stages(value, mode)
    event("valid" if fast.ok else "semantic issues")


@settings(max_examples=200)
@given(data=st.data(), as_multi=st.booleans(), background_only=st.booleans())
def test_the_entry_points_give_the_stages_outcome(
    files: list[str], data: st.DataObject, as_multi: bool, background_only: bool
) -> None:
    value = data.draw(arguments(files, defects=data.draw(st.sampled_from([0, 2]))))
    flags = {"present_single_as_multi": as_multi, "background_only": background_only}
    assert validate_ask_params(
        value, present_single_as_multi=as_multi, background_only=background_only
    ) == reference(value, checked=True, **flags)
    assert validate_bounded_params(
        value, present_single_as_multi=as_multi, background_only=background_only
    ) == reference(value, checked=False, **flags)
    saved = reference(value, checked=False, load_files=False, present_single_as_multi=as_multi)
    assert params_from_saved(value, present_single_as_multi=as_multi) == (
        saved.params if saved.ok else None
    )


@settings(max_examples=200)
@given(data=st.data(), as_multi=st.booleans(), background_only=st.booleans())
def test_a_checked_validation_means_the_boundary_passed(
    files: list[str], data: st.DataObject, as_multi: bool, background_only: bool
) -> None:
    # ``call_tool`` skips ``untrusted.check`` of the arguments when this decides them.
    value = data.draw(arguments(files, defects=data.draw(st.sampled_from([0, 3]))))
    flags = {"present_single_as_multi": as_multi, "background_only": background_only}
    checked = validate_checked_params(value, **flags)
    event("decided" if checked is not None else "left to the boundary and the stages")
    if checked is not None:
        assert untrusted.check(value) is None
        assert checked == reference(value, checked=True, **flags)
        assert checked == validate_bounded_params(value, **flags)


def test_a_checked_validation_leaves_a_refusal_to_the_boundary() -> None:
    lone = {"questions": [{"id": "q", "prompt": "\ud800?", "options": [{"value": "a"}]}]}
    assert validate_checked_params(lone) is None
    assert untrusted.check(lone) is not None
    assert validate_checked_params(base()) == validate_ask_params(base())


def test_the_benchmark_payloads_are_decided_by_the_one_pass() -> None:
    from benchmarks.bench_form import make_payload

    for size in ((1, 3), (10, 10), (100, 20)):
        payload = make_payload(*size)
        for mode in validate_module._MODES.values():
            fast = validate_module._one_pass(payload, mode)
            assert fast is not None and fast.ok
            assert fast == validate_module._in_stages(payload, mode)


# --------------------------------------------------------------------------------------------
# The boundary, at its bounds
# --------------------------------------------------------------------------------------------

SCHEMA = 'Validation failed for tool "ask_user": '


def base(**root: Any) -> dict[str, Any]:
    option = {"value": "a", "label": "A", "description": "d", "recommended": True}
    question = {"id": "q", "label": "L", "prompt": "P?", "context": "c", "type": "multi"}
    return {"title": "T", "background": False, "questions": [{**question, "options": [option]}]}


def text_of(value: object) -> int:
    outcome = untrusted.measure(value, depth=0)
    assert outcome is not None
    return outcome[0]


def values_of(value: object) -> int:
    outcome = untrusted.measure(value, depth=0)
    assert outcome is not None
    return outcome[1]


def agree(value: object) -> Validation:
    """The public outcome, checked against the stages (and the runtime's entry too)."""
    got = validate_ask_params(value)
    assert got == reference(value, checked=True)
    assert validate_bounded_params(value) == reference(value, checked=False)
    return got


def refused(value: object) -> tuple[str, str]:
    got = agree(value)
    assert got.schema_error and got.params is None
    [issue] = got.issues
    refusal = untrusted.check(value)
    assert refusal is not None
    assert issue.path == (refusal.path or "root")
    assert issue.message == SCHEMA + refusal.message
    return issue.path, issue.message.removeprefix(SCHEMA)


@pytest.mark.parametrize("where", ["title", "prompt", "description"])
def test_text_at_the_bound_passes_and_one_character_more_is_refused(where: str) -> None:
    payload = base()
    fill = untrusted.MAX_TEXT_CHARS - text_of(payload)
    target = payload if where == "title" else payload["questions"][0]
    if where == "description":
        target = target["options"][0]
    target[where] += "x" * fill
    assert text_of(payload) == untrusted.MAX_TEXT_CHARS
    assert agree(payload).ok
    target[where] += "x"
    assert refused(payload)[1] == f"holds more than {untrusted.MAX_TEXT_CHARS} characters of text"


def test_text_in_keys_counts() -> None:
    payload = base()
    fill = untrusted.MAX_TEXT_CHARS - text_of(payload)
    payload["x" * fill] = None  # an unknown key: ignored, but its text counts
    assert agree(payload).ok
    payload["questions"][0]["options"][0]["e"] = 0
    assert refused(payload)[1] == f"holds more than {untrusted.MAX_TEXT_CHARS} characters of text"


def test_values_at_the_bound_pass_and_one_more_is_refused() -> None:
    payload = base()
    payload["questions"][0]["options"][0]["extra"] = []
    fill = untrusted.MAX_VALUES - values_of(payload)
    payload["questions"][0]["options"][0]["extra"] = [0] * fill
    # A million values: only the public outcome against the stages (the other tests also
    # compare the runtime's entry point, which does not count).
    got = validate_ask_params(payload)
    assert got.ok
    assert got == reference(payload, checked=True)
    payload["questions"][0]["extra"] = 0
    got = validate_ask_params(payload)
    assert got.issues == (
        Issue("questions[0].extra", f"{SCHEMA}holds more than {untrusted.MAX_VALUES} values"),
    )
    assert got == reference(payload, checked=True)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(("level", "depth"), [("root", 1), ("question", 3), ("option", 5)])
def test_nesting_at_the_bound_passes_and_one_level_more_is_refused(level: str, depth: int) -> None:
    def at_level(extra: Any) -> dict[str, Any]:
        payload = base()
        target = {"root": payload, "question": payload["questions"][0]}.get(
            level, payload["questions"][0]["options"][0]
        )
        target["extra"] = extra
        return payload

    # The extra value sits `depth` levels deep; a container at depth 64 is one too many.
    assert agree(at_level(nested(untrusted.MAX_DEPTH - depth))).ok
    assert refused(at_level(nested(untrusted.MAX_DEPTH - depth + 1)))[1] == (
        f"is nested deeper than {untrusted.MAX_DEPTH} levels"
    )


OPTION: list[str | int] = ["questions", 0, "options", 0]


def places() -> Iterator[tuple[str, list[str | int]]]:
    for field in ("title",):
        yield field, [field]
    for field in ("id", "label", "prompt", "context", "type"):
        yield f"questions[0].{field}", ["questions", 0, field]
    for field in ("value", "label", "description"):
        yield f"questions[0].options[0].{field}", ["questions", 0, "options", 0, field]


def put(payload: dict[str, Any], route: list[str | int], value: Any) -> None:
    target: Any = payload
    for step in route[:-1]:
        target = target[step]
    target[route[-1]] = value


@pytest.mark.parametrize(("path", "route"), list(places()))
def test_a_lone_surrogate_in_any_field_is_refused_there(path: str, route: list[str | int]) -> None:
    payload = base()
    put(payload, route, "ok \udc80")
    assert refused(payload) == (
        path,
        "is not valid Unicode: a lone surrogate U+DC80 at character 3",
    )


@pytest.mark.parametrize(
    ("path", "route"),
    [("root", []), ("questions[0]", ["questions", 0]), ("questions[0].options[0]", OPTION)],
)
@pytest.mark.parametrize("key", [1, None, Key.LABEL, Key.TITLE, "bad\ud800"])
def test_keys_that_are_not_plain_text_are_refused(
    path: str, route: list[str | int], key: Any
) -> None:
    payload = base()
    target: Any = payload
    for step in route:
        target = target[step]
    target.pop(key, None)  # a dict keeps the first of equal keys: Key.LABEL must be new
    target[key] = "x"
    where, message = refused(payload)
    assert where == path
    assert message.startswith("has a key that")


def test_str_subclass_values_are_text_and_normalise_like_str() -> None:
    payload = base()
    payload["questions"][0]["options"][0]["label"] = Key.LABEL
    payload["title"] = Key.TITLE
    params = agree(payload).params
    assert params is not None
    assert type(params.title) is str and params.title == "title"
    assert type(params.questions[0].options[0].label) is str
