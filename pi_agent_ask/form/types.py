"""The values of the ask contract: normalised input, per-question drafts, and results.

Everything here is immutable (``attrs.frozen``) and free of I/O. JSON-shaped dicts exist only at
the edges: ``from_json``/``to_json`` on the types that cross a boundary (tool arguments, journal
entries, tool results). Field names in Python are snake_case; the JSON names are the contract's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import attrs

T = TypeVar("T")
V = TypeVar("V")

QuestionType = Literal["single", "multi"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("single", "multi")

JSON = Any
"""A value made of dict, list, str, int, float, bool and None."""


def _tuple(items: Any) -> tuple[Any, ...]:
    # Already a tuple (the common case under ``attrs.evolve``): keep it, no copy.
    return items if type(items) is tuple else tuple(items)


# --------------------------------------------------------------------------------------------
# Input (normalised)
# --------------------------------------------------------------------------------------------


@attrs.frozen
class Option:
    """One answer option of a question, trimmed, with blank optional fields omitted."""

    value: str
    label: str
    description: str | None = None
    recommended: bool | None = None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"value": self.value, "label": self.label}
        if self.description is not None:
            out["description"] = self.description
        if self.recommended is not None:
            out["recommended"] = self.recommended
        return out


@attrs.frozen
class Question:
    """A normalised question.

    ``type`` is the type the agent requested; ``presented_type`` is how the form presents it
    when it opens (``behaviour.presentSingleAsMulti`` may turn a requested ``single`` into
    ``multi``). ``context`` holds loaded file text, never a path.
    """

    id: str
    label: str
    prompt: str
    type: QuestionType
    options: tuple[Option, ...] = attrs.field(converter=_tuple)
    context: str | None = None
    presented_type: QuestionType | None = None

    @property
    def effective_type(self) -> QuestionType:
        return self.presented_type or self.type

    def to_json(self) -> dict[str, JSON]:
        """The question as normalised ``ask_user`` arguments (requested type only)."""
        # Each option's ``Option.to_json`` written out, in a loop (a call per option, and a
        # comprehension, are calls of their own on CPython 3.11): every queued form's
        # parameters are written to the journal.
        options: list[JSON] = []
        for option in self.options:
            item: dict[str, JSON] = {"value": option.value, "label": option.label}
            if option.description is not None:
                item["description"] = option.description
            if option.recommended is not None:
                item["recommended"] = option.recommended
            options.append(item)
        out: dict[str, JSON] = {
            "id": self.id,
            "label": self.label,
            "prompt": self.prompt,
            "type": self.type,
            "options": options,
        }
        if self.context is not None:
            out["context"] = self.context
        return out


@attrs.frozen
class AskParams:
    """Normalised ``ask_user`` arguments."""

    questions: tuple[Question, ...] = attrs.field(converter=_tuple)
    title: str | None = None
    background: bool = False
    _derived: object | None = attrs.field(init=False, default=None, eq=False, repr=False)
    """What is derived from these params alone (``form/result.py``'s ``_shape_of``: the
    question metadata their results share), made on first use (``None`` until then) and kept
    with the params, which are immutable, so nothing in it goes stale. The value itself, not
    an object holding it: a background form's params stay with its queue item, and a holder
    would be one more object per form for the cyclic collector to walk. Not part of the
    params' value (equality, hash, repr and ``to_json`` ignore it); an ``attrs.evolve`` copy
    starts without. A plain field, not a ``cached_property``: attrs gives a class with one a
    ``__getattr__``, which takes every attribute read of the class off CPython's fast path."""
    _texts: tuple[str, tuple[str, ...]] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )
    """The texts of the questions as a background answer lists them (``form/text.py``), kept
    as ``_derived`` is, when first made for a result whose questions are ``_derived``: text
    only (a tuple of strings, which the cyclic collector stops tracking), not one more object
    for it to walk for each answered form."""

    def to_json(self) -> dict[str, JSON]:
        """Normalised arguments as the tool would accept them again (presentation not applied)."""
        out: dict[str, JSON] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.background:
            out["background"] = True
        questions: list[JSON] = []  # a loop: a comprehension is a call of its own
        for question in self.questions:
            questions.append(question.to_json())
        out["questions"] = questions
        return out

    def question(self, question_id: str) -> Question | None:
        for question in self.questions:
            if question.id == question_id:
                return question
        return None


