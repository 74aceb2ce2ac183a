"""The ask journal: which entries the runtime writes on the session branch, and their data.

Entry types (data shapes follow the catalog §3.6 where it names them):

==========================  =====================================================================
``tool-call``               ``{toolCallId, name, arguments, parentToolCallId?}`` (host record)
``tool-result``             ``{toolCallId, name, result}`` (host record; ``result`` as returned)
``user-message``            ``{text}`` (host record of ordinary input)
``ask:payload``             ``{version: 1, source: "tool", params, sourceEntryId, timestamp}``
``ask:history-request``     ``{version: 1, requestId, toolCallId?, parentToolCallId?, title?,
                            background, createdAt, questions, params, presentedTypes}``
``ask:history-completed``   ``{version: 1, requestId, result? | error?}``
``ask:queued``              ``{version: 1, requestId, toolCallId?, parentToolCallId?, params,
                            presentSingleAsMulti, presentedTypes, createdAt}``
``ask:queue-completed``     ``{requestId, result? | error?}``
``ask:pending-dismissed``   ``{toolCallId}``
``ask:background-answer``   the delivered custom message ``{customType, content, details}``
``ask:draft``               ``{requestId, form}``: a background form's draft (coalesced)
``ask:panel``               ``{visible}``: the panel was hidden or reopened
==========================  =====================================================================

Every writer goes through the persistence actor; these functions only build the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from pi_agent_ask.form.types import AskParams, QuestionType
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import Entry, Loc, SessionFile

TOOL_CALL = "tool-call"
TOOL_RESULT = "tool-result"
USER_MESSAGE = "user-message"
PAYLOAD = "ask:payload"
HISTORY_REQUEST = "ask:history-request"
HISTORY_COMPLETED = "ask:history-completed"
QUEUED = "ask:queued"
QUEUE_COMPLETED = "ask:queue-completed"
PENDING_DISMISSED = "ask:pending-dismissed"
BACKGROUND_ANSWER = "ask:background-answer"
DRAFT = "ask:draft"
PANEL = "ask:panel"
RETURNED = je.Returned.TYPE


def thaw(value: Any) -> Any:
    """Entry data as plain JSON values: mappings become dicts, arrays become lists.

    The session file hands data back deep-frozen (tuples, read-only mappings); validators and
    result readers expect JSON's lists and dicts. A spliced value (``codec.Spliced``) is the
    value it stands for.
    """
    if type(value) is codec.Spliced:
        return thaw(value.value)
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(item) for item in value]
    return value


def presented_types(params: AskParams) -> list[QuestionType]:
    return [question.effective_type for question in params.questions]


def tool_result_entry(tool_call_id: str | None, name: str, result: Any) -> dict[str, Any]:
    """The data of a ``tool-result`` entry: the result a tool call returned."""
    return {"toolCallId": tool_call_id, "name": name, "result": result}


# The request builders take the request's ``params.to_json()`` when the caller has it
# (``shared``): one call's three entries then hold one copy, which nothing changes.
# ``shared_params`` makes it encoded and frozen once for all three (``codec.Spliced``: the
# same bytes).


def shared_params(params: AskParams) -> codec.Spliced:
    """``params.to_json()``, encoded once, for the ``shared`` of the builders below. With
    several questions their list is encoded once too, for the history request holds it again
    (``_question_records``)."""
    made = params.to_json()
    if len(params.questions) >= SPLICED_QUESTIONS:
        made["questions"] = codec.Spliced(made["questions"])
    return codec.Spliced(made)


SPLICED_QUESTIONS: Final = 2
"""Fewest questions whose list ``shared_params`` encodes on its own."""


def payload_entry(
    params: AskParams,
    tool_call_id: str | None,
    timestamp: str,
    *,
    shared: Mapping[str, Any] | codec.Spliced | None = None,
) -> dict[str, Any]:
    return {
        "version": 1,
        "source": "tool",
        "params": params.to_json() if shared is None else shared,
        "sourceEntryId": tool_call_id,
        "timestamp": timestamp,
    }


def history_request_entry(
    request: AskRequest, *, shared: Mapping[str, Any] | codec.Spliced | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "requestId": request.request_id,
        "background": request.background,
        "createdAt": request.created_at,
        "questions": _question_records(request.params, shared),
        "params": request.params.to_json() if shared is None else shared,
        "presentedTypes": presented_types(request.params),
        "source": request.source,
    }
    if request.tool_call_id is not None:
        data["toolCallId"] = request.tool_call_id
    if request.parent_tool_call_id is not None:
        data["parentToolCallId"] = request.parent_tool_call_id
    if request.params.title is not None:
        data["title"] = request.params.title
    return data


def _question_records(
    params: AskParams, shared: Mapping[str, Any] | codec.Spliced | None
) -> list[Any] | codec.Spliced:
    """Each question's ``to_json()``, with its ``presentedType`` when that differs; taken from
    ``shared`` (the params' ``to_json()``, which holds the same maps) when the caller has it:
    its list itself when it is spliced there (``shared_params``) and no presentation
    differs (the journal's fold reads through it)."""
    if shared is None:
        return [_question_record(q, q.to_json()) for q in params.questions]
    made = shared.value if isinstance(shared, codec.Spliced) else shared
    questions = made["questions"]
    if isinstance(questions, codec.Spliced):
        for q in params.questions:
            if q.presented_type is not None and q.presented_type != q.type:
                break
        else:
            return questions
        questions = questions.value
    records = []
    for q, question in zip(params.questions, questions, strict=True):
        records.append(_question_record(q, question))
    return records


def _question_record(question: Any, made: dict[str, Any]) -> dict[str, Any]:
    if question.presented_type is not None and question.presented_type != question.type:
        return {**made, "presentedType": question.presented_type}
    return made


def queued_entry(
    request: AskRequest, *, shared: Mapping[str, Any] | codec.Spliced | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "requestId": request.request_id,
        "params": request.params.to_json() if shared is None else shared,
        "presentSingleAsMulti": _single_as_multi(request.params),
        "presentedTypes": presented_types(request.params),
        "createdAt": request.created_at,
    }
    if request.tool_call_id is not None:
        data["toolCallId"] = request.tool_call_id
    if request.parent_tool_call_id is not None:
        data["parentToolCallId"] = request.parent_tool_call_id
    return data


def _single_as_multi(params: AskParams) -> bool:
    """Whether a requested single-select question is presented as multi-select."""
    return any(q.presented_type == "multi" and q.type == "single" for q in params.questions)


def completion_entries(
    outcome: Outcome, *, background: bool, details: Mapping[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The entries that record an outcome: history always, the queue's for background forms.
    ``details``: the result's ``to_details()`` when the caller made it already.

    A background form's two entries hold one result, encoded once (``codec.Spliced``: the
    same bytes; the journal's fold reads through it)."""
    body: dict[str, Any] = {"requestId": outcome.request_id}
    if outcome.result is not None:
        result = outcome.result.to_details() if details is None else details
        body["result"] = codec.Spliced(result) if background else result
    if outcome.error is not None:
        body["error"] = outcome.error
    history: dict[str, Any] = {"version": 1, **body}
    if not background:
        return [(HISTORY_COMPLETED, history)]
    return [(HISTORY_COMPLETED, history), (QUEUE_COMPLETED, dict(body))]


def outcome_from_entry(data: Mapping[str, Any], parent_tool_call_id: str | None) -> Outcome | None:
    """Read a completion entry back; ``None`` when it carries neither a result nor an error."""
    if not isinstance(data.get("error"), str) and not isinstance(data.get("result"), Mapping):
        return None
    try:
        outcome = Outcome.from_json(data)
    except ValueError:
        return None
    return attrs.evolve(outcome, parent_tool_call_id=parent_tool_call_id)


def apply_presented_types(params: AskParams, types: Sequence[Any] | None) -> AskParams:
    """Re-apply saved presentation types to re-validated params (recovery never re-decides)."""
    if not types or len(types) != len(params.questions):
        return params
    questions = []
    for question, presented in zip(params.questions, types, strict=True):
        if presented in ("single", "multi") and presented != question.type:
            questions.append(attrs.evolve(question, presented_type=presented))
        else:
            questions.append(question)
    return attrs.evolve(params, questions=tuple(questions))


# --------------------------------------------------------------------------------------------
# Rebuilding the queue from a branch
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class RebuiltRequest:
    request: AskRequest
    draft: Mapping[str, Any] | None
    outcome: Outcome | None
    delivered: bool


@attrs.frozen(repr=False)
class RecoveredAnswer:
    """A reopened interrupted form that was answered, its answer not yet delivered."""

    tool_call_id: str
    request_id: str
    params: AskParams
    outcome: Outcome


@attrs.frozen(repr=False)
class RebuiltQueue:
    """What a branch says about the background queue (catalog §3.5)."""

    requests: tuple[RebuiltRequest, ...]
    panel_visible: bool
    recovered_answers: tuple[RecoveredAnswer, ...] = ()
    returned: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """Messages given back (``ask:returned``) and not delivered again since, oldest first:
    ``(mark entry type, message)``; they go out again before anything else."""


Load = Callable[[Loc], Entry]
"""Reads the entry at a location (``SessionFile.entry_at``, or a branch held in memory)."""


def fold_branch(branch: Sequence[Entry]) -> tuple[JournalFold, Load]:
    """The journal fold of a branch held in memory, and the loader for its locations."""
    fold = JOURNAL.empty()
    for n, entry in enumerate(branch):
        fold.step(entry, (n, -2))
    return fold, lambda loc: branch[loc[0]]


def rebuild_queue(branch: Sequence[Any]) -> RebuiltQueue:
    """Read queue state from the entries of one branch, root first (``rebuilt_queue``)."""
    return rebuilt_queue(*fold_branch(branch))


def rebuilt_queue(fold: JournalFold, load: Load) -> RebuiltQueue:
    """The queue a branch's fold describes.

    - requests: ``ask:queued`` entries whose params re-validate, unless settled (completed and
      delivered); the first per request id wins;
    - a completion attaches only when it comes after its request; a later one overwrites;
    - delivered: named by ``ask:background-answer`` entries, or by the results of a successful
      ``wait_for_answers`` tool result;
    - drafts: the newest ``ask:draft`` per request; the panel: the newest ``ask:panel``.
    """
    from pi_agent_ask.form.validate import params_from_saved

    rebuilt: list[RebuiltRequest] = []
    for request_id, pending in fold.requests.items():
        entry = load(pending.queued)
        queued = je.parse(entry)
        assert isinstance(queued, je.Queued)
        params = params_from_saved(thaw(queued.params))
        if params is None:
            continue
        params = apply_presented_types(params, thaw(queued.presented_types))
        request = AskRequest(
            request_id=request_id,
            params=attrs.evolve(params, background=True),
            background=True,
            created_at=str(queued.created_at if queued.created_at is not None else entry.timestamp),
            tool_call_id=queued.tool_call_id,
            parent_tool_call_id=queued.parent_tool_call_id,
            source="background",
        )
        draft = None
        if pending.draft is not None:
            record = je.parse(load(pending.draft))
            assert isinstance(record, je.Draft)
            draft = thaw(record.form)
        outcome = None
        if pending.outcome is not None:
            completed = je.parse(load(pending.outcome))
            outcome = outcome_from_entry(completed.to_data(), request.parent_tool_call_id)
        rebuilt.append(RebuiltRequest(request, draft, outcome, pending.delivered))
    return RebuiltQueue(
        requests=tuple(rebuilt),
        panel_visible=fold.panel_visible,
        recovered_answers=_recovered_answers(fold, load),
        returned=_returned(fold, load),
    )


def _returned(fold: JournalFold, load: Load) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    found = []
    for (kind, _request_id), (loc, index) in sorted(fold.returned.items(), key=lambda i: i[1]):
        record = je.parse(load(loc))
        assert isinstance(record, je.Returned)
        found.append((kind, thaw(record.messages[index])))
    return tuple(found)


def _history_request(fold: JournalFold, load: Load, call_id: str) -> je.HistoryRequest | None:
    found = fold.call_requests.get(call_id)
    if found is None:
        return None
    record = je.parse(load(found[1]))
    return record if isinstance(record, je.HistoryRequest) else None


def _completion(fold: JournalFold, load: Load, request_id: str) -> je.HistoryCompleted | None:
    loc = fold.completions.get(request_id)
    if loc is None:
        return None
    record = je.parse(load(loc))
    return record if isinstance(record, je.HistoryCompleted) else None


def _recovered_answers(fold: JournalFold, load: Load) -> tuple[RecoveredAnswer, ...]:
    """Reopened forms answered (``ask:pending-dismissed`` with a submitted completion) whose
    ``ask:resume-answer`` message is not on the branch: recorded, never delivered."""
    from pi_agent_ask.form.validate import params_from_saved

    found = []
    for call_id in fold.dismissed:
        request = _history_request(fold, load, call_id)
        if request is None or request.request_id is None:
            continue
        completion = _completion(fold, load, request.request_id)
        if completion is None:
            continue
        outcome = outcome_from_entry(completion.to_data(), None)
        if outcome is None or outcome.result is None or outcome.result.cancelled:
            continue
        params = params_from_saved(thaw(request.params))
        if params is None:
            continue
        found.append(RecoveredAnswer(call_id, request.request_id, params, outcome))
    return tuple(found)


# --------------------------------------------------------------------------------------------
# Interrupted foreground calls
# --------------------------------------------------------------------------------------------

RESUME_ANSWER = "ask:resume-answer"


@attrs.frozen(repr=False)
class InterruptedCall:
    """The newest ``ask_user`` call on a branch that never got a result (000 §Interrupted ask
    resume). ``params`` are ready to show; ``request_id`` is the journal key to complete, when
    the call got as far as recording one.

    ``recorded`` is the outcome already journaled for that key: the person answered (or
    dismissed) the form, and the interruption (a reload, a crash) came before the tool result
    was written. That answer is delivered as it is; the form is not asked again."""

    tool_call_id: str
    params: AskParams
    request_id: str | None
    parent_tool_call_id: str | None
    created_at: str | None
    recorded: Outcome | None = None


def find_interrupted_call(
    branch: Sequence[Any],
    *,
    revalidate: Any,
    present_single_as_multi: bool = False,
) -> InterruptedCall | None:
    """The newest unresolved foreground ``ask_user`` call on ``branch`` (``interrupted_call``)."""
    fold, load = fold_branch(branch)
    return interrupted_call(
        fold, load, revalidate=revalidate, present_single_as_multi=present_single_as_multi
    )


def interrupted_call(
    fold: JournalFold,
    load: Load,
    *,
    revalidate: Any,
    present_single_as_multi: bool = False,
) -> InterruptedCall | None:
    """The newest unresolved foreground ``ask_user`` call of a branch's fold, or ``None``.

    Unresolved: a ``tool-call`` entry without a ``tool-result`` for its id, without an
    ``ask:pending-dismissed`` entry, and not a queued background call. Its form comes from the
    newest valid ``ask:payload`` for the call; failing that, ``revalidate(arguments)`` (the
    original arguments, validated again; returns ``AskParams`` or ``None``); failing both, an
    older call is tried.
    """
    from pi_agent_ask.form.validate import params_from_saved

    for call_id, call_loc in reversed(fold.calls):
        call = je.parse(load(call_loc))
        assert isinstance(call, je.ToolCall)
        params = None
        for payload_loc in reversed(fold.payloads.get(call_id, [])):
            payload = je.parse(load(payload_loc))
            assert isinstance(payload, je.Payload)
            params = params_from_saved(
                thaw(payload.params), present_single_as_multi=present_single_as_multi
            )
            if params is not None:
                break
        if params is None:
            params = revalidate(thaw(call.arguments))
        if params is None:
            continue
        request = _history_request(fold, load, call_id)
        request_id = request.request_id if request is not None else None
        recorded = None
        completion = _completion(fold, load, request_id) if request_id is not None else None
        if completion is not None:
            recorded = outcome_from_entry(completion.to_data(), None)
            if recorded is None or recorded.result is None:
                # Completed without an answer (a UI failure): the form is asked again, under a
                # new journal key.
                request_id, recorded = None, None
        created = request.created_at if request is not None else None
        return InterruptedCall(
            tool_call_id=call_id,
            params=attrs.evolve(params, background=False),
            request_id=request_id,
            parent_tool_call_id=call.parent_tool_call_id,
            created_at=created if isinstance(created, str) else None,
            recorded=recorded,
        )
    return None


def recover(
    session: SessionFile,
    *,
    revalidate: Any,
    present_single_as_multi: bool = False,
    interrupted: bool = True,
) -> tuple[RebuiltQueue, InterruptedCall | None]:
    """What a runtime rebuilds from a session's active branch: the queue and (when
    ``interrupted``) the interrupted call. Reads the session's fold when it has the journal
    projection (bounded by what is pending), else the whole branch."""
    if session.projection == JOURNAL:
        fold: JournalFold = session.fold()  # type: ignore[assignment]
        load: Load = session.entry_at
    else:
        fold, load = fold_branch(session.branch())
    call = None
    if interrupted:
        call = interrupted_call(
            fold, load, revalidate=revalidate, present_single_as_multi=present_single_as_multi
        )
    return rebuilt_queue(fold, load), call
