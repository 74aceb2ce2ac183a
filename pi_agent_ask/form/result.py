"""Results of an ask flow: building them from drafts, and their two JSON forms.

An ``AskResult`` is what a form produced: the question metadata, the submitted answers, the
skipped question ids, and either ``cancelled`` or an ``invalid_input`` error. It has two JSON
forms (contract 000, §Output):

- ``to_details()``: the full result, for rendering, the journal, history and background
  answers: answers carry ``indices`` and images as ``{id, mimeType, data}`` under
  ``customImages`` / ``noteImages`` / ``optionNoteImages``; ``questions`` metadata is present.
- ``to_structured()``: the compact form the tool's ``outputSchema`` describes: no ``indices``,
  no question metadata, each answer's images inline as ``images: [{mimeType, data}]``.

``from_details(to_details(r)) == r`` holds for every result this module builds.

Rules of ``build_result`` (000 wins over the older catalog where they differ):

- an unanswered question without notes is omitted from ``answers``; a note-only entry stays;
- a skipped question has no entry and is listed in ``skippedQuestionIds`` in question order;
- ``values``/``labels`` are the selected options in option order, then the custom text last;
  ``indices`` are 1-based positions of the selected real options (the custom row has none);
- the custom answer (text and images) is submitted only while the custom row is selected; an
  image-only custom answer gets no synthetic ``values``, ``labels`` or ``customText``;
- ``optionNotes`` and ``optionNoteImages`` cover every option, selected or not;
- text is trimmed; blank custom text, notes and option notes are dropped;
- a cancelled result keeps partial answers but strips all image data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

import attrs

from pi_agent_ask.form.types import (
    EMPTY_DRAFT,
    JSON,
    QUESTION_TYPES,
    AskParams,
    Draft,
    Image,
    Issue,
    Option,
    Question,
    QuestionType,
    _FrozenDict,
    frozen_mapping,
    slot_builder,
)

__all__ = [
    "AnswerResult",
    "AskResult",
    "BackgroundOutcome",
    "QuestionMeta",
    "answers_from_remote",
    "build_result",
    "fallback_result",
    "invalid_result",
]


def _tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(items)


def _str_mapping(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return frozen_mapping(dict(value or {}))


def _issues(value: Iterable[Issue] | None) -> tuple[Issue, ...] | None:
    return None if value is None else tuple(value)


def _images_mapping(
    value: Mapping[str, Iterable[Image]] | None,
) -> Mapping[str, tuple[Image, ...]]:
    return frozen_mapping({key: tuple(images) for key, images in (value or {}).items()})


def _answers_mapping(value: Mapping[str, AnswerResult] | None) -> Mapping[str, AnswerResult]:
    return frozen_mapping(dict(value or {}))


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


@attrs.frozen
class AnswerResult:
    """One question's submitted answer.

    Invariant: ``values`` and ``labels`` have the same length; the first ``len(indices)`` of
    them belong to the selected real options, a trailing extra item is the custom text.
    """

    values: tuple[str, ...] = attrs.field(converter=_tuple, default=())
    labels: tuple[str, ...] = attrs.field(converter=_tuple, default=())
    indices: tuple[int, ...] = attrs.field(converter=_tuple, default=())
    custom_text: str | None = None
    note: str | None = None
    option_notes: Mapping[str, str] = attrs.field(converter=_str_mapping, factory=dict)
    custom_images: tuple[Image, ...] = attrs.field(converter=_tuple, default=())
    note_images: tuple[Image, ...] = attrs.field(converter=_tuple, default=())
    option_note_images: Mapping[str, tuple[Image, ...]] = attrs.field(
        converter=_images_mapping, factory=dict
    )

    @property
    def has_answer(self) -> bool:
        """A committed answer: a selected option, custom text, or custom images."""
        return bool(self.values) or self.custom_text is not None or bool(self.custom_images)

    @property
    def selected_values(self) -> tuple[str, ...]:
        """Values of the selected real options (the custom text excluded)."""
        return self.values[: len(self.indices)]

    @property
    def selected_labels(self) -> tuple[str, ...]:
        return self.labels[: len(self.indices)]

    @property
    def is_empty(self) -> bool:
        """Equal to ``AnswerResult()`` (field by field, without building one)."""
        return not (
            self.values
            or self.labels
            or self.indices
            or self.custom_text is not None
            or self.note is not None
            or self.option_notes
            or self.custom_images
            or self.note_images
            or self.option_note_images
        )

    def images(self) -> tuple[Image, ...]:
        """All images of this answer, custom first, then question note, then option notes;
        each image once (by id)."""
        seen: set[str] = set()
        out: list[Image] = []
        for image in self._all_images():
            if image.id not in seen:
                seen.add(image.id)
                out.append(image)
        return tuple(out)

    def _all_images(self) -> Iterator[Image]:
        yield from self.custom_images
        yield from self.note_images
        for images in self.option_note_images.values():
            yield from images

    def strip_images(self) -> AnswerResult:
        return attrs.evolve(self, custom_images=(), note_images=(), option_note_images={})

    def to_details(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "values": [*self.values],
            "labels": [*self.labels],
            "indices": [*self.indices],
        }
        if self.custom_text is not None:
            out["customText"] = self.custom_text
        if self.note is not None:
            out["note"] = self.note
        if self.option_notes:
            out["optionNotes"] = {**self.option_notes}  # not dict(...): a call of the type
        if self.custom_images or self.note_images or self.option_note_images:
            out.update(_image_details(self))
        return out

    def to_structured(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"values": [*self.values], "labels": [*self.labels]}
        if self.custom_text is not None:
            out["customText"] = self.custom_text
        if self.note is not None:
            out["note"] = self.note
        if self.option_notes:
            out["optionNotes"] = {**self.option_notes}  # not dict(...): a call of the type
        if self.custom_images or self.note_images or self.option_note_images:
            images = self.images()
            if images:
                out["images"] = [
                    {"mimeType": image.mime_type, "data": image.data} for image in images
                ]
        return out

    @classmethod
    def from_details(cls, data: Mapping[str, Any]) -> AnswerResult:
        values = _str_list(data.get("values", ()), "values")
        labels = _str_list(data.get("labels", ()), "labels")
        if len(values) != len(labels):
            raise ValueError("answer values and labels differ in length")
        return cls(
            values=values,
            labels=labels,
            indices=tuple(_int(i) for i in _list(data.get("indices", ()), "indices")),
            custom_text=_opt_str(data.get("customText")),
            note=_opt_str(data.get("note")),
            option_notes={str(k): _str(v) for k, v in _dict(data.get("optionNotes", {})).items()},
            custom_images=_images(data.get("customImages", ())),
            note_images=_images(data.get("noteImages", ())),
            option_note_images={
                str(k): _images(v) for k, v in _dict(data.get("optionNoteImages", {})).items()
            },
        )


def _question_entries(questions: tuple[QuestionMeta, ...]) -> list[JSON]:
    """Each question's entry of a result's details: ``QuestionMeta.to_json`` written out in a
    loop (a comprehension, or a call per question, costs a function call each on CPython 3.11)."""
    entries: list[JSON] = []
    for meta in questions:
        entry: dict[str, JSON] = {
            "id": meta.id,
            "label": meta.label,
            "prompt": meta.prompt,
            "type": meta.type,
        }
        if meta.presented_type is not None:
            entry["presentedType"] = meta.presented_type
        entries.append(entry)
    return entries


def _image_details(answer: AnswerResult) -> dict[str, JSON]:
    """The image keys of an answer's ``to_details()``, in their order there."""
    out: dict[str, JSON] = {}
    if answer.custom_images:
        out["customImages"] = [image.to_json() for image in answer.custom_images]
    if answer.note_images:
        out["noteImages"] = [image.to_json() for image in answer.note_images]
    if answer.option_note_images:
        out["optionNoteImages"] = {
            value: [image.to_json() for image in images]
            for value, images in answer.option_note_images.items()
        }
    return out