@attrs.frozen
class Issue:
    """One problem with ``ask_user`` arguments: where (``path``) and what (``message``)."""

    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@attrs.frozen
class Validation:
    """The outcome of validating ``ask_user`` arguments."""

    params: AskParams | None
    issues: tuple[Issue, ...] = attrs.field(converter=_tuple, default=())
    schema_error: bool = False
    """True when the arguments failed the JSON Schema (a host tool error, not ``invalid_input``)."""

    @property
    def ok(self) -> bool:
        return self.params is not None and not self.issues


# --------------------------------------------------------------------------------------------
# Drafts: what the person has entered for one question
# --------------------------------------------------------------------------------------------


@attrs.frozen
class Image:
    """An attached image: ``data`` is base64 without a data-URI prefix."""

    id: str
    mime_type: str
    data: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "mimeType": self.mime_type, "data": self.data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Image:
        return cls(id=str(data["id"]), mime_type=str(data["mimeType"]), data=str(data["data"]))


def _option_notes(value: Any) -> Mapping[str, str]:
    return value if type(value) is _FrozenDict else _FrozenDict(value)


class _FrozenDict(dict[str, Any]):
    """A dict that refuses mutation, so drafts stay values. Hashable by content."""

    __slots__ = ()  # no instance dict: as small and as quick to make as a dict

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("frozen mapping")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: kv[0])))


def frozen_mapping(items: Mapping[str, V] | None = None) -> Mapping[str, V]:
    return _FrozenDict(items or {})


