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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

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
    frozen_mapping,
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
    return frozen_mapping(value)


def _issues(value: Iterable[Issue] | None) -> tuple[Issue, ...] | None:
    return None if value is None else tuple(value)


def _images_mapping(
    value: Mapping[str, Iterable[Image]] | None,
) -> Mapping[str, tuple[Image, ...]]:
    if value is None:
        return frozen_mapping()
    if all(isinstance(images, tuple) for images in value.values()):
        return frozen_mapping(cast(Mapping[str, tuple[Image, ...]], value))
    return frozen_mapping({key: tuple(images) for key, images in value.items()})


def _answers_mapping(value: Mapping[str, AnswerResult] | None) -> Mapping[str, AnswerResult]:
    return frozen_mapping(value)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
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
        return out

    def to_structured(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"values": [*self.values], "labels": [*self.labels]}
        if self.custom_text is not None:
            out["customText"] = self.custom_text
        if self.note is not None:
            out["note"] = self.note
        if self.option_notes:
            out["optionNotes"] = dict(self.option_notes)
        images = self.images()
        if images:
            out["images"] = [{"mimeType": image.mime_type, "data": image.data} for image in images]
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


@attrs.frozen(repr=False)
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


@attrs.frozen(repr=False)
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

    @property
    def is_error(self) -> bool:
        return self.issues is not None

    def question(self, question_id: str) -> QuestionMeta | None:
        for meta in self.questions:
            if meta.id == question_id:
                return meta
        return None

    def to_details(self) -> dict[str, JSON]:
        """The full result (``details`` of the tool result, journal and history data)."""
        out: dict[str, JSON] = {}
        if self.title is not None:
            out["title"] = self.title
        out["cancelled"] = self.cancelled
        if self.issues is not None:
            out["error"] = {
                "kind": "invalid_input",
                "issues": [issue.to_json() for issue in self.issues],
            }
        out["questions"] = [meta.to_json() for meta in self.questions]
        if self.skipped_question_ids:
            out["skippedQuestionIds"] = list(self.skipped_question_ids)
        out["answers"] = {qid: answer.to_details() for qid, answer in self.answers.items()}
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out

    def to_structured(self) -> dict[str, JSON]:
        """The compact result (``structuredContent``), as the tool's ``outputSchema`` says."""
        out: dict[str, JSON] = {}
        if self.request_id is not None:
            out["requestId"] = self.request_id
        out["cancelled"] = self.cancelled
        out["answers"] = {qid: answer.to_structured() for qid, answer in self.answers.items()}
        if self.skipped_question_ids:
            out["skippedQuestionIds"] = list(self.skipped_question_ids)
        if self.issues is not None:
            out["error"] = {"issues": [issue.to_json() for issue in self.issues]}
        return out

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


@attrs.frozen(repr=False)
class BackgroundOutcome:
    """A finished background request as waits and background-answer messages carry it:
    ``{requestId, parentToolCallId?, result?, error?}``. Exactly one of ``result`` and
    ``error`` is set for a finished form."""

    request_id: str
    parent_tool_call_id: str | None = None
    result: AskResult | None = None
    error: str | None = None

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


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def _drafts_in_order(
    params: AskParams, drafts: Sequence[Draft] | Mapping[str, Draft]
) -> list[Draft]:
    """The drafts aligned with the questions; missing ones are empty."""
    questions = params.questions
    if isinstance(drafts, Mapping):
        return [drafts.get(q.id, EMPTY_DRAFT) for q in questions]
    listed = list(drafts)
    return [*listed, *(EMPTY_DRAFT,) * (len(questions) - len(listed))]


def _answer_of(question: Question, draft: Draft, cancelled: bool) -> AnswerResult | None:
    """The submitted answer of one non-skipped draft, or ``None`` when it is empty (images
    are dropped when ``cancelled``)."""
    # Option order, not selection order (000); out-of-range indices are stale and ignored.
    values, labels, indices = _selection(question.options, draft.selected)
    custom_text: str | None = None
    custom_images: tuple[Image, ...] = ()
    if draft.custom_selected:
        text = draft.custom_text.strip()
        if text:
            custom_text = text
            values.append(text)
            labels.append(text)
        if not cancelled:
            custom_images = draft.custom_images
    option_notes, option_note_images = _option_notes_of(
        question.options, draft.option_notes, {} if cancelled else draft.option_note_images
    )
    answer = AnswerResult(
        values=values,
        labels=labels,
        indices=indices,
        custom_text=custom_text,
        note=draft.note.strip() or None,
        option_notes=option_notes,
        custom_images=custom_images,
        note_images=() if cancelled else draft.note_images,
        option_note_images=option_note_images,
    )
    return None if answer.is_empty else answer


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
    for option in options:
        value = option.value
        text = given_notes.get(value, "").strip()
        if text:
            notes[value] = text
        shown = tuple(given_images.get(value, ()))
        if shown:
            images[value] = shown
    return (
        frozen_mapping(notes) if notes else _NO_NOTES,
        frozen_mapping(images) if images else _NO_NOTES,
    )


