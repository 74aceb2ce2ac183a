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
import itertools
import json
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AskResult, QuestionMeta
from pi_agent_ask.form.schemas import HISTORY_DEFAULT_LIMIT, HISTORY_MAX_LIMIT
from pi_agent_ask.form.types import JSON, AskParams
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import LogColumns

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


LIST_ASK_HISTORY = "list_ask_history"
READ_ASK_HISTORY = "read_ask_history"
EXPORT_ASK_HISTORY = "export_ask_history"
HISTORY_TOOLS = (LIST_ASK_HISTORY, READ_ASK_HISTORY, EXPORT_ASK_HISTORY)

PATH_REQUIRED_TEXT = "An export path is required."
EMPTY_SELECTION_TEXT = "Select at least one question or omit keys to export all history."
IMAGE_PLACEHOLDER = "[image bytes in structuredContent]"


from pi_agent_ask.persistence.history_markdown import render_markdown  # noqa: E402
from pi_agent_ask.persistence.history_records import (  # noqa: E402
    Completed,
    HistoryError,
    HistoryRecord,
    HistoryStatus,
    Request,
    build_records,
    find_record,
    not_found_text,
    records_of,
    replace_image_data,
    request_of,
)

# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------


@attrs.frozen(eq=False, repr=False)
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
    requests: dict[str, Request] = {}
    completions: dict[str, list[Completed]] = {}
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
            request_of(record, entry.timestamp) if isinstance(record, je.HistoryRequest) else None
        )
        if request is None:
            continue
        requests[request_id] = request
        found = [load(at) for at in source.completions(request_id)]
        completions[request_id] = [
            (record, entry.timestamp)
            for entry in found
            if isinstance(record := je.parse(entry), je.HistoryCompleted)
        ]
    return records_of(requests, completions)


@attrs.frozen(repr=False)
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
    offset, limit = _page_bounds(offset, limit)
    source = _source(entries)
    needle = query.strip().lower() if isinstance(query, str) else ""
    if not needle and not answered_only:
        return _page(source, offset, limit)
    if index is None or index.key != source.key:
        index = index_records(source)
    return list_records(index.records, needle, answered_only, offset, limit, texts=index.texts)


def _page_bounds(offset: object, limit: object) -> tuple[int, int]:
    """``offset`` and ``limit`` of a listing as integers, or ``HistoryError``. A whole number
    written with a point (``2.0``) is that integer: JSON Schema's ``integer`` takes it, so a
    call the schema let through is not refused here in other words."""
    if isinstance(offset, float) and offset.is_integer():
        offset = int(offset)
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise HistoryError("offset must be a non-negative integer.")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= HISTORY_MAX_LIMIT:
        raise HistoryError(f"limit must be an integer from 1 to {HISTORY_MAX_LIMIT}.")
    return offset, limit


def list_records(
    records: Sequence[HistoryRecord],
    query: object,
    answered_only: bool,
    offset: int,
    limit: int,
    *,
    texts: Sequence[str] | None = None,
) -> dict[str, JSON]:
    """``list_ask_history``'s filter and page over records already built (a journal's index,
    a team desk's rows): ``query`` as :func:`list_history` reads it; ``texts``, the records'
    search texts when they are known already."""
    offset, limit = _page_bounds(offset, limit)
    needle = query.strip().lower() if isinstance(query, str) else ""
    matches = [
        record
        for n, record in enumerate(records)
        if (not answered_only or record.has_answer)
        and (not needle or needle in (record.search_text() if texts is None else texts[n]))
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
    return find_record(source_records(source, only={request_id}), request_id, question_id)


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
        wanted.add(find_record(records, request_id, question_id).key)
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
    except (FileNotFoundError, NotADirectoryError) as error:
        raise HistoryError(_no_place_text(target, error)) from None
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


def _no_place_text(target: Path, error: OSError) -> str:
    """Why ``target`` could not be created where the system found no place for it: only a
    missing directory is said to be missing (``/proc`` exists, and takes no new file)."""
    parent = target.parent
    if parent.is_dir():
        return f"Could not create the export file {target}: {error.strerror}"
    if os.path.lexists(parent):
        return f"The export directory is not a directory: {parent}"
    return f"The export directory does not exist: {parent}"


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# Tool results
# --------------------------------------------------------------------------------------------


def tool_text(data: Mapping[str, Any]) -> str:
    """The text block of a history tool result: compact JSON of ``data`` with image bytes
    replaced by ``[image bytes in structuredContent]``."""
    redacted = replace_image_data(data, IMAGE_PLACEHOLDER)
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
