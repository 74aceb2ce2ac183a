"""Session question history: records read from the journal on the current branch, the three
history tools (``list_ask_history``, ``read_ask_history``, ``export_ask_history``) and the
Markdown export.

Everything except ``export_history`` (which writes one new file) and ``call_history_tool``
(which runs in the persistence actor) is pure. The index of a branch is the journal fold's log
(``projection``): where each request and completion is stored, read from the history index of
the session's newest checkpoint (a few merged runs in columns, ``projection.history_log``) and
the fold's own log, so it follows branch switches, reload and resume by construction; a page
bisects running record counts and decodes only its own requests' entries (``HistorySource``).
A branch held in memory gives the same source (``source_of_branch``).

Rules (contract 000 §Session question history; catalog §5 where 000 is silent):

- one record per (request, question), in journal order: the order of the
  ``ask:history-request`` entries on the branch, then question order. A request id seen twice
  keeps its first entry; entries that are not well-formed are ignored, never guessed at;
- a request's outcome is its latest well-formed ``ask:history-completed`` entry on the branch;
- status, first rule that applies: ``error`` (the completion carries an error) → ``waiting`` (no
  result yet) → ``cancelled`` → ``skipped`` (listed in ``skippedQuestionIds``) → ``answered``
  (a committed answer: a selected value, non-blank custom text, or custom images) → ``skipped``
  (submitted without a committed answer; notes alone are never an answer);
- ``hasAnswer`` (and ``answeredOnly``) is ``status == "answered"``: partial selections kept in a
  cancelled result are recorded but are not committed answers;
- the record's question is the normalised question of the request (with its saved context and
  options); its ``type``/``presentedType`` come from the final result when there is one.
"""

from __future__ import annotations

import array
import bisect
import collections
import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AnswerResult, AskResult, QuestionMeta
from pi_agent_ask.form.sanitize import escape_visibly
from pi_agent_ask.form.schemas import HISTORY_DEFAULT_LIMIT, HISTORY_MAX_LIMIT
from pi_agent_ask.form.types import JSON, AskParams, Image, Option, Question
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import LogColumns
from pi_agent_ask.persistence.stored_questions import stored_questions

if TYPE_CHECKING:
    from pi_agent_ask.persistence.session_file import Entry, Loc, SessionFile

__all__ = [
    "EMPTY_SELECTION_TEXT",
    "HISTORY_TOOLS",
    "IMAGE_PLACEHOLDER",
    "PATH_REQUIRED_TEXT",
    "HistoryError",
    "HistoryRecord",
    "HistoryStatus",
    "build_records",
    "call_history_tool",
    "export_history",
    "list_history",
    "not_found_text",
    "read_history",
    "read_result_content",
    "render_markdown",
    "tool_text",
]

logger = logging.getLogger(__name__)

HistoryStatus = Literal["waiting", "answered", "skipped", "cancelled", "error"]

LIST_ASK_HISTORY = "list_ask_history"
READ_ASK_HISTORY = "read_ask_history"
EXPORT_ASK_HISTORY = "export_ask_history"
HISTORY_TOOLS = (LIST_ASK_HISTORY, READ_ASK_HISTORY, EXPORT_ASK_HISTORY)

PATH_REQUIRED_TEXT = "An export path is required."
EMPTY_SELECTION_TEXT = "Select at least one question or omit keys to export all history."
IMAGE_PLACEHOLDER = "[image bytes in structuredContent]"

_MIME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$")
_BACKTICKS_RE = re.compile(r"`+")


class HistoryError(Exception):
    """A history request that cannot be served: its message is the tool error text."""


