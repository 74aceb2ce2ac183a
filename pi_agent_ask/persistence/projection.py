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
  ``ask:history-completed`` carrying a result or an error.

The live part goes whole into every checkpoint (``live()`` / ``JOURNAL.restore``); the log goes
into checkpoints in parts (``SessionFile.log`` reads the chain). ``journal`` turns a fold into the
rebuilt queue and the interrupted call; ``history`` turns the log into its index.

Rules that differ from reading the whole branch at once, none of which the runtime's own
writes can meet: a resolution (``tool-result``, ``ask:queued``, ``ask:pending-dismissed``)
resolves only calls recorded before it; a delivery mark, draft or completion attaches only to a
request recorded before it; a request id queued again after it was settled starts over.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence.session_file import Entry, Loc
from pi_agent_ask.persistence.stored_questions import stored_questions

__all__ = ["JOURNAL", "JournalFold", "JournalProjection", "PendingRequest"]

_READ: Final = frozenset(
    {
        je.ToolCall.TYPE,
        je.ToolResult.TYPE,
        je.Payload.TYPE,
        je.HistoryRequest.TYPE,
        je.HistoryCompleted.TYPE,
        je.QueueCompleted.TYPE,
        je.Queued.TYPE,
        je.PendingDismissed.TYPE,
        je.BackgroundAnswer.TYPE,
        je.ResumeAnswer.TYPE,
        je.Draft.TYPE,
        je.Panel.TYPE,
    }
)


@attrs.define
class PendingRequest:
    """A background request the queue still has to do something with."""

    queued: Loc
    draft: Loc | None = None
    outcome: Loc | None = None
    delivered: bool = False


@attrs.define(eq=False)
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
    log: list[Any] = attrs.field(factory=list)

    # ---- folding -------------------------------------------------------------------------

    def step(self, entry: Entry, loc: Loc) -> None:
        if entry.type not in _READ:
            return
        match je.parse(entry):
            case je.ToolCall(tool_call_id=str(call_id), name="ask_user"):
                self.calls.append((call_id, loc))
            case je.ToolResult() as result:
                if result.tool_call_id is not None:
                    self._resolve(result.tool_call_id)
                for request_id in result.delivered_ids():
                    self._deliver(request_id)
            case je.Payload(source_entry_id=str(call_id), version=1):
                if call_id in self.payloads or any(c == call_id for c, _ in self.calls):
                    self.payloads.setdefault(call_id, []).append(loc)
            case je.HistoryRequest() as request:
                self._history_request(request, loc)
            case je.HistoryCompleted(request_id=str(request_id)) as completed:
                if completed.has_outcome:
                    self.log.append(["c", request_id, loc[0], loc[1]])
                if any(rid == request_id for rid, _ in self.call_requests.values()):
                    self.completions[request_id] = loc
            case je.Queued(request_id=request_id, tool_call_id=call_id):
                if call_id is not None:
                    self._resolve(call_id)
                if request_id is not None and request_id not in self.requests:
                    self.requests[request_id] = PendingRequest(loc)
            case je.QueueCompleted(request_id=str(request_id)) as completed:
                pending = self.requests.get(request_id)
                if pending is not None and completed.has_outcome:
                    pending.outcome = loc
                    self._settle(request_id)
            case je.BackgroundAnswer(request_id=str(request_id)):
                self._deliver(request_id)
            case je.Draft(request_id=str(request_id), form=form) if form is not None:
                pending = self.requests.get(request_id)
                if pending is not None:
                    pending.draft = loc
            case je.Panel(visible=visible):
                self.panel_visible = visible
            case je.PendingDismissed(tool_call_id=str(call_id)):
                self._resolve(call_id, dismissed=True)
            case je.ResumeAnswer(request_id=str(request_id)):
                for call_id in [c for c in self.dismissed if self._request_of(c) == request_id]:
                    del self.dismissed[call_id]
                    self._forget_request(call_id)
            case _:
                pass

    def _history_request(self, request: je.HistoryRequest, loc: Loc) -> None:
        request_id = request.request_id
        if request_id is None:
            return
        questions = stored_questions(request_id, request.questions)
        if questions is not None:
            self.log.append(["q", request_id, loc[0], loc[1], len(questions)])
        call_id = request.tool_call_id
        if call_id is not None and (
            call_id in self.dismissed or any(c == call_id for c, _ in self.calls)
        ):
            self._forget_request(call_id)
            self.call_requests[call_id] = (request_id, loc)

    def _resolve(self, call_id: str, *, dismissed: bool = False) -> None:
        if any(c == call_id for c, _ in self.calls):
            self.calls = [(c, loc) for c, loc in self.calls if c != call_id]
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
        if found is not None and found[0] not in {r for r, _ in self.call_requests.values()}:
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
        }


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


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("malformed id")
    return value


@attrs.frozen
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
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"checkpoint state does not fit the journal: {exc}") from exc
        return fold


JOURNAL: Final = JournalProjection()
