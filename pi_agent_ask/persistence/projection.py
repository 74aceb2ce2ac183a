"""The ask journal's projection: what a session keeps folded for its active branch.

``JournalFold`` takes the branch's entries root → leaf, one at a time (``step``), and keeps only
what is still open, as entry locations (``Loc``), never entry data:

- **queue**: each background request not yet settled (settled: its outcome recorded *and*
  delivered), with the locations of its ``ask:queued`` entry, newest draft and outcome, and
  whether it was delivered; whether the panel is visible;
- **recovery**: the ``ask_user`` calls without a result yet (with their ``ask:payload``
  entries), the newest history request of each such call and of each dismissed one, the newest
  completion of those requests, and the dismissed calls whose answer was not yet delivered;
- **log** (append-only, for the history index): ``["q", requestId, offset, slot, questions]``
  for each well-formed ``ask:history-request``, ``["c", requestId, offset, slot]`` for each
  ``ask:history-completed`` carrying a result or an error (kept as tuples, made lists when
  read as ``log``: ``JournalFold._log``).

The live part goes whole into every checkpoint (``live()`` / ``JOURNAL.restore``); the log goes
into checkpoints in parts (``SessionFile.log`` reads the chain), and every checkpoint also holds
the history index (``history_fields``: the blocks of the chain's log, merged 16 to a run, so
``history_log`` reads the whole log from a few checkpoints; ``docs/session-file.md``).
``journal`` turns a fold into the rebuilt queue and the interrupted call; ``history`` turns the
log into its index.

Rules that differ from reading the whole branch at once, none of which the runtime's own
writes can meet: a resolution (``tool-result``, ``ask:queued``, ``ask:pending-dismissed``)
resolves only calls recorded before it; a delivery mark, draft or completion attaches only to a
request recorded before it; a request id queued again after it was settled starts over.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence.session_file import Entry, Loc
from pi_agent_ask.persistence.stored_questions import stored_questions

__all__ = [
    "JOURNAL",
    "JournalFold",
    "JournalProjection",
    "LogColumns",
    "PendingRequest",
    "history_fields",
    "history_log",
]

Read = Callable[[int], Mapping[str, Any]]
"""The checked map of the checkpoint at a file offset (``ValueError`` when unusable)."""


@attrs.define(repr=False)
class PendingRequest:
    """A background request the queue still has to do something with."""

    queued: Loc
    draft: Loc | None = None
    outcome: Loc | None = None
    delivered: bool = False


@attrs.define(eq=False, repr=False)
class JournalFold:
    """The fold of one branch (see the module header). Owned by its session; readers take
    what they need at once and never keep it."""

    requests: dict[str, PendingRequest] = attrs.field(factory=dict)
    panel_visible: bool = True
    calls: list[tuple[str, Loc]] = attrs.field(factory=list)
    """Unresolved ``ask_user`` calls, oldest first."""
    payloads: dict[str, list[Loc]] = attrs.field(factory=dict)
    call_requests: dict[str, tuple[str, Loc]] = attrs.field(factory=dict)
    """Call id → its newest history request (id, location), for open and dismissed calls."""
    completions: dict[str, Loc] = attrs.field(factory=dict)
    """Request id → its newest ``ask:history-completed``, for the requests above."""
    dismissed: dict[str, None] = attrs.field(factory=dict)
    """Dismissed calls whose answer was not delivered yet, in order."""
    returned: dict[tuple[str, str], tuple[Loc, int]] = attrs.field(factory=dict)
    """Given-back messages not delivered again (``ask:returned``): (mark type, request id) →
    the entry's location and the message's index in it."""
    _log: list[Any] = attrs.field(factory=list, init=False, repr=False)
    """The log (``log``). The fold appends its items as tuples: a tuple of text and numbers
    leaves the cyclic collector's care the first time the collector looks at it, a list never
    does, and the fold of an in-memory session keeps the log items of every form it saw."""
    _listed: int = attrs.field(default=0, init=False, repr=False)
    """How many of ``_log``'s first items ``log`` has made lists."""

    @property
    def log(self) -> list[Any]:
        """The log items since the last checkpoint, oldest first, as the lists a checkpoint
        holds and gives back: the fold's own list, its tuples made lists in place (so an item
        appended to it stays). Readers that only go through the items take ``log_items``."""
        log, listed = self._log, self._listed
        if listed < len(log):
            log[listed:] = [list(item) for item in log[listed:]]
            self._listed = len(log)
        return log

    @log.setter
    def log(self, items: list[Any]) -> None:
        self._log, self._listed = items, 0

    def log_items(self) -> Sequence[Sequence[Any]]:
        """The log items as the fold keeps them (tuples, or lists once ``log`` was read), for
        a reader that goes through them once (``LogColumns.add_items``)."""
        return self._log

    # ---- folding -------------------------------------------------------------------------

    def step(self, entry: Entry, loc: Loc) -> None:
        # The handlers read the few fields they need with the rules ``entries.parse`` reads
        # them with (a field of the wrong type is missing) instead of building the record.
        handle = _STEPS.get(entry.type)
        if handle is not None:
            handle(self, entry.data, loc)

    def _tool_call(self, data: Mapping[str, Any], loc: Loc) -> None:
        call_id = data.get("toolCallId")
        if isinstance(call_id, str) and data.get("name") == "ask_user":
            self.calls.append((call_id, loc))

    def _tool_result(self, data: Mapping[str, Any], loc: Loc) -> None:
        call_id = data.get("toolCallId")
        # Resolving a call that is neither open nor has a payload or a request changes
        # nothing: the runtime's own result follows its ``ask:queued``, which resolved it.
        if isinstance(call_id, str) and (
            self.calls or call_id in self.payloads or call_id in self.call_requests
        ):
            self._resolve(call_id)
        if data.get("name") == "wait_for_answers":  # else it delivers nothing
            for request_id in je.ToolResult.from_data(data).delivered_ids():
                self._deliver(request_id)

    def _payload(self, data: Mapping[str, Any], loc: Loc) -> None:
        call_id = data.get("sourceEntryId")
        if not isinstance(call_id, str) or data.get("version") != 1:
            return
        locs = self.payloads.get(call_id)
        if locs is not None:
            locs.append(loc)
            return
        for c, _ in self.calls:
            if c == call_id:
                self.payloads[call_id] = [loc]
                return

    def _history_completed(self, data: Mapping[str, Any], loc: Loc) -> None:
        request_id = data.get("requestId")
        if not isinstance(request_id, str):
            return
        if _has_outcome(data):
            self._log.append(("c", request_id, loc[0], loc[1]))
        for rid, _ in self.call_requests.values():
            if rid == request_id:
                self.completions[request_id] = loc
                return

    def _queued(self, data: Mapping[str, Any], loc: Loc) -> None:
        request_id, call_id = data.get("requestId"), data.get("toolCallId")
        if isinstance(call_id, str):
            self._resolve(call_id)
        if isinstance(request_id, str) and request_id not in self.requests:
            self.requests[request_id] = PendingRequest(loc)

    def _queue_completed(self, data: Mapping[str, Any], loc: Loc) -> None:
        request_id = data.get("requestId")
        if not isinstance(request_id, str):
            return
        pending = self.requests.get(request_id)
        if pending is not None and _has_outcome(data):
            pending.outcome = loc
            if pending.delivered:  # settled (``_settle``)
                del self.requests[request_id]

    def _background_answer(self, data: Mapping[str, Any], loc: Loc) -> None:
        details = data.get("details")
        if details is None or not isinstance(details, Mapping):  # ``map_field``
            return
        request_id = details.get("requestId")
        if isinstance(request_id, str):
            if self.returned:
                self.returned.pop((je.BackgroundAnswer.TYPE, request_id), None)
            self._deliver(request_id)

    def _returned(self, data: Mapping[str, Any], loc: Loc) -> None:
        for index, kind, request_id in je.Returned.from_data(data).marks():
            self.returned[(kind, request_id)] = (loc, index)

    def _draft(self, data: Mapping[str, Any], loc: Loc) -> None:
        draft = je.Draft.from_data(data)
        if draft.request_id is not None and draft.form is not None:
            pending = self.requests.get(draft.request_id)
            if pending is not None:
                pending.draft = loc

    def _panel(self, data: Mapping[str, Any], loc: Loc) -> None:
        self.panel_visible = je.Panel.from_data(data).visible

    def _pending_dismissed(self, data: Mapping[str, Any], loc: Loc) -> None:
        dismissed = je.PendingDismissed.from_data(data)
        if dismissed.tool_call_id is not None:
            self._resolve(dismissed.tool_call_id, dismissed=True)

    def _resume_answer(self, data: Mapping[str, Any], loc: Loc) -> None:
        request_id = je.ResumeAnswer.from_data(data).request_id
        if request_id is None:
            return
        self.returned.pop((je.ResumeAnswer.TYPE, request_id), None)
        for call_id in [c for c in self.dismissed if self._request_of(c) == request_id]:
            del self.dismissed[call_id]
            self._forget_request(call_id)

    def _history_request(self, data: Mapping[str, Any], loc: Loc) -> None:
        request_id = data.get("requestId")
        if not isinstance(request_id, str):
            return
        questions = stored_questions(request_id, data.get("questions"))
        if questions is not None:
            self._log.append(("q", request_id, loc[0], loc[1], len(questions)))
        call_id = data.get("toolCallId")
        if not isinstance(call_id, str):
            return
        if call_id not in self.dismissed:
            for c, _ in self.calls:
                if c == call_id:
                    break
            else:
                return
        self._forget_request(call_id)
        self.call_requests[call_id] = (request_id, loc)

    def _resolve(self, call_id: str, *, dismissed: bool = False) -> None:
        calls = self.calls
        for c, _ in calls:
            if c == call_id:
                # (One call open, the usual case: no list to filter.)
                self.calls = [] if len(calls) == 1 else [x for x in calls if x[0] != call_id]
                break
        self.payloads.pop(call_id, None)
        if dismissed:
            self.dismissed.setdefault(call_id, None)
        elif call_id not in self.dismissed:
            self._forget_request(call_id)

    def _request_of(self, call_id: str) -> str | None:
        found = self.call_requests.get(call_id)
        return found[0] if found is not None else None

    def _forget_request(self, call_id: str) -> None:
        found = self.call_requests.pop(call_id, None)
        if found is None:
            return
        for r, _ in self.call_requests.values():
            if r == found[0]:
                return
        self.completions.pop(found[0], None)

    def _deliver(self, request_id: str) -> None:
        pending = self.requests.get(request_id)
        if pending is not None:
            pending.delivered = True
            self._settle(request_id)

    def _settle(self, request_id: str) -> None:
        pending = self.requests[request_id]
        if pending.delivered and pending.outcome is not None:
            del self.requests[request_id]

    # ---- checkpoints ---------------------------------------------------------------------

    def live(self) -> dict[str, Any]:
        return {
            "requests": [
                [rid, list(p.queued), _opt(p.draft), _opt(p.outcome), p.delivered]
                for rid, p in self.requests.items()
            ],
            "panel": self.panel_visible,
            "calls": [[call_id, list(loc)] for call_id, loc in self.calls],
            "payloads": [[c, [list(loc) for loc in locs]] for c, locs in self.payloads.items()],
            "callRequests": [[c, rid, list(loc)] for c, (rid, loc) in self.call_requests.items()],
            "completions": [[rid, list(loc)] for rid, loc in self.completions.items()],
            "dismissed": list(self.dismissed),
            "returned": [
                [kind, rid, list(loc), index] for (kind, rid), (loc, index) in self.returned.items()
            ],
        }