def not_found_text(request_id: str, question_id: str) -> str:
    """The error for a key that is not on the current branch."""
    return f"Question not found on the current branch: {request_id} / {question_id}"


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@attrs.frozen
class HistoryRecord:
    """One recorded question of one ``ask_user`` request and what became of it.

    ``answer`` is the question's entry in the latest result (``None`` when it has none, or when
    the question was explicitly skipped); ``error`` is the completion's error text.
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
            data = _replace_image_data(data, "")
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).lower()


@attrs.frozen
class _Request:
    request_id: str
    created_at: str
    background: bool
    title: str | None
    questions: tuple[Question, ...]


@attrs.frozen
class _Completion:
    result: AskResult | None
    error: str | None


_JOURNAL_TYPES = frozenset({jr.HISTORY_REQUEST, jr.HISTORY_COMPLETED})


def build_records(
    entries: Iterable[Entry], only: Collection[str] | None = None
) -> list[HistoryRecord]:
    """All history records of a branch (its entries root → leaf), in journal order; with
    ``only``, just those of these request ids (the others are not even parsed)."""
    requests: dict[str, _Request] = {}
    completions: dict[str, list[je.HistoryCompleted]] = {}
    for entry in entries:
        if entry.type not in _JOURNAL_TYPES:
            continue
        record = je.parse(entry)
        if not isinstance(record, je.HistoryRequest | je.HistoryCompleted):
            continue  # not reached: these two entry types parse to these two records
        if only is not None and (record.request_id is None or record.request_id not in only):
            continue
        if isinstance(record, je.HistoryRequest):
            request = _request_of(record, entry.timestamp)
            if request is not None and request.request_id not in requests:
                requests[request.request_id] = request
        elif isinstance(record, je.HistoryCompleted) and record.request_id is not None:
            completions.setdefault(record.request_id, []).append(record)
    return _records(requests, completions)


def _records(
    requests: Mapping[str, _Request], completions: Mapping[str, Sequence[je.HistoryCompleted]]
) -> list[HistoryRecord]:
    records: list[HistoryRecord] = []
    for request_id, request in requests.items():
        completion = _latest_completion(completions.get(request_id, ()))
        records.extend(_record(request, question, completion) for question in request.questions)
    return records


def _latest_completion(candidates: Sequence[je.HistoryCompleted]) -> _Completion | None:
    """The latest well-formed completion; parsing (the costly part) stops at the first found,
    so superseded completions and those of requests off the branch are never parsed."""
    for record in reversed(candidates):
        completion = _completion_of(record)
        if completion is not None:
            return completion
    return None


def _record(request: _Request, question: Question, completion: _Completion | None) -> HistoryRecord:
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
    )


def _committed(answer: AnswerResult) -> bool:
    return (
        bool(answer.values)
        or bool(answer.custom_text and answer.custom_text.strip())
        or bool(answer.custom_images)
    )


def _request_of(record: je.HistoryRequest, timestamp: float) -> _Request | None:
    request_id = record.request_id
    questions = stored_questions(request_id, record.questions)
    if questions is None:
        return None
    assert isinstance(request_id, str)
    created_at = record.created_at
    title = record.title
    return _Request(
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


def _find(records: Sequence[HistoryRecord], request_id: str, question_id: str) -> HistoryRecord:
    for record in records:
        if record.request_id == request_id and record.question_id == question_id:
            return record
    raise HistoryError(not_found_text(request_id, question_id))


# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------


@attrs.frozen(eq=False)
class HistorySource:
    """The history of one branch: which requests it recorded, where, and a reader for them.

    Built from the journal's log (``projection``) in columns: ``ids`` holds each request's
    first well-formed ``ask:history-request`` in journal order, ``nums`` its ``(offset, slot,
    questions)``, ``ends`` the number of records up to and including it; ``cids``/``cnum`` the
    ``ask:history-completed`` entries carrying an outcome, oldest first. Nothing is decoded
    until a page or a read asks for its own requests.
    """

    ids: Sequence[str]
    nums: array.array[int]
    ends: Sequence[int]
    positions: Mapping[str, int]
    cnum: array.array[int]
    last_completion: Mapping[str, int]
    completion_lists: Mapping[str, Sequence[int]] | None
    """The requests with more than one completion (``None``: none has)."""
    load: Callable[[Loc], Entry]
    total: int
    key: tuple[int, int]
    """Changes whenever a record may have: (requests, completions) recorded."""

    def location(self, position: int) -> Loc:
        return (self.nums[3 * position], self.nums[3 * position + 1])

    def completions(self, request_id: str) -> list[Loc]:
        """Where the request's completions are stored, oldest first."""
        found = None if self.completion_lists is None else self.completion_lists.get(request_id)
        if found is None:
            last = self.last_completion.get(request_id)
            found = () if last is None else (last,)
        cnum = self.cnum
        return [(cnum[2 * j], cnum[2 * j + 1]) for j in found]