@attrs.frozen
class QuestionMeta:
    """A question as a result describes it: ``type`` is the requested type;
    ``presented_type`` is set only when the form finally presented it differently."""

    id: str
    label: str
    prompt: str
    type: QuestionType
    presented_type: QuestionType | None = None

    @property
    def effective_type(self) -> QuestionType:
        return self.presented_type or self.type

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "id": self.id,
            "label": self.label,
            "prompt": self.prompt,
            "type": self.type,
        }
        if self.presented_type is not None:
            out["presentedType"] = self.presented_type
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuestionMeta:
        presented = data.get("presentedType")
        return cls(
            id=_str(data["id"]),
            label=_str(data["label"]),
            prompt=_str(data["prompt"]),
            type=_question_type(data["type"]),
            presented_type=None if presented is None else _question_type(presented),
        )

    @classmethod
    def of(cls, question: Question, presented_type: QuestionType | None) -> QuestionMeta:
        shown = presented_type or question.effective_type
        return cls(
            id=question.id,
            label=question.label,
            prompt=question.prompt,
            type=question.type,
            presented_type=None if shown == question.type else shown,
        )


T = TypeVar("T")
P = TypeVar("P")


@attrs.frozen
class AskResult:
    """The outcome of one ``ask_user`` flow (submitted, cancelled, or invalid input).

    ``answers`` is keyed by question id in question order. ``issues`` is ``None`` unless the
    payload was invalid (then ``cancelled`` is true and there are no questions).
    """

    cancelled: bool
    questions: tuple[QuestionMeta, ...] = attrs.field(converter=_tuple, default=())
    answers: Mapping[str, AnswerResult] = attrs.field(converter=_answers_mapping, factory=dict)
    title: str | None = None
    skipped_question_ids: tuple[str, ...] = attrs.field(converter=_tuple, default=())
    issues: tuple[Issue, ...] | None = attrs.field(default=None, converter=_issues)
    request_id: str | None = None
    # A derived value, not part of the result's value (no equality, hash or repr): ``_memo``
    # is ``(value, params, build)``, the one value ``_derived`` built with the params and the
    # build it was built for (by identity: it depends on the params' option labels). The
    # result is immutable, so it never goes stale; an ``evolve`` copy starts without it.
    # A field of the result rather than an object of its own: a result is made for every
    # answer, and one store (a tuple) sets the memo of a frozen result.
    _memo: tuple[object, object, object] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    @property
    def is_error(self) -> bool:
        return self.issues is not None

    def _derived(self, params: P, build: Callable[[AskResult, P], T]) -> T:
        """``build(self, params)``, built on first use and kept. For ``form/text.py``:
        ``build`` must depend only on this result and ``params``."""
        memo = self._memo
        if memo is not None and memo[1] is params and memo[2] is build:
            return memo[0]  # type: ignore[return-value]
        value = build(self, params)
        _SET_MEMO(self, (value, params, build))  # the slot's own setter: the result is frozen
        return value

    def _derived_once(self, params: P, build: Callable[[AskResult, P], T]) -> T:
        """``_derived`` for a value that is asked for once (a background answer's texts): the
        kept one if ``_derived`` made it, else ``build(self, params)``, not kept. A background
        result stays with its queue item once delivered: a kept value would be so many more
        objects for the cyclic collector to walk, for every answer delivered."""
        memo = self._memo
        if memo is not None and memo[1] is params and memo[2] is build:
            return memo[0]  # type: ignore[return-value]
        return build(self, params)

    def question(self, question_id: str) -> QuestionMeta | None:
        for meta in self.questions:
            if meta.id == question_id:
                return meta
        return None

    def to_details(self) -> dict[str, JSON]:
        """The full result (``details`` of the tool result, journal and history data)."""
        # Each answer's entry is ``AnswerResult.to_details`` written out (no call per answer).
        answers: dict[str, JSON] = {}
        for qid, answer in self.answers.items():
            item: dict[str, JSON] = {
                "values": [*answer.values],
                "labels": [*answer.labels],
                "indices": [*answer.indices],
            }
            if answer.custom_text is not None:
                item["customText"] = answer.custom_text
            if answer.note is not None:
                item["note"] = answer.note
            if answer.option_notes:
                item["optionNotes"] = {**answer.option_notes}
            if answer.custom_images or answer.note_images or answer.option_note_images:
                item.update(_image_details(answer))
            answers[qid] = item
        if self.issues is None and not self.skipped_question_ids:
            # The common case: one dict display of every key (no store after it).
            copies = _question_entries(self.questions)
            title = self.title
            request_id = self.request_id
            if title is None:
                if request_id is None:
                    return {"cancelled": self.cancelled, "questions": copies, "answers": answers}
                return {
                    "cancelled": self.cancelled,
                    "questions": copies,
                    "answers": answers,
                    "requestId": request_id,
                }
            if request_id is None:
                return {
                    "title": title,
                    "cancelled": self.cancelled,
                    "questions": copies,
                    "answers": answers,
                }
            return {
                "title": title,
                "cancelled": self.cancelled,
                "questions": copies,
                "answers": answers,
                "requestId": request_id,
            }
        out = self._details_head()
        out["answers"] = answers
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out

    def _details_head(self) -> dict[str, JSON]:
        """The details up to their ``answers`` (which ``to_details`` and ``_json_forms`` add)."""
        out: dict[str, JSON] = {}
        if self.title is not None:
            out["title"] = self.title
        out["cancelled"] = self.cancelled
        if self.issues is not None:
            out["error"] = {
                "kind": "invalid_input",
                "issues": [issue.to_json() for issue in self.issues],
            }
        out["questions"] = _question_entries(self.questions)
        if self.skipped_question_ids:
            out["skippedQuestionIds"] = list(self.skipped_question_ids)
        return out

    def to_structured(self) -> dict[str, JSON]:
        """The compact result (``structuredContent``), as the tool's ``outputSchema`` says.
        (Built with the details: a tool result, the one place that wants it, holds both.)"""
        return self._json_forms()[1]

    def _json_forms(self) -> tuple[dict[str, JSON], dict[str, JSON]]:
        """``(to_details(), to_structured())``, both built in one walk over the answers (a tool
        result holds both): each answer's fields read once."""
        # Each answer's two entries written out: ``AnswerResult.to_details`` and
        # ``to_structured`` without their calls (but for answers with images).
        full: dict[str, JSON] = {}
        compact: dict[str, JSON] = {}
        for qid, answer in self.answers.items():
            values = answer.values
            labels = answer.labels
            item: dict[str, JSON] = {
                "values": [*values],
                "labels": [*labels],
                "indices": [*answer.indices],
            }
            if answer.custom_images or answer.note_images or answer.option_note_images:
                full[qid] = answer.to_details()
                compact[qid] = answer.to_structured()
                continue
            short: dict[str, JSON] = {"values": [*values], "labels": [*labels]}
            custom_text = answer.custom_text
            if custom_text is not None:
                item["customText"] = short["customText"] = custom_text
            note = answer.note
            if note is not None:
                item["note"] = short["note"] = note
            option_notes = answer.option_notes
            if option_notes:
                item["optionNotes"] = {**option_notes}
                short["optionNotes"] = {**option_notes}
            full[qid] = item
            compact[qid] = short
        request_id = self.request_id
        if self.issues is None and not self.skipped_question_ids:
            copies = _question_entries(self.questions)
            title = self.title
            if request_id is None:
                structured = {"cancelled": self.cancelled, "answers": compact}
                if title is None:
                    details = {"cancelled": self.cancelled, "questions": copies, "answers": full}
                else:
                    details = {
                        "title": title,
                        "cancelled": self.cancelled,
                        "questions": copies,
                        "answers": full,
                    }
                return details, structured
            structured = {"requestId": request_id, "cancelled": self.cancelled, "answers": compact}
            if title is None:
                details = {
                    "cancelled": self.cancelled,
                    "questions": copies,
                    "answers": full,
                    "requestId": request_id,
                }
            else:
                details = {
                    "title": title,
                    "cancelled": self.cancelled,
                    "questions": copies,
                    "answers": full,
                    "requestId": request_id,
                }
            return details, structured
        details = self._details_head()
        details["answers"] = full
        if request_id is not None:
            details["requestId"] = request_id
        structured = {}
        if request_id is not None:
            structured["requestId"] = request_id
        structured["cancelled"] = self.cancelled
        structured["answers"] = compact
        if self.skipped_question_ids:
            structured["skippedQuestionIds"] = list(self.skipped_question_ids)
        if self.issues is not None:
            structured["error"] = {"issues": [issue.to_json() for issue in self.issues]}
        return details, structured

    @classmethod
    def from_details(cls, data: Mapping[str, Any]) -> AskResult:
        """Read a result back from ``to_details()`` output (journal, recovery).

        Keys of older releases (``mode``, ``elaboration``, ``continuation``) are ignored.
        Raises ``ValueError`` when the data is not a result.
        """
        try:
            return cls._from_details(data)
        except ValueError:
            raise
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an ask result: {exc!r}") from exc

    @classmethod
    def _from_details(cls, data: Mapping[str, Any]) -> AskResult:
        data = _dict(data)
        cancelled = data["cancelled"]
        if not isinstance(cancelled, bool):
            raise ValueError("cancelled must be a boolean")
        error = data.get("error")
        issues: tuple[Issue, ...] | None = None
        if error is not None:
            issues = tuple(
                Issue(path=_str(_dict(i)["path"]), message=_str(_dict(i)["message"]))
                for i in _list(_dict(error).get("issues", ()), "issues")
            )
        return cls(
            title=_opt_str(data.get("title")),
            cancelled=cancelled,
            questions=tuple(
                QuestionMeta.from_json(_dict(q)) for q in _list(data.get("questions", ()), "q")
            ),
            answers={
                str(qid): AnswerResult.from_details(_dict(answer))
                for qid, answer in _dict(data.get("answers", {})).items()
            },
            skipped_question_ids=_str_list(data.get("skippedQuestionIds", ()), "skipped"),
            issues=issues,
            request_id=_opt_str(data.get("requestId")),
        )


