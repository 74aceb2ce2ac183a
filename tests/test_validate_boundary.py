"""The boundary in ``ask_user`` validation: untrusted arguments pass ``untrusted.check`` first,
and a refusal is a schema issue at the refused value's path, with the boundary's own words.

At the bounds (text, values, depth, surrogates, key types) the outcome is checked to the
character and value; the runtime's entry points (``validate_bounded_params`` after its own
boundary check, ``validate_checked_params``) give the same outcome for what passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest

from pi_agent_ask.form import untrusted
from pi_agent_ask.form.types import Issue, Validation
from pi_agent_ask.form.validate import (
    validate_ask_params,
    validate_bounded_params,
    validate_checked_params,
)


class Key(StrEnum):
    """A ``str`` subclass, as a Python caller might use for keys or values."""

    LABEL = "label"
    TITLE = "title"
    VALUE = "value"


def test_a_checked_validation_leaves_a_refusal_to_the_boundary() -> None:
    lone = {"questions": [{"id": "q", "prompt": "\ud800?", "options": [{"value": "a"}]}]}
    assert validate_checked_params(lone) is None
    assert untrusted.check(lone) is not None
    assert validate_checked_params(base()) == validate_ask_params(base())


# --------------------------------------------------------------------------------------------
# The boundary, at its bounds
# --------------------------------------------------------------------------------------------

SCHEMA = 'Validation failed for tool "ask_user": '


def base(**root: Any) -> dict[str, Any]:
    option = {"value": "a", "label": "A", "description": "d", "recommended": True}
    question = {"id": "q", "label": "L", "prompt": "P?", "context": "c", "type": "multi"}
    return {"title": "T", "background": False, "questions": [{**question, "options": [option]}]}


def tally(value: object) -> tuple[int, int]:
    """``(characters of text, values)``: every string and key counts its characters, every
    value (a container and each of its items) counts one."""
    if isinstance(value, dict):
        chars, values = sum(len(key) for key in value), 1
        for item in value.values():
            more_chars, more_values = tally(item)
            chars, values = chars + more_chars, values + more_values
        return chars, values
    if isinstance(value, list):
        chars, values = 0, 1
        for item in value:
            more_chars, more_values = tally(item)
            chars, values = chars + more_chars, values + more_values
        return chars, values
    return (len(value) if isinstance(value, str) else 0), 1


def text_of(value: object) -> int:
    return tally(value)[0]


def values_of(value: object) -> int:
    return tally(value)[1]


def agree(value: object) -> Validation:
    """The public outcome; what passes the boundary gets the same from the runtime's entries."""
    got = validate_ask_params(value)
    if untrusted.check(value) is None:
        assert validate_bounded_params(value) == got
        assert validate_checked_params(value) == got
    else:
        assert validate_checked_params(value) is None
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
    # A million values: only the public outcome.
    got = validate_ask_params(payload)
    assert got.ok
    payload["questions"][0]["extra"] = 0
    got = validate_ask_params(payload)
    assert got.issues == (
        Issue("questions[0].extra", f"{SCHEMA}holds more than {untrusted.MAX_VALUES} values"),
    )


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