_STEPS: Final[dict[str, Callable[[JournalFold, Mapping[str, Any], Loc], None]]] = {
    je.ToolCall.TYPE: JournalFold._tool_call,
    je.ToolResult.TYPE: JournalFold._tool_result,
    je.Payload.TYPE: JournalFold._payload,
    je.HistoryRequest.TYPE: JournalFold._history_request,
    je.HistoryCompleted.TYPE: JournalFold._history_completed,
    je.QueueCompleted.TYPE: JournalFold._queue_completed,
    je.Queued.TYPE: JournalFold._queued,
    je.PendingDismissed.TYPE: JournalFold._pending_dismissed,
    je.BackgroundAnswer.TYPE: JournalFold._background_answer,
    je.ResumeAnswer.TYPE: JournalFold._resume_answer,
    je.Draft.TYPE: JournalFold._draft,
    je.Panel.TYPE: JournalFold._panel,
    je.Returned.TYPE: JournalFold._returned,
}
"""The entry types the fold reads and their handlers (the types ``entries.parse`` knows,
less ``user-message``, which the fold does not read)."""


def _has_outcome(data: Mapping[str, Any]) -> bool:
    """``_Completion.has_outcome`` of the completion this data is (``map_field`` of its
    result, ``text_field`` of its error)."""
    return isinstance(data.get("result"), Mapping) or isinstance(data.get("error"), str)