def source_from_columns(columns: LogColumns, load: Callable[[Loc], Entry]) -> HistorySource:
    """The source of a branch's log in columns: C-speed passes (``dict``/``zip``), a Python
    loop only over duplicated request ids (which the runtime never writes)."""
    ids, nums = columns.qids, columns.qnum
    count = len(ids)
    positions = dict(zip(ids, range(count), strict=True))
    if len(positions) != count:
        # The first entry of a request id wins: later keys overwrite earlier ones, so reversed.
        positions = dict(zip(reversed(ids), range(count - 1, -1, -1), strict=True))
        keep = sorted(positions.values())
        ids = [ids[i] for i in keep]
        nums = array.array("q", [n for i in keep for n in nums[3 * i : 3 * i + 3]])
        positions = dict(zip(ids, range(len(ids)), strict=True))
    ends = list(itertools.accumulate(nums[2::3]))
    cids = columns.cids
    last = dict(zip(cids, range(len(cids)), strict=True))
    lists: dict[str, list[int]] | None = None
    if len(last) != len(cids):
        many = {rid for rid, n in collections.Counter(cids).items() if n > 1}
        lists = {}
        for j, rid in enumerate(cids):
            if rid in many:
                lists.setdefault(rid, []).append(j)
    return HistorySource(
        ids,
        nums,
        ends,
        positions,
        columns.cnum,
        last,
        lists,
        load,
        ends[-1] if ends else 0,
        (len(ids), len(cids)),
    )


def source_from_log(log: Iterable[Any], load: Callable[[Loc], Entry]) -> HistorySource:
    columns = LogColumns()
    columns.add_items(log)
    return source_from_columns(columns, load)


def source_of_branch(entries: Iterable[Entry]) -> HistorySource:
    """The history source of a branch held in memory (root first)."""
    fold, load = jr.fold_branch(list(entries))
    return source_from_log(fold.log_items(), load)


def source_of_session(session: SessionFile) -> HistorySource:
    """The history source of a session's active branch: from its journal log when it has the
    journal projection (the history index of the newest checkpoint, then the fold's own log;
    the checkpoint chain when an older checkpoint has no index), else from its branch."""
    from pi_agent_ask.persistence.projection import JOURNAL, JournalFold, history_log
    from pi_agent_ask.persistence.session_file import SessionFileError

    if session.projection != JOURNAL:
        return source_of_branch(session.branch())
    fold = session.fold()
    assert isinstance(fold, JournalFold)  # the journal projection's
    own = fold.log_items()
    try:
        # The history index only: a checkpoint's pending forms (``live``) are not decoded.
        columns = history_log(own, session.log_prev, partial(session.checkpoint_at, live=False))
    except (ValueError, SessionFileError) as exc:
        logger.warning(
            "%s: history index unreadable (%s); reading the checkpoint chain", session, exc
        )
        return source_from_log(session.log(), session.entry_at)
    return source_from_columns(columns, session.entry_at)


def _source(entries: Iterable[Entry] | HistorySource) -> HistorySource:
    return entries if isinstance(entries, HistorySource) else source_of_branch(entries)


