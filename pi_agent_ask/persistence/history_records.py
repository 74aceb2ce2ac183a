"""History records: one per (request, question) on a branch, built from the journal's
history entries with the rules ``history`` states (status, outcome, question), and the
errors the history tools report."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AnswerResult, AskResult
from pi_agent_ask.form.types import JSON, Question
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.stored_questions import stored_questions

if TYPE_CHECKING:
    from pi_agent_ask.persistence.session_file import Entry

HistoryStatus = Literal["waiting", "answered", "skipped", "cancelled", "error"]


class HistoryError(Exception):
    """A history request that cannot be served: its message is the tool error text."""


def not_found_text(request_id: str, question_id: str) -> str:
    """The error for a key that is not on the current branch."""
    return f"Question not found on the current branch: {request_id} / {question_id}"


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class HistoryRecord:
    """One recorded question of one ``ask_user`` request and what became of it.

    ``answer`` is the question's entry in the latest result (``None`` when it has none, or when
    the question was explicitly skipped); ``error`` is the completion's error text;
    ``answered_by`` is the person who gave the outcome on a team desk (``desk --as``), ``None``
    where no one is recorded (a desk of files, a form not answered yet); ``answered_at`` is
    when the outcome was recorded (ISO 8601 UTC, as ``created_at``), ``None`` while it waits.
    Neither time is the other: the web page's history says both, each named.
    """

    request_id: str
    question_id: str
    created_at: str
    background: bool
    question: Question
    status: HistoryStatus
    title: str | None = None
    answer: AnswerResult | None = None
    error: str | None = None
    answered_by: str | None = None
    answered_at: str | None = None

    @property
    def has_answer(self) -> bool:
        """A committed answer of a completed (submitted) form."""
        return self.status == "answered"

    @property
    def key(self) -> tuple[str, str]:
        return (self.request_id, self.question_id)

    def question_json(self) -> dict[str, JSON]:
        question = self.question
        out: dict[str, JSON] = {
            "id": question.id,
            "label": question.label,
            "prompt": question.prompt,
            "type": question.type,
        }
        if question.presented_type is not None and question.presented_type != question.type:
            out["presentedType"] = question.presented_type
        if question.context is not None:
            out["context"] = question.context
        out["options"] = [option.to_json() for option in question.options]
        return out

    def to_json(self) -> dict[str, JSON]:
        """The full record, as ``read_ask_history`` returns it (image bytes included)."""
        out: dict[str, JSON] = {"requestId": self.request_id, "questionId": self.question_id}
        if self.title is not None:
            out["title"] = self.title
        out["createdAt"] = self.created_at
        out["background"] = self.background
        out["question"] = self.question_json()
        out["status"] = self.status
        out["hasAnswer"] = self.has_answer
        if self.answer is not None:
            out["answer"] = self.answer.to_details()
        if self.error is not None:
            out["error"] = self.error
        if self.answered_by is not None:
            out["answeredBy"] = self.answered_by
        return out

    def summary(self) -> dict[str, JSON]:
        """The compact form ``list_ask_history`` returns."""
        out: dict[str, JSON] = {"requestId": self.request_id, "questionId": self.question_id}
        if self.title is not None:
            out["title"] = self.title
        out["createdAt"] = self.created_at
        out["background"] = self.background
        out["status"] = self.status
        out["label"] = self.question.label
        out["prompt"] = self.question.prompt
        out["hasAnswer"] = self.has_answer
        if self.answered_by is not None:
            out["answeredBy"] = self.answered_by
        return out

    def search_text(self) -> str:
        """The lower-cased JSON of the whole record that queries match against.

        Image bytes are left out: base64 contains nearly every short letter sequence, so
        including it would make any record with an image match almost any query.
        """
        data = self.to_json()
        answer = self.answer
        if answer is not None and (
            answer.custom_images or answer.note_images or answer.option_note_images
        ):
            data = replace_image_data(data, "")
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).lower()


@attrs.frozen(repr=False)
class Request:
    request_id: str
    created_at: str
    background: bool
    title: str | None
    questions: tuple[Question, ...]


@attrs.frozen(repr=False)
class _Completion:
    result: AskResult | None
    error: str | None
    at: str | None = None
    """When the outcome was recorded (ISO 8601 UTC)."""


Completed = tuple[je.HistoryCompleted, float]
"""A request's ``ask:history-completed`` record and its entry's timestamp."""


_JOURNAL_TYPES = frozenset({jr.HISTORY_REQUEST, jr.HISTORY_COMPLETED})


def build_records(
    entries: Iterable[Entry], only: Collection[str] | None = None
) -> list[HistoryRecord]:
    """All history records of a branch (its entries root → leaf), in journal order; with
    ``only``, just those of these request ids (the others are not even parsed)."""
    requests: dict[str, Request] = {}
    completions: dict[str, list[Completed]] = {}
    for entry in entries:
        if entry.type not in _JOURNAL_TYPES:
            continue
        record = je.parse(entry)
        if not isinstance(record, je.HistoryRequest | je.HistoryCompleted):
            continue  # not reached: these two entry types parse to these two records
        if only is not None and (record.request_id is None or record.request_id not in only):
            continue
        if isinstance(record, je.HistoryRequest):
            request = request_of(record, entry.timestamp)
            if request is not None and request.request_id not in requests:
                requests[request.request_id] = request
        elif isinstance(record, je.HistoryCompleted) and record.request_id is not None:
            completions.setdefault(record.request_id, []).append((record, entry.timestamp))
    return records_of(requests, completions)


def records_of(
    requests: Mapping[str, Request], completions: Mapping[str, Sequence[Completed]]
) -> list[HistoryRecord]:
    records: list[HistoryRecord] = []
    for request_id, request in requests.items():
        completion = _latest_completion(completions.get(request_id, ()))
        records.extend(_record(request, question, completion) for question in request.questions)
    return records


def outcome_records(
    request: Request,
    result: AskResult | None,
    *,
    answered_by: str | None = None,
    answered_at: str | None = None,
) -> list[HistoryRecord]:
    """The records of one request whose outcome (``None``: none yet) is kept outside a journal
    (a team desk's store), with the person who gave it and when (ISO 8601 UTC)."""
    completion = None if result is None else _Completion(result, None, answered_at)
    return [
        attrs.evolve(_record(request, question, completion), answered_by=answered_by)
        for question in request.questions
    ]


def _latest_completion(candidates: Sequence[Completed]) -> _Completion | None:
    """The latest well-formed completion; parsing (the costly part) stops at the first found,
    so superseded completions and those of requests off the branch are never parsed."""
    for record, timestamp in reversed(candidates):
        completion = _completion_of(record)
        if completion is not None:
            return attrs.evolve(completion, at=_iso(timestamp))
    return None


def _record(request: Request, question: Question, completion: _Completion | None) -> HistoryRecord:
    result = completion.result if completion is not None else None
    error = completion.error if completion is not None else None
    answer: AnswerResult | None = None
    explicitly_skipped = False
    if result is not None:
        explicitly_skipped = question.id in result.skipped_question_ids
        # A mapping lookup by the question's own id: no inherited or default value can answer.
        if not explicitly_skipped:
            answer = result.answers.get(question.id)
        final = result.question(question.id)
        if final is not None:
            question = attrs.evolve(question, type=final.type, presented_type=final.presented_type)
        if error is None and result.issues is not None:
            error = texts.invalid_text(result.issues)
    status: HistoryStatus
    if error is not None:
        status = "error"
    elif result is None:
        status = "waiting"
    elif result.cancelled:
        status = "cancelled"
    elif explicitly_skipped:
        status = "skipped"
    elif answer is not None and _committed(answer):
        status = "answered"
    else:
        status = "skipped"
    return HistoryRecord(
        request_id=request.request_id,
        question_id=question.id,
        created_at=request.created_at,
        background=request.background,
        question=question,
        status=status,
        title=request.title,
        answer=answer,
        error=error,
        answered_at=completion.at if completion is not None else None,
    )


def _committed(answer: AnswerResult) -> bool:
    return (
        bool(answer.values)
        or bool(answer.custom_text and answer.custom_text.strip())
        or bool(answer.custom_images)
    )


def request_of(record: je.HistoryRequest, timestamp: float) -> Request | None:
    request_id = record.request_id
    questions = stored_questions(request_id, record.questions)
    if questions is None:
        return None
    assert isinstance(request_id, str)
    created_at = record.created_at
    title = record.title
    return Request(
        request_id=request_id,
        created_at=created_at if isinstance(created_at, str) else _iso(timestamp),
        background=record.background is True,
        title=title if isinstance(title, str) and title.strip() else None,
        questions=questions,
    )


def _completion_of(record: je.HistoryCompleted) -> _Completion | None:
    error = record.error
    raw_result = record.result
    result: AskResult | None = None
    if isinstance(raw_result, Mapping):
        try:
            result = AskResult.from_details(raw_result)
        except ValueError:
            result = None
    if result is None and not isinstance(error, str):
        return None
    return _Completion(result=result, error=error if isinstance(error, str) else None)


def _iso(timestamp: float) -> str:
    moment = dt.datetime.fromtimestamp(timestamp, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def find_record(
    records: Sequence[HistoryRecord], request_id: str, question_id: str
) -> HistoryRecord:
    for record in records:
        if record.request_id == request_id and record.question_id == question_id:
            return record
    raise HistoryError(not_found_text(request_id, question_id))


def replace_image_data(value: Any, placeholder: str) -> Any:
    """A copy of ``value`` with every string field named ``data`` replaced."""
    if isinstance(value, Mapping):
        return {
            key: placeholder
            if key == "data" and isinstance(item, str)
            else replace_image_data(item, placeholder)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [replace_image_data(item, placeholder) for item in value]
    return value