@attrs.frozen(init=False)
class BackgroundOutcome:
    """A finished background request as waits and background-answer messages carry it:
    ``{requestId, parentToolCallId?, result?, error?}``. Exactly one of ``result`` and
    ``error`` is set for a finished form."""

    request_id: str
    parent_tool_call_id: str | None = None
    result: AskResult | None = None
    error: str | None = None

    def __init__(
        self,
        request_id: str,
        parent_tool_call_id: str | None = None,
        result: AskResult | None = None,
        error: str | None = None,
    ) -> None:
        # The ``__init__`` attrs would write, with each field set through its slot's own
        # setter rather than ``object.__setattr__`` by name (one is made for every answer).
        _SET_REQUEST_ID(self, request_id)
        _SET_PARENT_TOOL_CALL_ID(self, parent_tool_call_id)
        _SET_RESULT(self, result)
        _SET_ERROR(self, error)

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"requestId": self.request_id}
        if self.parent_tool_call_id is not None:
            out["parentToolCallId"] = self.parent_tool_call_id
        if self.result is not None:
            out["result"] = self.result.to_details()
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackgroundOutcome:
        """Raises ``ValueError`` when the data is not an outcome."""
        try:
            data = _dict(data)
            result = data.get("result")
            return cls(
                request_id=_str(data["requestId"]),
                parent_tool_call_id=_opt_str(data.get("parentToolCallId")),
                result=None if result is None else AskResult.from_details(_dict(result)),
                error=_opt_str(data.get("error")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a background outcome: {exc!r}") from exc


_SET_MEMO: Final = vars(AskResult)["_memo"].__set__  # the slot's descriptor
_SET_REQUEST_ID, _SET_PARENT_TOOL_CALL_ID, _SET_RESULT, _SET_ERROR = (
    getattr(BackgroundOutcome, name).__set__
    for name in ("request_id", "parent_tool_call_id", "result", "error")
)


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def _drafts_in_order(
    params: AskParams, drafts: Sequence[Draft] | Mapping[str, Draft]
) -> Sequence[Draft]:
    questions = params.questions
    if type(drafts) is list or type(drafts) is tuple:
        listed: Sequence[Draft] = drafts
    elif isinstance(drafts, Mapping):
        return [drafts.get(q.id, EMPTY_DRAFT) for q in questions]
    else:
        listed = list(drafts)
    missing = len(questions) - len(listed)
    if missing > 0:
        return [*listed, *(EMPTY_DRAFT,) * missing]
    return listed


# The builders below construct results from values already in their final types (tuples,
# frozen mappings), without the converters of the public constructors: a result is built for
# every finished form, so this is the hot path. ``tests/test_result_differential.py`` holds them
# equal, field by field and type by type, to results built through the constructors.
# Each is filled as a plain object of its class's builder, then given its class
# (``types.slot_builder``).
_new = object.__new__


_NO_NOTES: Mapping[str, Any] = frozen_mapping()


def _answer_of(question: Question, draft: Draft, cancelled: bool) -> AnswerResult | None:
    """The submitted answer of one non-skipped draft, or ``None`` when it is empty (images
    are dropped when ``cancelled``)."""
    options = question.options
    chosen = draft.selected
    values: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    indices: tuple[int, ...] = ()
    if chosen:
        count = len(options)
        if len(chosen) == 1 and 0 <= (first := chosen[0]) < count:
            # One option (every single-select answer): its tuples at once.
            option = options[first]
            values = (option.value,)
            labels = (option.label,)
            indices = (first + 1,)
        else:
            # Option order, not selection order (000); out-of-range indices are stale and
            # ignored. Every draft the form or a remote answer makes is sorted, unique and in
            # range: taken as it comes, checked on the way (one loop, no sorting); anything
            # else is sorted and filtered first.
            listed_values: list[str] = []
            listed_labels: list[str] = []
            listed_indices: list[int] = []
            last = -1
            for i in chosen:
                if i <= last or i >= count:
                    listed_values, listed_labels, listed_indices = _selection(options, chosen)
                    break
                last = i
                option = options[i]
                listed_values.append(option.value)
                listed_labels.append(option.label)
                listed_indices.append(i + 1)
            values = tuple(listed_values)
            labels = tuple(listed_labels)
            indices = tuple(listed_indices)
    custom_text: str | None = None
    custom_images: tuple[Image, ...] = ()
    if draft.custom_selected:
        text = draft.custom_text.strip()
        if text:
            custom_text = text
            values = (*values, text)
            labels = (*labels, text)
        if not cancelled:
            custom_images = draft.custom_images
    option_notes: Mapping[str, str] = _NO_NOTES
    option_note_images: Mapping[str, tuple[Image, ...]] = _NO_NOTES
    given_notes = draft.option_notes
    given_images = draft.option_note_images if not cancelled else _NO_NOTES
    if given_images or len(given_notes) > 1:
        option_notes, option_note_images = _option_notes_of(options, given_notes, given_images)
    elif given_notes:
        # One option note, the common case: kept as the draft has it when it is trimmed
        # already (both are frozen), dropped when blank or stale.
        for value, given in given_notes.items():
            text = given.strip()
            if not text:
                break
            for option in options:
                if option.value == value:
                    option_notes = given_notes if text == given else frozen_mapping({value: text})
                    break
    note = draft.note.strip() or None
    note_images = draft.note_images if not cancelled else ()
    if not (
        values
        or indices
        or custom_text is not None
        or note is not None
        or option_notes
        or custom_images
        or note_images
        or option_note_images
    ):
        return None
    answer = _new(_ANSWER_BUILDER)  # becomes an AnswerResult below (types.slot_builder)
    answer.values = values
    answer.labels = labels
    answer.indices = indices
    answer.custom_text = custom_text
    answer.note = note
    answer.option_notes = option_notes
    answer.custom_images = custom_images
    answer.note_images = note_images
    answer.option_note_images = option_note_images
    answer.__class__ = AnswerResult
    return answer  # type: ignore[no-any-return]


def _selection(
    options: Sequence[Option], chosen: Sequence[int]
) -> tuple[list[str], list[str], list[int]]:
    """``(values, labels, 1-based indices)`` of the options ``chosen`` names, in option order,
    each once; indices out of range are stale and ignored."""
    count = len(options)
    selected = [i for i in sorted(set(chosen)) if 0 <= i < count]
    return (
        [options[i].value for i in selected],
        [options[i].label for i in selected],
        [i + 1 for i in selected],
    )


def _option_notes_of(
    options: Sequence[Option],
    given_notes: Mapping[str, str],
    given_images: Mapping[str, Iterable[Image]],
) -> tuple[Mapping[str, str], Mapping[str, tuple[Image, ...]]]:
    """The non-blank option notes and non-empty option note images of the real options, in
    option order (keys that name no option are stale and dropped)."""
    notes: dict[str, str] = {}
    images: dict[str, tuple[Image, ...]] = {}
    # The walk over the options stops once every given key was met: most drafts note one or
    # two options, often the first ones.
    keys = given_notes.keys() | given_images.keys() if given_images else given_notes.keys()
    remaining = len(keys)
    met: set[str] = set()
    for option in options:
        value = option.value
        if value not in keys or value in met:
            continue
        met.add(value)
        if value in given_notes:
            text = given_notes[value].strip()
            if text:
                notes[value] = text
        if value in given_images:
            shown = tuple(given_images[value])
            if shown:
                images[value] = shown
        remaining -= 1
        if not remaining:
            break
    return (
        frozen_mapping(notes) if notes else _NO_NOTES,
        frozen_mapping(images) if images else _NO_NOTES,
    )


def _question_meta(question: Question, shown: QuestionType) -> QuestionMeta:
    """``QuestionMeta.of(question, shown)`` for a presented type ``shown``."""
    requested = question.type
    meta = _new(_META_BUILDER)  # becomes a QuestionMeta (types.slot_builder)
    meta.id = question.id
    meta.label = question.label
    meta.prompt = question.prompt
    meta.type = requested
    meta.presented_type = None if shown == requested else shown
    meta.__class__ = QuestionMeta
    return meta  # type: ignore[no-any-return]


def _shape_of(params: AskParams) -> tuple[QuestionMeta, ...]:
    """The question metadata of the params' results presented as their questions ask, made on
    first use and kept with the params (``AskParams._derived``): such a result's ``questions``
    is this very tuple. Most params make one result, so making it costs about what the
    result's own metadata cost: one loop, no calls per question. Nothing else is kept: their
    entries in ``to_details()`` and the texts of the questions are written out from the
    metadata each time (about what a copy of a kept one costs), and anything kept would be one
    more object for every answered form, for the cyclic collector to walk."""
    shape: tuple[QuestionMeta, ...] | None = getattr(params, "_derived", None)
    if shape is None:
        metas: list[QuestionMeta] = []
        for question in params.questions:
            requested = question.type
            shown = question.presented_type or requested
            # _question_meta(question, shown), written out.
            meta = _new(_META_BUILDER)  # becomes a QuestionMeta (types.slot_builder)
            meta.id = question.id
            meta.label = question.label
            meta.prompt = question.prompt
            meta.type = requested
            meta.presented_type = None if shown == requested else shown
            meta.__class__ = QuestionMeta
            metas.append(meta)
        shape = tuple(metas)
        object.__setattr__(params, "_derived", shape)  # a memo, not a field's value
    return shape


_ANSWER_BUILDER: Final = slot_builder(AnswerResult)
_META_BUILDER: Final = slot_builder(QuestionMeta)
_RESULT_BUILDER: Final = slot_builder(AskResult)


def build_result(
    params: AskParams,
    drafts: Sequence[Draft] | Mapping[str, Draft],
    *,
    presented_types: Sequence[QuestionType] | None = None,
    cancelled: bool = False,
    request_id: str | None = None,
) -> AskResult:
    """Build the result of a form from its drafts.

    ``drafts`` are aligned with ``params.questions`` (a sequence) or keyed by question id (a
    mapping); missing drafts are empty. ``presented_types`` are the types the form finally
    presented, aligned with the questions; missing entries fall back to
    ``Question.effective_type``. Never raises for any drafts.
    """
    questions = params.questions
    if (type(drafts) is list or type(drafts) is tuple) and len(drafts) >= len(questions):
        ordered: Sequence[Draft] = drafts  # what _drafts_in_order returns for them
    else:
        ordered = _drafts_in_order(params, drafts)
    if presented_types is None:
        given: Sequence[object] = ()
    elif type(presented_types) is list or type(presented_types) is tuple:
        given = presented_types
    else:
        given = [*(presented_types or ())]
    count = len(given)
    answers: dict[str, AnswerResult] = {}
    skipped: list[str] = []
    try:
        shared: tuple[QuestionMeta, ...] | None = params._derived  # type: ignore[assignment]
    except AttributeError:  # params made without a constructor that sets it
        shared = None
    if shared is None:
        shared = _shape_of(params)
    # The params' own metadata, shared; a list of this result's own only once a presented
    # type differs from what the question says.
    metas: list[QuestionMeta] | None = None
    i = -1  # the question's position (a counter: ``enumerate`` is a call of a type)
    for question in questions:
        i += 1
        if i < count and (shown := given[i]) in QUESTION_TYPES:
            if shown != (question.presented_type or question.type):
                if metas is None:
                    metas = [*shared[:i]]
                metas.append(_question_meta(question, shown))
            elif metas is not None:
                metas.append(shared[i])
        elif metas is not None:
            metas.append(shared[i])
        draft = ordered[i]
        if draft.skipped:
            skipped.append(question.id)
            continue
        answer = _answer_of(question, draft, cancelled)
        if answer is not None:
            answers[question.id] = answer
    result = _new(_RESULT_BUILDER)  # becomes an AskResult (types.slot_builder)
    result.cancelled = cancelled
    result.questions = shared if metas is None else tuple(metas)
    result.answers = _FrozenDict(answers)  # frozen_mapping(answers) without its call
    result.title = params.title
    result.skipped_question_ids = tuple(skipped) if skipped else ()
    result.issues = None
    result.request_id = request_id
    result._memo = None  # filled on first use (_derived)
    result.__class__ = AskResult
    return result  # type: ignore[no-any-return]


def invalid_result(raw_title: object, issues: Iterable[Issue]) -> AskResult:
    """The result for semantically invalid ``ask_user`` arguments: cancelled, no questions,
    no answers, no request id; ``title`` is the raw input title when it is a non-blank string."""
    title = raw_title if isinstance(raw_title, str) and raw_title.strip() else None
    return AskResult(cancelled=True, title=title, issues=tuple(issues))


def fallback_result(params: AskParams, request_id: str | None) -> AskResult:
    """The cancelled result of a call that cannot show a form (non-TUI without an external UI):
    normalised question metadata, no answers."""
    return build_result(params, (), cancelled=True, request_id=request_id)


# --------------------------------------------------------------------------------------------
# Remote answers (pi-agent-ask:submit and external UI responses)
# --------------------------------------------------------------------------------------------


def answers_from_remote(
    params: AskParams,
    presented_types: Sequence[QuestionType] | None,
    answers: object,
    *,
    mode: object = "submit",
) -> tuple[Draft, ...] | str:
    """Validate the ``answers`` of a remote ``{kind: "answer"}`` response and turn them into
    drafts aligned with the questions; on failure return the ``invalid_answer`` message.

    ``answers`` is the response's ``answers`` value (``None`` when it was missing); ``mode`` is
    the response's ``mode`` if it had one: only ``"submit"`` is accepted (000 has no
    elaboration). ``kind`` is the caller's to check. Each answer is
    ``{values?, customText?, note?, optionNotes?, skipped?}``; ``skipped: true`` (an addition
    to the older release) skips that question and then allows no answer or note. Questions
    absent from ``answers`` are unanswered. Blank custom text, notes and option notes are
    dropped. Labels and indices are never taken from the response: ``build_result`` computes
    them from the drafts.
    """
    if type(answers) is not dict and not isinstance(answers, Mapping):
        return "Answer response must include an answers object."
    if mode != "submit":
        return 'Answer mode must be "submit".'
    questions = params.questions
    count = len(questions)
    if presented_types is None:
        given: Sequence[object] = ()
    elif type(presented_types) is list or type(presented_types) is tuple:
        given = presented_types
    else:
        given = [*presented_types]
    index_of: dict[str, int] | None = None  # made for forms of more than a few questions
    if count > 4:
        # The last of equal ids, as the comprehension it replaces kept it.
        index_of = {question.id: i for i, question in enumerate(questions)}
    drafts = [EMPTY_DRAFT] * count
    for qid, entry in answers.items():
        position: int | None = None
        if type(qid) is str or isinstance(qid, str):
            if index_of is not None:
                position = index_of.get(qid)
            else:
                i = count
                while i:  # from the end: the last of equal ids
                    i -= 1
                    if questions[i].id == qid:
                        position = i
                        break
        if position is None:
            return f"Unknown question id {_quote(qid)}."
        question = questions[position]
        # The presented type: as given, else the question's own.
        presented = given[position] if position < len(given) else None
        if presented not in QUESTION_TYPES:
            presented = question.presented_type or question.type
        draft = _remote_draft(question, presented, entry)
        if type(draft) is str:
            return draft
        drafts[position] = draft  # type: ignore[assignment]
    return tuple(drafts)


def _remote_draft(question: Question, presented: QuestionType, entry: object) -> Draft | str:
    # The question's quoted id is made only for a message (``_quote(question.id)``).
    if type(entry) is not dict and not isinstance(entry, Mapping):
        return f"Answer for question {_quote(question.id)} must be an object."
    selected: list[int] = []
    if "values" in entry:
        values = entry["values"]
        if type(values) is not list and not isinstance(values, list):
            return f"Answer values for question {_quote(question.id)} must be strings."
        for value in values:
            if type(value) is not str and not isinstance(value, str):
                return f"Answer values for question {_quote(question.id)} must be strings."
        if len(values) > 1:
            if len(set(values)) != len(values):
                return f"Answer values for question {_quote(question.id)} must be unique."
            if presented != "multi":
                return f"Question {_quote(question.id)} accepts only one selected value."
        options = question.options
        if len(values) == 1:
            # One value (every single-select answer): found without a map of the options,
            # the last of equal values as the map keeps it.
            value = values[0]
            i = len(options)
            while i:
                i -= 1
                if options[i].value == value:
                    selected.append(i)
                    break
            else:
                return f"Unknown option value {_quote(value)} for question {_quote(question.id)}."
        elif values:
            positions = {option.value: i for i, option in enumerate(options)}
            for value in values:
                if value not in positions:
                    return (
                        f"Unknown option value {_quote(value)} for question {_quote(question.id)}."
                    )
                selected.append(positions[value])
            selected.sort()
    custom_text = ""
    if "customText" in entry:
        raw = entry["customText"]
        if not isinstance(raw, str):
            return f"Custom text for question {_quote(question.id)} must be a string."
        custom_text = raw.strip()
        if custom_text and selected and presented != "multi":
            return (
                f"Question {_quote(question.id)} cannot combine a selected value and custom text."
            )
    note = ""
    if "note" in entry:
        raw = entry["note"]
        if not isinstance(raw, str):
            return f"Note for question {_quote(question.id)} must be a string."
        note = raw.strip()
    option_notes: dict[str, str] | None = None  # made for the first note
    if "optionNotes" in entry:
        raw_notes = entry["optionNotes"]
        if not isinstance(raw_notes, Mapping) or not all(
            isinstance(v, str) for v in raw_notes.values()
        ):
            return f"Option notes for question {_quote(question.id)} must be string values."
        known = {option.value for option in question.options}
        option_notes = {}
        for value, text in raw_notes.items():
            if value not in known:
                return (
                    f"Unknown option note value {_quote(value)} for question {_quote(question.id)}."
                )
            if text.strip():
                option_notes[value] = text.strip()
    skipped = entry.get("skipped", False)
    if type(skipped) is not bool:
        return f"Skipped flag for question {_quote(question.id)} must be a boolean."
    if skipped:
        if selected or custom_text or note or option_notes:
            return f"Skipped question {_quote(question.id)} cannot carry answers or notes."
        return Draft(skipped=True)
    # Draft(selected=sorted(selected), custom_text=..., custom_selected=bool(custom_text),
    # note=..., option_notes=...), built as its constructor would (each field in its final
    # type, in field order) at the cost of a dict (see form/state.py, "_build"): for options
    # alone (most answers), a copy of the fields of such a draft with its selection.
    if not (custom_text or note or option_notes):
        fields = _OPTIONS_ONLY.copy()
        fields["selected"] = (*selected,)
    else:
        fields = {
            "selected": (*selected,),
            "custom_text": custom_text,
            "custom_selected": custom_text != "",
            "note": note,
            "option_notes": _FrozenDict(option_notes) if option_notes else _NO_NOTES,
            "custom_images": (),
            "note_images": (),
            "option_note_images": _NO_NOTES,
            "skipped": False,
        }
    draft = _new(Draft)
    _set_fields(draft, "__dict__", fields)
    return draft


_OPTIONS_ONLY: Final[dict[str, object]] = {
    "selected": (),
    "custom_text": "",
    "custom_selected": False,
    "note": "",
    "option_notes": _NO_NOTES,
    "custom_images": (),
    "note_images": (),
    "option_note_images": _NO_NOTES,
    "skipped": False,
}
"""The fields of a remote answer's draft that selects options and holds nothing else, but for
its selection, in field order (``_remote_draft`` copies it)."""


_set_fields = object.__setattr__


# --------------------------------------------------------------------------------------------
# JSON reading helpers: strict, so a corrupt journal entry is an error, never a wrong answer.
# --------------------------------------------------------------------------------------------


def _quote(value: object) -> str:
    """A JSON-style double-quoted string, as the messages of the original quote ids."""
    text = value if isinstance(value, str) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dict(value: object) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: the ABC check is slow, and journals hold many records.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ValueError(f"expected an object, got {type(value).__name__}")
    return cast("Mapping[str, Any]", value)


def _list(value: object, what: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{what}: expected an array, got {type(value).__name__}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object) -> str | None:
    return None if value is None else _str(value)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {type(value).__name__}")
    return value


def _str_list(value: object, what: str) -> tuple[str, ...]:
    items = _list(value, what)
    for item in items:
        if type(item) is not str:
            _str(item)  # raises with the usual message
    return tuple(items)


def _question_type(value: object) -> QuestionType:
    if value not in QUESTION_TYPES:
        raise ValueError(f"unknown question type {value!r}")
    return value


def _images(value: object) -> tuple[Image, ...]:
    out: list[Image] = []
    for item in _list(value, "images"):
        data = _dict(item)
        out.append(
            Image(id=_str(data["id"]), mime_type=_str(data["mimeType"]), data=_str(data["data"]))
        )
    return tuple(out)