def source_records(
    source: HistorySource, only: Collection[str] | None = None
) -> list[HistoryRecord]:
    """The records of ``source`` (with ``only``: of these request ids), in journal order."""
    requests: dict[str, _Request] = {}
    completions: dict[str, list[je.HistoryCompleted]] = {}
    if only is None:
        chosen: Iterable[int] = range(len(source.ids))
    else:
        positions = source.positions
        chosen = sorted({positions[r] for r in only if r in positions})
    ids, load = source.ids, source.load
    for position in chosen:
        request_id = ids[position]
        entry = load(source.location(position))
        record = je.parse(entry)
        request = (
            _request_of(record, entry.timestamp) if isinstance(record, je.HistoryRequest) else None
        )
        if request is None:
            continue
        requests[request_id] = request
        found = [je.parse(load(at)) for at in source.completions(request_id)]
        completions[request_id] = [c for c in found if isinstance(c, je.HistoryCompleted)]
    return _records(requests, completions)


@attrs.frozen
class RecordIndex:
    """Every record of one branch state, with its search text, built once.

    ``key`` names the journal's state on the branch (``HistorySource.key``): paging through a
    long history with ``nextOffset`` reuses one index instead of rebuilding it on every call.
    """

    key: tuple[int, int]
    records: tuple[HistoryRecord, ...]
    texts: tuple[str, ...]


def index_records(entries: Iterable[Entry] | HistorySource) -> RecordIndex:
    """Build the records and their search texts (the slow part of a filtered list)."""
    source = _source(entries)
    records = tuple(source_records(source))
    return RecordIndex(source.key, records, tuple(r.search_text() for r in records))


def list_history(
    entries: Iterable[Entry] | HistorySource,
    query: str | None = None,
    answered_only: bool = False,
    offset: int = 0,
    limit: int = HISTORY_DEFAULT_LIMIT,
    *,
    index: RecordIndex | None = None,
) -> dict[str, JSON]:
    """``list_ask_history``: ``{total, offset, nextOffset?, records}`` over the filtered records.

    ``query`` is trimmed and matched case-insensitively as a substring of each record's JSON;
    ``total`` counts the filtered records; ``nextOffset`` is present only when more remain.
    Without a filter only the page's own requests are read; a filter reads every record
    (``index``, when given and current, holds them already).
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise HistoryError("offset must be a non-negative integer.")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= HISTORY_MAX_LIMIT:
        raise HistoryError(f"limit must be an integer from 1 to {HISTORY_MAX_LIMIT}.")
    source = _source(entries)
    needle = query.strip().lower() if isinstance(query, str) else ""
    if not needle and not answered_only:
        return _page(source, offset, limit)
    if index is None or index.key != source.key:
        index = index_records(source)
    matches = [
        record
        for record, text in zip(index.records, index.texts, strict=True)
        if (not answered_only or record.has_answer) and (not needle or needle in text)
    ]
    return _listing(matches[offset : offset + limit], offset, len(matches))


def _page(source: HistorySource, offset: int, limit: int) -> dict[str, JSON]:
    """An unfiltered page: the records ``offset`` .. ``offset + limit`` of the requests that
    hold them, found by bisecting the index's running record counts."""
    ends, ids = source.ends, source.ids
    position = bisect.bisect_right(ends, offset)
    first = ends[position - 1] if position else 0
    wanted: list[str] = []
    while position < len(ids) and (ends[position - 1] if position else 0) < offset + limit:
        wanted.append(ids[position])
        position += 1
    records = source_records(source, only=wanted)
    page = records[offset - first : offset - first + limit]
    return _listing(page, offset, source.total)


def _listing(page: Sequence[HistoryRecord], offset: int, total: int) -> dict[str, JSON]:
    out: dict[str, JSON] = {"total": total, "offset": offset}
    following = offset + len(page)
    if following < total:
        out["nextOffset"] = following
    out["records"] = [record.summary() for record in page]
    return out