# A dict class, not slotted: the form reducer copies a draft as one dict copy with the changed
# fields (form/state.py, "Structural sharing").
@attrs.frozen(slots=False)
class Draft:
    """One question's draft answer.

    ``selected`` holds 0-based indices of selected real options in option order.
    ``custom_text`` is kept even while the custom row is deselected (multi-select), so the
    person never loses it; only ``custom_selected`` decides whether it is submitted.
    """

    selected: tuple[int, ...] = attrs.field(converter=_tuple, default=())
    custom_text: str = ""
    custom_selected: bool = False
    note: str = ""
    option_notes: Mapping[str, str] = attrs.field(converter=_option_notes, factory=dict)
    custom_images: tuple[Image, ...] = attrs.field(converter=_tuple, default=())
    note_images: tuple[Image, ...] = attrs.field(converter=_tuple, default=())
    option_note_images: Mapping[str, tuple[Image, ...]] = attrs.field(
        converter=_option_notes, factory=dict
    )
    skipped: bool = False

    @property
    def has_custom_answer(self) -> bool:
        return self.custom_selected and (bool(self.custom_text.strip()) or bool(self.custom_images))

    @property
    def is_answered(self) -> bool:
        """A committed answer: a selected option or a selected, non-empty custom answer."""
        return not self.skipped and (bool(self.selected) or self.has_custom_answer)

    @property
    def has_notes(self) -> bool:
        return (
            bool(self.note.strip())
            or bool(self.note_images)
            or any(text.strip() for text in self.option_notes.values())
            or any(self.option_note_images.values())
        )

    @property
    def is_empty(self) -> bool:
        return self == EMPTY_DRAFT

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        if self.selected:
            out["selected"] = list(self.selected)
        if self.custom_text:
            out["customText"] = self.custom_text
        if self.custom_selected:
            out["customSelected"] = True
        if self.note:
            out["note"] = self.note
        if self.option_notes:
            out["optionNotes"] = dict(self.option_notes)
        if self.custom_images:
            out["customImages"] = [image.to_json() for image in self.custom_images]
        if self.note_images:
            out["noteImages"] = [image.to_json() for image in self.note_images]
        if self.option_note_images:
            out["optionNoteImages"] = {
                value: [image.to_json() for image in images]
                for value, images in self.option_note_images.items()
            }
        if self.skipped:
            out["skipped"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Draft:
        return cls(
            selected=tuple(int(i) for i in data.get("selected", ())),
            custom_text=str(data.get("customText", "")),
            custom_selected=bool(data.get("customSelected", False)),
            note=str(data.get("note", "")),
            option_notes={str(k): str(v) for k, v in dict(data.get("optionNotes", {})).items()},
            custom_images=tuple(Image.from_json(i) for i in data.get("customImages", ())),
            note_images=tuple(Image.from_json(i) for i in data.get("noteImages", ())),
            option_note_images={
                str(k): tuple(Image.from_json(i) for i in v)
                for k, v in dict(data.get("optionNoteImages", {})).items()
            },
            skipped=bool(data.get("skipped", False)),
        )


EMPTY_DRAFT = Draft()


# --------------------------------------------------------------------------------------------
# Fast construction (for hot paths inside the package)
# --------------------------------------------------------------------------------------------
# Validation builds an ``Option`` per option and a ``Question`` per question of every call; the
# attrs ``__init__`` sets each field through ``object.__setattr__`` looked up by name and runs
# the converters. The setters below are the classes' own slot descriptors (they bypass the
# frozen ``__setattr__``), for callers whose values are already in their final types (tuples,
# not lists); ``slot_builder`` does the same at about half their cost (validation, results and
# the reducer's editors use it). The objects they build are the same objects the public
# constructors build: same class, equality, hash, repr, and frozen (``tests/test_types_fast.py``).
new_instance = object.__new__


def _slot_setters(cls: type, *names: str) -> tuple[Any, ...]:
    return tuple(getattr(cls, name).__set__ for name in names)


OPTION_SETTERS: tuple[Any, ...] = _slot_setters(
    Option, "value", "label", "description", "recommended"
)
QUESTION_SETTERS: tuple[Any, ...] = _slot_setters(
    Question, "id", "label", "prompt", "type", "options", "context", "presented_type"
)
_ASK_PARAMS_SETTERS = _slot_setters(
    AskParams, "questions", "title", "background", "_derived", "_texts"
)
_VALIDATION_SETTERS = _slot_setters(Validation, "params", "issues", "schema_error")


def slot_builder(cls: type[T]) -> type[Any]:
    """A subclass of the slotted frozen attrs class ``cls`` whose instances take plain
    attribute stores, for building a ``cls`` field by field at the cost of a plain object.

    Fill an instance (``new_instance(builder)``) with ``obj.field = value`` for every field,
    then make it a ``cls`` with ``obj.__class__ = cls``: the subclass adds no slot, so the
    layouts are the same and CPython allows the assignment; from then on the object is exactly
    what ``cls(...)`` builds (its class, fields, equality, hash, and frozen again). The
    subclass's own ``__setattr__`` and ``__delattr__`` are ``object``'s (both: one attrs method
    left would keep the slow path), so each store is the interpreter's slot store, about a
    tenth of a call to the slot's ``__set__``. Instances of the builder never escape.
    """
    return type(
        f"_{cls.__name__}Builder",
        (cls,),
        {
            "__slots__": (),
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
            "__module__": cls.__module__,
        },
    )


def ask_params_of(
    questions: tuple[Question, ...], title: str | None, background: bool
) -> AskParams:
    """``AskParams(questions, title, background)`` for a tuple of questions."""
    params: AskParams = new_instance(AskParams)
    set_questions, set_title, set_background, set_derived, set_texts = _ASK_PARAMS_SETTERS
    set_questions(params, questions)
    set_title(params, title)
    set_background(params, background)
    set_derived(params, None)
    set_texts(params, None)
    return params


def valid(params: AskParams) -> Validation:
    """``Validation(params)``: valid arguments, no issues."""
    validation: Validation = new_instance(Validation)
    set_params, set_issues, set_schema_error = _VALIDATION_SETTERS
    set_params(validation, params)
    set_issues(validation, ())
    set_schema_error(validation, False)
    return validation