def _opt(loc: Loc | None) -> list[int] | None:
    return list(loc) if loc is not None else None


def _loc(value: Any) -> Loc:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(type(n) is int for n in value)
        and value[0] >= 0
    ):
        return (value[0], value[1])
    raise ValueError("malformed entry location")


def _optional_loc(value: Any) -> Loc | None:
    return None if value is None else _loc(value)


def _index(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("malformed message index")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("malformed id")
    return value


@attrs.frozen(repr=False)
class JournalProjection:
    """The projection sessions of the ask journal are opened with."""

    name: str = "ask-journal/1"

    def empty(self) -> JournalFold:
        return JournalFold()

    def restore(self, live: Any) -> JournalFold:
        """The fold a checkpoint's live part describes; ``ValueError`` when malformed."""
        try:
            fold = JournalFold(panel_visible=live["panel"] is not False)
            for rid, queued, draft, outcome, delivered in live["requests"]:
                fold.requests[_text(rid)] = PendingRequest(
                    _loc(queued), _optional_loc(draft), _optional_loc(outcome), delivered is True
                )
            fold.calls = [(_text(c), _loc(loc)) for c, loc in live["calls"]]
            fold.payloads = {_text(c): [_loc(x) for x in locs] for c, locs in live["payloads"]}
            fold.call_requests = {
                _text(c): (_text(rid), _loc(loc)) for c, rid, loc in live["callRequests"]
            }
            fold.completions = {_text(rid): _loc(loc) for rid, loc in live["completions"]}
            fold.dismissed = {_text(c): None for c in live["dismissed"]}
            # Checkpoints written before give-backs existed have no ``returned``.
            fold.returned = {
                (_text(kind), _text(rid)): (_loc(loc), _index(index))
                for kind, rid, loc, index in live.get("returned", ())
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"checkpoint state does not fit the journal: {exc}") from exc
        return fold

    def checkpoint_fields(self, log: Sequence[Any], prev: int | None, read: Read) -> dict[str, Any]:
        """What a checkpoint holds beyond the fold: the history index (``history_fields``)."""
        return {"history": history_fields(log, prev, read)}


JOURNAL: Final = JournalProjection()


# --------------------------------------------------------------------------------------------
# The history index in checkpoints: merged runs of the log
# --------------------------------------------------------------------------------------------

MERGE: Final = 16
"""Blocks of one level merged into one of the next level (``docs/session-file.md``)."""
TOP_LEVEL: Final = 2
"""Runs are merged up to this level: a run covers at most ``MERGE ** TOP_LEVEL`` segments."""
_LEGACY: Final = -1
"""A spine block that is a chain of checkpoints without a history index: read through ``prev``."""
_LE: Final = sys.byteorder == "little"


@attrs.define(eq=False, repr=False)
class LogColumns:
    """Log items in columns: the request ids of the ``q`` items with ``(offset, slot, count)``
    triples in ``qnum``, the ids of the ``c`` items with ``(offset, slot)`` pairs in ``cnum``;
    each in log order (how ``q`` and ``c`` items interleave carries no meaning)."""

    qids: list[str] = attrs.field(factory=list)
    qnum: array.array[int] = attrs.field(factory=lambda: array.array("q"))
    cids: list[str] = attrs.field(factory=list)
    cnum: array.array[int] = attrs.field(factory=lambda: array.array("q"))

    def add_items(self, items: Iterable[Any]) -> None:
        """Append log items (``["q", id, offset, slot, count]`` / ``["c", id, offset, slot]``);
        ``ValueError`` for anything else."""
        qids, qnum, cids, cnum = self.qids, self.qnum, self.cids, self.cnum
        try:
            for kind, request_id, offset, slot, *rest in items:
                if type(request_id) is not str:
                    raise ValueError("a log item's request id is not text")
                if kind == "q" and len(rest) == 1:
                    qids.append(request_id)
                    qnum.extend((offset, slot, rest[0]))
                elif kind == "c" and not rest:
                    cids.append(request_id)
                    cnum.extend((offset, slot))
                else:
                    raise ValueError("unknown log item")
        except (TypeError, OverflowError) as exc:
            raise ValueError(f"malformed log item: {exc}") from exc

    def add(self, other: LogColumns) -> None:
        self.qids.extend(other.qids)
        self.qnum.extend(other.qnum)
        self.cids.extend(other.cids)
        self.cnum.extend(other.cnum)

    def pack(self) -> dict[str, Any]:
        """The columns as a run: a completion of a request asked in the same run names it by
        its place in ``q`` (``cr``/``crn``), the others by id (``c``/``cn``)."""
        first: dict[str, int] = {}
        for i, request_id in enumerate(self.qids):
            first.setdefault(request_id, i)
        refs, ref_num, other, other_num = array.array("q"), array.array("q"), [], array.array("q")
        cnum = self.cnum
        for j, request_id in enumerate(self.cids):
            k = first.get(request_id)
            if k is None:
                other.append(request_id)
                other_num.extend(cnum[2 * j : 2 * j + 2])
            else:
                refs.append(k)
                ref_num.extend(cnum[2 * j : 2 * j + 2])
        return {
            "q": self.qids,
            "qn": _le_bytes(self.qnum),
            "cr": _le_bytes(refs),
            "crn": _le_bytes(ref_num),
            "c": other,
            "cn": _le_bytes(other_num),
        }

    @classmethod
    def unpack(cls, value: Any) -> LogColumns:
        """The columns of a packed run; ``ValueError`` when malformed."""
        try:
            qids, cids = value["q"], value["c"]
            if not (type(qids) is list and type(cids) is list):
                raise TypeError("ids are not arrays")
            if not set(map(type, qids)) <= {str} or not set(map(type, cids)) <= {str}:
                raise TypeError("an id is not text")
            qnum, refs, ref_num, cnum = (_from_le(value[key]) for key in ("qn", "cr", "crn", "cn"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed history run: {exc}") from exc
        if (
            len(qnum) != 3 * len(qids)
            or len(ref_num) != 2 * len(refs)
            or len(cnum) != 2 * len(cids)
            or (refs and (min(refs) < 0 or max(refs) >= len(qids)))
        ):
            raise ValueError("malformed history run: columns that do not fit")
        # The completions that name a request of the run share its id's string (C-speed).
        named = list(map(qids.__getitem__, refs))
        named.extend(cids)
        ref_num.extend(cnum)
        return cls(qids, qnum, named, ref_num)


def _le_bytes(numbers: array.array[int]) -> bytes:
    if _LE:
        return numbers.tobytes()
    swapped = array.array("q", numbers)
    swapped.byteswap()
    return swapped.tobytes()


def _from_le(data: Any) -> array.array[int]:
    if type(data) is not bytes:
        raise TypeError("a number column is not a byte string")
    numbers = array.array("q")
    numbers.frombytes(data)  # ValueError unless a whole number of 8-byte integers
    if not _LE:
        numbers.byteswap()
    return numbers


def _spine_of(prev: int | None, read: Read) -> list[list[int]]:
    """The blocks ``[offset, level]`` a checkpoint following ``prev`` continues."""
    if prev is None:
        return []
    value = read(prev)
    index = value.get("history")
    if index is None:
        return [[prev, _LEGACY]]
    spine = _checked_spine(index, prev)
    return [*spine, [prev, index["level"]]]


def _checked_spine(index: Any, offset: int) -> list[list[int]]:
    if not isinstance(index, Mapping):
        raise ValueError("malformed history index")
    spine, level = index.get("spine"), index.get("level")
    if not (
        type(level) is int
        and 0 <= level <= TOP_LEVEL
        and isinstance(spine, list)
        and all(
            isinstance(b, list)
            and len(b) == 2
            and type(b[0]) is int
            and type(b[1]) is int
            and 0 < b[0] < offset
            and _LEGACY <= b[1] <= TOP_LEVEL
            for b in spine
        )
        and (level == 0) == (index.get("run") is None)
    ):
        raise ValueError("malformed history index")
    return [list(b) for b in spine]


def _block(offset: int, level: int, read: Read) -> LogColumns:
    """The log items of one spine block."""
    columns = LogColumns()
    if level == _LEGACY:
        parts: list[Any] = []
        prev: int | None = offset
        while prev is not None:
            value = read(prev)
            parts.append(value["log"])
            prev = value["prev"]
        for part in reversed(parts):
            columns.add_items(part)
        return columns
    value = read(offset)
    if level == 0:
        columns.add_items(value["log"])
        return columns
    index = value.get("history")
    if not isinstance(index, Mapping) or index.get("level") != level:
        raise ValueError("a history block names a checkpoint of another level")
    return LogColumns.unpack(index.get("run"))


def history_fields(log: Sequence[Any], prev: int | None, read: Read) -> dict[str, Any]:
    """The ``history`` field of a checkpoint written after ``prev`` with ``log``: the blocks
    of the chain before it (``spine``), and its own block: ``level`` 0 is its ``log``; a
    higher level is a ``run`` merging ``MERGE`` blocks of the level below, its own log last.
    ``ValueError`` when an older checkpoint of the chain cannot be read."""
    spine = _spine_of(prev, read)
    level = 0
    run: LogColumns | None = None
    while (
        level < TOP_LEVEL
        and len(spine) >= MERGE - 1
        and all(b[1] == level for b in spine[-(MERGE - 1) :])
    ):
        merged = LogColumns()
        for offset, lvl in spine[-(MERGE - 1) :]:
            merged.add(_block(offset, lvl, read))
        if run is None:
            merged.add_items(log)
        else:
            merged.add(run)
        del spine[-(MERGE - 1) :]
        run, level = merged, level + 1
    return {"spine": spine, "level": level, "run": None if run is None else run.pack()}


def history_log(own: Sequence[Any], prev: int | None, read: Read) -> LogColumns:
    """Every log item of a branch whose fold holds ``own`` after the checkpoint ``prev``:
    the blocks of the newest checkpoint's spine, its own block, then ``own``. ``ValueError``
    when a checkpoint of the chain cannot be read or holds no history index of this shape."""
    columns = LogColumns()
    if prev is not None:
        for offset, level in _spine_of(prev, read):
            columns.add(_block(offset, level, read))
    columns.add_items(own)
    return columns