def read_history(
    entries: Iterable[Entry] | HistorySource, request_id: str, question_id: str
) -> dict[str, JSON]:
    """``read_ask_history``: ``{record}``, the full record; ``HistoryError`` for a key that is
    not on the current branch."""
    return {"record": read_record(_source(entries), request_id, question_id).to_json()}


def read_record(source: HistorySource, request_id: str, question_id: str) -> HistoryRecord:
    """The record of one key, reading only its own request's entries."""
    return _find(source_records(source, only={request_id}), request_id, question_id)


def _select(records: Sequence[HistoryRecord], keys: object) -> list[HistoryRecord]:
    """The selected records in journal order; every key must exist (one bad key fails all)."""
    if keys is None:
        return list(records)
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise HistoryError("keys must be an array of {requestId, questionId} objects.")
    if not keys:
        raise HistoryError(EMPTY_SELECTION_TEXT)
    wanted: set[tuple[str, str]] = set()
    for key in keys:
        request_id = key.get("requestId") if isinstance(key, Mapping) else None
        question_id = key.get("questionId") if isinstance(key, Mapping) else None
        if not isinstance(request_id, str) or not isinstance(question_id, str):
            raise HistoryError("Each key must have a requestId and a questionId string.")
        wanted.add(_find(records, request_id, question_id).key)
    return [record for record in records if record.key in wanted]


def _requested_ids(keys: object) -> set[str] | None:
    """The request ids a well-formed key selection names (``None``: build every record)."""
    if not isinstance(keys, list | tuple) or not keys:
        return None
    ids = {key.get("requestId") for key in keys if isinstance(key, Mapping)}
    return {i for i in ids if isinstance(i, str)} if ids else None


def export_history(
    entries: Iterable[Entry] | HistorySource,
    path: str,
    keys: Sequence[Mapping[str, Any]] | None,
    cwd: str | os.PathLike[str],
) -> dict[str, JSON]:
    """``export_ask_history``: write the selected records to a new Markdown file.

    Returns ``{path, keys}`` (the absolute path and the exported keys in journal order). Every
    key is checked before anything is created. The file is created exclusively with mode 0600:
    an existing file, or a symlink at the destination, is never replaced or followed, and the
    parent directory must already exist. A failed write removes the partial file.
    """
    wanted = _requested_ids(keys)
    selected = _select(source_records(_source(entries), only=wanted), keys)
    if not isinstance(path, str) or not path.strip():
        raise HistoryError(PATH_REQUIRED_TEXT)
    # Lexical normalisation only: resolving symlinks here would follow one at the destination.
    target = Path(os.path.normpath(Path(cwd).absolute() / path))
    if path.endswith(("/", os.sep)):
        raise HistoryError(f"The export path must name a file, not a directory: {target}")
    content = render_markdown(selected).encode("utf-8")
    _write_new_file(target, content)
    return {
        "path": str(target),
        "keys": [{"requestId": r.request_id, "questionId": r.question_id} for r in selected],
    }


