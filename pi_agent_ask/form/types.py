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
    return items if isinstance(items, tuple) else tuple(items)


# --------------------------------------------------------------------------------------------
# Input (normalised)
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
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


@attrs.frozen(repr=False)
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
        out: dict[str, JSON] = {
            "id": self.id,
            "label": self.label,
            "prompt": self.prompt,
            "type": self.type,
            "options": [option.to_json() for option in self.options],
        }
        if self.context is not None:
            out["context"] = self.context
        return out


@attrs.frozen(repr=False)
class AskParams:
    """Normalised ``ask_user`` arguments."""

    questions: tuple[Question, ...] = attrs.field(converter=_tuple)
    title: str | None = None
    background: bool = False

    def to_json(self) -> dict[str, JSON]:
        """Normalised arguments as the tool would accept them again (presentation not applied)."""
        out: dict[str, JSON] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.background:
            out["background"] = True
        out["questions"] = [question.to_json() for question in self.questions]
        return out

    def question(self, question_id: str) -> Question | None:
        for question in self.questions:
            if question.id == question_id:
                return question
        return None


@attrs.frozen(repr=False)
class Issue:
    """One problem with ``ask_user`` arguments: where (``path``) and what (``message``)."""

    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@attrs.frozen(repr=False)
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


@attrs.frozen(repr=False)
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
    return frozen_mapping(value)


class _FrozenDict(dict[str, Any]):
    """A dict that refuses mutation, so drafts stay values. Hashable by content."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("frozen mapping")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: kv[0])))


def frozen_mapping(items: Mapping[str, V] | None = None) -> Mapping[str, V]:
    """An immutable copy of ``items``; a frozen mapping is immutable already, and is kept."""
    if isinstance(items, _FrozenDict):
        return items
    return _FrozenDict(items or {})


@attrs.frozen(repr=False)
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