_NO_NOTES: Mapping[str, Any] = frozen_mapping()
"""The empty notes every answer without option notes shares (an immutable value)."""


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
    shown = list(presented_types or ())
    metas: list[QuestionMeta] = []
    answers: dict[str, AnswerResult] = {}
    skipped: list[str] = []
    ordered = _drafts_in_order(params, drafts)
    for i, question in enumerate(params.questions):
        draft = ordered[i]
        presented = shown[i] if i < len(shown) and shown[i] in QUESTION_TYPES else None
        metas.append(QuestionMeta.of(question, presented))
        if draft.skipped:
            skipped.append(question.id)
            continue
        answer = _answer_of(question, draft, cancelled)
        if answer is not None:
            answers[question.id] = answer
    return AskResult(
        cancelled=cancelled,
        questions=metas,
        answers=answers,
        title=params.title,
        skipped_question_ids=skipped,
        request_id=request_id,
    )


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
    if not isinstance(answers, Mapping):
        return "Answer response must include an answers object."
    if mode != "submit":
        return 'Answer mode must be "submit".'
    questions = params.questions
    given = list(presented_types or ())
    # By id; with equal ids (params built without validation) the last one, as a dict keeps it.
    index_of = {question.id: i for i, question in enumerate(questions)}
    drafts = [EMPTY_DRAFT] * len(questions)
    for qid, entry in answers.items():
        position = index_of.get(qid) if isinstance(qid, str) else None
        if position is None:
            return f"Unknown question id {_quote(qid)}."
        question = questions[position]
        # The presented type: as given, else the question's own.
        presented = given[position] if position < len(given) else None
        if presented not in QUESTION_TYPES:
            presented = question.effective_type
        draft = _remote_draft(question, presented, entry)
        if isinstance(draft, str):
            return draft
        drafts[position] = draft
    return tuple(drafts)


def _remote_draft(question: Question, presented: QuestionType, entry: object) -> Draft | str:
    if not isinstance(entry, Mapping):
        return f"Answer for question {_quote(question.id)} must be an object."
    selected: list[int] = []
    if "values" in entry:
        values = entry["values"]
        if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
            return f"Answer values for question {_quote(question.id)} must be strings."
        if len(values) > 1:
            if len(set(values)) != len(values):
                return f"Answer values for question {_quote(question.id)} must be unique."
            if presented != "multi":
                return f"Question {_quote(question.id)} accepts only one selected value."
        # With equal option values (params built without validation) the last one.
        positions = {option.value: i for i, option in enumerate(question.options)}
        for value in values:
            if value not in positions:
                return f"Unknown option value {_quote(value)} for question {_quote(question.id)}."
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
    option_notes: dict[str, str] = {}
    if "optionNotes" in entry:
        raw_notes = entry["optionNotes"]
        if not isinstance(raw_notes, Mapping) or not all(
            isinstance(v, str) for v in raw_notes.values()
        ):
            return f"Option notes for question {_quote(question.id)} must be string values."
        known = {option.value for option in question.options}
        for value, text in raw_notes.items():
            if value not in known:
                return (
                    f"Unknown option note value {_quote(value)} for question {_quote(question.id)}."
                )
            if text.strip():
                option_notes[value] = text.strip()
    skipped = entry.get("skipped", False)
    if not isinstance(skipped, bool):
        return f"Skipped flag for question {_quote(question.id)} must be a boolean."
    if skipped:
        if selected or custom_text or note or option_notes:
            return f"Skipped question {_quote(question.id)} cannot carry answers or notes."
        return Draft(skipped=True)
    return Draft(
        selected=tuple(selected),
        custom_text=custom_text,
        custom_selected=custom_text != "",
        note=note,
        option_notes=option_notes,
    )


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