def _write_new_file(target: Path, content: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise HistoryError(
            f"The export file already exists: {target} (existing files are never replaced)."
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        raise HistoryError(f"The export directory does not exist: {target.parent}") from None
    except OSError as error:
        raise HistoryError(f"Could not create the export file {target}: {error.strerror}") from None
    try:
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException as error:
        os.close(fd)
        # The file was created by this call (O_EXCL), so removing it touches nothing else.
        with contextlib.suppress(OSError):
            target.unlink()
        if isinstance(error, OSError):
            raise HistoryError(
                f"Could not write the export file {target}: {error.strerror}"
            ) from None
        raise
    os.close(fd)


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _literal(text: str) -> str:
    """A fenced ``text`` block holding ``text`` verbatim: the fence is one backtick longer than
    the longest backtick run inside (at least three), so nothing inside can close it. Controls
    and invisible format characters are written as ``<U+XXXX>``: ``cat`` on an export never
    runs an escape sequence (``docs/history.md``)."""
    text = escape_visibly(text)
    longest = max((len(run) for run in _BACKTICKS_RE.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _field(label: str, text: str | None) -> str:
    return "" if not text else f"### {label}\n\n{_literal(text)}"


def _images(label: str, images: Sequence[Image]) -> list[str]:
    parts = []
    for number, image in enumerate(images, start=1):
        name = f"{label} image {number}"
        # The MIME type is written into a URI: anything unexpected there could break the link.
        mime = image.mime_type if _MIME_RE.match(image.mime_type) else "application/octet-stream"
        data = "".join(image.data.split())
        parts.append(f"### {name}\n\n![{name}](data:{mime};base64,{data})")
    return parts


def _bool(value: bool) -> str:
    return "true" if value else "false"


def render_markdown(records: Sequence[HistoryRecord]) -> str:
    """The export file: ``# Ask history`` then one section per record, ending with a newline.

    Every text field is a literal fenced block, so Markdown punctuation and line breaks stay
    exactly as recorded; blocks are separated by one blank line and empty fields are omitted.
    """
    parts = ["# Ask history"]
    parts.extend(_render_record(record, number) for number, record in enumerate(records, 1))
    return "\n\n".join(parts) + "\n"


def _render_record(record: HistoryRecord, number: int) -> str:
    question = record.question
    parts = [
        f"## Question {number}",
        f"Status: {record.status}",
        f"Created: {record.created_at}",
        f"Background: {_bool(record.background)}",
        _field("Request key", record.request_id),
        _field("Question key", record.question_id),
        _field("Form title", record.title),
        _field("Label", question.label),
        _field("Question", question.prompt),
        _field("Context", question.context),
        f"Type: {question.type}",
        f"Presented type: {question.presented_type or question.type}",
    ]
    parts.extend(_render_option(option, n) for n, option in enumerate(question.options, 1))
    if record.answer is None:
        parts.append("No committed answer.")
    else:
        parts.extend(_render_answer(record.answer))
    parts.append(_field("Error", record.error))
    return "\n\n".join(part for part in parts if part)


def _render_option(option: Option, number: int) -> str:
    parts = [
        f"### Option {number}",
        _field("Value", option.value),
        _field("Label", option.label),
        _field("Description", option.description),
    ]
    if option.recommended is not None:
        parts.append(f"Recommended: {_bool(option.recommended)}")
    return "\n\n".join(part for part in parts if part)


def _render_answer(answer: AnswerResult) -> list[str]:
    positions = json.dumps(list(answer.indices), separators=(",", ":"))
    parts = [f"### Answer\n\nSelected positions: {positions}"]
    parts.extend(_field(f"Selected value {n}", v) for n, v in enumerate(answer.values, 1))
    parts.extend(_field(f"Selected label {n}", v) for n, v in enumerate(answer.labels, 1))
    parts.append(_field("Custom answer", answer.custom_text))
    parts.extend(_images("Custom answer", answer.custom_images))
    parts.append(_field("Question note", answer.note))
    parts.extend(_images("Question note", answer.note_images))
    for value, images in answer.option_note_images.items():
        if images:
            parts.append(_field("Image note option value", value))
            parts.extend(_images("Option note", images))
    for value, note in answer.option_notes.items():
        parts.append(_field("Noted option value", value))
        parts.append(_field("Option note", note))
    return parts


# --------------------------------------------------------------------------------------------
# Tool results
# --------------------------------------------------------------------------------------------


def _replace_image_data(value: Any, placeholder: str) -> Any:
    """A copy of ``value`` with every string field named ``data`` replaced."""
    if isinstance(value, Mapping):
        return {
            key: placeholder
            if key == "data" and isinstance(item, str)
            else _replace_image_data(item, placeholder)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_replace_image_data(item, placeholder) for item in value]
    return value


def tool_text(data: Mapping[str, Any]) -> str:
    """The text block of a history tool result: compact JSON of ``data`` with image bytes
    replaced by ``[image bytes in structuredContent]``."""
    redacted = _replace_image_data(data, IMAGE_PLACEHOLDER)
    return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))


def read_result_content(record: HistoryRecord) -> list[dict[str, JSON]]:
    """The content blocks of a ``read_ask_history`` result: the JSON text, then each image of
    the answer preceded by a text block naming its question and answer or note."""
    blocks: list[dict[str, JSON]] = [
        {"type": "text", "text": tool_text({"record": record.to_json()})}
    ]
    if record.answer is None or record.status in ("cancelled", "error"):
        return blocks
    question = record.question
    params = AskParams(questions=(question,), title=record.title)
    result = AskResult(
        cancelled=False,
        questions=(
            QuestionMeta(
                id=question.id,
                label=question.label,
                prompt=question.prompt,
                type=question.type,
                presented_type=question.presented_type,
            ),
        ),
        answers={question.id: record.answer},
    )
    blocks.extend(texts.image_blocks(result, params=params))
    return blocks


def _response(
    data: dict[str, JSON], content: list[dict[str, JSON]] | None = None
) -> dict[str, Any]:
    return {
        "content": content if content is not None else [{"type": "text", "text": tool_text(data)}],
        "details": data,
        "structuredContent": data,
    }


async def call_history_tool(runtime: Any, writer: Any, name: str, arguments: Any) -> dict[str, Any]:
    """Run one history tool call for the runtime.

    ``writer.branch()`` gives the current branch (root → leaf); ``runtime.cwd`` anchors
    relative export paths. Schema failures and history errors raise ``HistoryError`` (the
    runtime turns it into the tool's error result).
    """
    from pi_agent_ask.form.schema_check import schema_error_text, schema_issues

    if name not in HISTORY_TOOLS:
        raise HistoryError(f"Tool {name!r} is not available.")
    if (
        name == EXPORT_ASK_HISTORY
        and isinstance(arguments, Mapping)
        and arguments.get("keys") == []
        and not schema_issues(name, {k: v for k, v in arguments.items() if k != "keys"})
    ):
        # The schema's minItems would say "keys: must NOT have fewer than 1 items"; the
        # history's own sentence tells the agent what to do instead.
        raise HistoryError(EMPTY_SELECTION_TEXT)
    issues = schema_issues(name, arguments)
    if issues:
        raise HistoryError(schema_error_text(name, issues))
    # The work runs where the session is (the persistence actor, in a worker thread for
    # a file): a page or a read decodes only its own requests' entries.
    if name == LIST_ASK_HISTORY:
        cached = runtime.history_index

        def listing(session: SessionFile) -> tuple[dict[str, JSON], RecordIndex | None]:
            source = source_of_session(session)
            query = arguments.get("query")
            answered_only = bool(arguments.get("answeredOnly", False))
            index = cached
            filtered = answered_only or (isinstance(query, str) and query.strip())
            if filtered and (index is None or index.key != source.key):
                index = index_records(source)
            data = list_history(
                source,
                query=query,
                answered_only=answered_only,
                offset=arguments.get("offset", 0),
                limit=arguments.get("limit", HISTORY_DEFAULT_LIMIT),
                index=index,
            )
            return data, index

        data, runtime.history_index = await writer.read(listing)
        return _response(data)
    if name == READ_ASK_HISTORY:
        request_id, question_id = arguments["requestId"], arguments["questionId"]
        record = await writer.read(
            lambda session: read_record(source_of_session(session), request_id, question_id)
        )
        return _response({"record": record.to_json()}, read_result_content(record))
    path, keys, cwd = arguments["path"], arguments.get("keys"), runtime.cwd
    data = await writer.read(
        lambda session: export_history(source_of_session(session), path, keys, cwd)
    )
    return _response(data)
