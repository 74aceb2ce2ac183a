"""The objects the hot paths build through slots (``form/types.py``, "Fast construction") are
the objects the public constructors build: same class, equality, hash, repr, frozen."""

from __future__ import annotations

import weakref
from typing import Any

import attrs
import pytest

from pi_agent_ask.form.types import (
    AskParams,
    Option,
    Question,
    Validation,
    new_instance,
    slot_builder,
)
from pi_agent_ask.form.validate import validate_ask_params


def _payload() -> dict[str, object]:
    return {
        "title": "  Release  ",
        "questions": [
            {
                "id": " scope ",
                "prompt": " Which parts? ",
                "type": "multi",
                "context": "notes",
                "options": [
                    {"value": "api", "label": " API ", "description": " the surface "},
                    {"value": "cli", "label": "CLI", "recommended": True},
                    {"value": "docs_site"},
                ],
            },
            {
                "id": "when",
                "label": "Date",
                "prompt": "When?",
                "options": [{"value": "now", "label": "Now", "description": "  "}],
            },
        ],
    }


def _rebuilt(validation: Validation) -> Validation:
    """The same outcome through the public constructors, field by field."""
    params = validation.params
    assert params is not None
    questions = [
        Question(
            id=q.id,
            label=q.label,
            prompt=q.prompt,
            type=q.type,
            options=[Option(o.value, o.label, o.description, o.recommended) for o in q.options],
            context=q.context,
            presented_type=q.presented_type,
        )
        for q in params.questions
    ]
    return Validation(
        params=AskParams(questions=questions, title=params.title, background=params.background),
        issues=list(validation.issues),
        schema_error=validation.schema_error,
    )


@pytest.mark.parametrize("multi", [False, True])
def test_fast_built_validation_is_the_constructed_one(multi: bool) -> None:
    fast = validate_ask_params(_payload(), present_single_as_multi=multi)
    slow = _rebuilt(fast)
    assert fast.ok
    pairs: list[tuple[Any, Any]] = [(fast, slow), (fast.params, slow.params)]
    assert fast.params is not None and slow.params is not None
    for fq, sq in zip(fast.params.questions, slow.params.questions, strict=True):
        pairs.append((fq, sq))
        pairs += zip(fq.options, sq.options, strict=True)
    for built, constructed in pairs:
        assert type(built) is type(constructed)
        assert built == constructed
        assert hash(built) == hash(constructed)
        assert repr(built) == repr(constructed)
        # Every field in its final type (tuples, not lists), as the converters leave them.
        for field in attrs.fields(type(built)):
            assert type(getattr(built, field.name)) is type(getattr(constructed, field.name))
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            built.label = "changed"
    # The values themselves, so the rebuilt copy cannot just mirror a wrong fast build.
    assert fast.params.title == "Release" and not fast.params.background
    scope = fast.params.questions[0]
    assert (scope.id, scope.label, scope.prompt, scope.type) == (
        "scope",
        "Q1",
        "Which parts?",
        "multi",
    )
    assert scope.options == (
        Option("api", "API", "the surface", None),
        Option("cli", "CLI", None, True),
        Option("docs_site", "Docs site", None, None),
    )
    when = fast.params.questions[1]
    assert when.presented_type == ("multi" if multi else None)
    assert when.options == (Option("now", "Now", None, None),)


@pytest.mark.parametrize("cls", [Option, Question, AskParams, Validation])
def test_a_slot_builder_instance_becomes_exactly_a_constructed_one(cls: type[Any]) -> None:
    """``slot_builder``: filled by plain stores, then given the class, an object is the
    constructor's object (class, fields, equality, hash, repr, frozen, weak-referenceable),
    and the builder neither adds a slot nor leaves a way to change the object."""
    values: dict[type[Any], dict[str, Any]] = {
        Option: {"value": "a", "label": "A", "description": "d", "recommended": True},
        Question: {
            "id": "q",
            "label": "Q1",
            "prompt": "Which?",
            "type": "single",
            "options": (Option("a", "A"),),
            "context": None,
            "presented_type": "multi",
        },
        AskParams: {
            "questions": (),
            "title": "T",
            "background": True,
            "_derived": None,
            "_texts": None,
        },
        Validation: {"params": None, "issues": (), "schema_error": True},
    }
    fields = values[cls]
    assert [field.name for field in attrs.fields(cls)] == list(fields)
    builder = slot_builder(cls)
    assert builder.__slots__ == () and issubclass(builder, cls)
    built = new_instance(builder)
    for name, value in fields.items():
        setattr(built, name, value)
    built.__class__ = cls
    # Fields the constructor does not take (``AskParams._derived``, ``_texts``) it sets to their
    # defaults.
    given = {field.name: fields[field.name] for field in attrs.fields(cls) if field.init}
    constructed = cls(**given)
    for field in attrs.fields(cls):
        assert getattr(constructed, field.name) == fields[field.name]
    assert type(built) is cls
    assert built == constructed and hash(built) == hash(constructed)
    assert repr(built) == repr(constructed)
    assert weakref.ref(built)() is built
    name = next(iter(fields))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(built, name, "changed")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(built, name)
    assert getattr(built, name) == fields[name]


def test_a_background_outcome_is_what_an_attrs_constructor_builds() -> None:
    """``BackgroundOutcome`` writes its own ``__init__`` (slot setters); it keeps the
    constructor attrs would make: the same fields from the same arguments, positional or by
    name, defaults, equality, hash, repr, ``evolve`` and frozen."""
    from pi_agent_ask.form.result import AskResult, BackgroundOutcome

    @attrs.frozen
    class Model:
        request_id: str
        parent_tool_call_id: str | None = None
        result: AskResult | None = None
        error: str | None = None

    result = AskResult(cancelled=True)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("r",), {}),
        (("r", "c"), {}),
        (("r",), {"result": result}),
        (("r", None, result, "e"), {}),
        ((), {"request_id": "r", "error": "e", "parent_tool_call_id": "c"}),
    ]
    names = [field.name for field in attrs.fields(BackgroundOutcome)]
    assert names == [field.name for field in attrs.fields(Model)]
    for args, kwargs in calls:
        ours = BackgroundOutcome(*args, **kwargs)
        model = Model(*args, **kwargs)
        assert [getattr(ours, n) for n in names] == [getattr(model, n) for n in names]
        assert ours == BackgroundOutcome(**{n: getattr(model, n) for n in names})
        assert hash(ours) == hash(BackgroundOutcome(**{n: getattr(model, n) for n in names}))
        assert repr(ours) == repr(model).replace("Model(", "BackgroundOutcome(", 1)
        assert attrs.evolve(ours, error="x").error == "x"
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            ours.error = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        BackgroundOutcome()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        BackgroundOutcome("r", wrong=1)  # type: ignore[call-arg]
