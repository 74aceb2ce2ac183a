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

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from pi_agent_ask.form.types import AskParams, QuestionType
from pi_agent_ask.persistence.records import AskRequest, Outcome

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


def thaw(value: Any) -> Any:
    """Entry data as plain JSON values: mappings become dicts, arrays become lists.

    The session file hands data back deep-frozen (tuples, read-only mappings); validators and
    result readers expect JSON's lists and dicts.
    """
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(item) for item in value]
    return value


def presented_types(params: AskParams) -> list[QuestionType]:
    return [question.effective_type for question in params.questions]


def payload_entry(params: AskParams, tool_call_id: str | None, timestamp: str) -> dict[str, Any]:
    return {
        "version": 1,
        "source": "tool",
        "params": params.to_json(),
        "sourceEntryId": tool_call_id,
        "timestamp": timestamp,
    }


def history_request_entry(request: AskRequest) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "requestId": request.request_id,
        "background": request.background,
        "createdAt": request.created_at,
        "questions": [_question_record(q) for q in request.params.questions],
        "params": request.params.to_json(),
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


def _question_record(question: Any) -> dict[str, Any]:
    record = question.to_json()
    if question.presented_type is not None and question.presented_type != question.type:
        record["presentedType"] = question.presented_type
    return record


def queued_entry(request: AskRequest) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "requestId": request.request_id,
        "params": request.params.to_json(),
        "presentSingleAsMulti": any(
            q.presented_type == "multi" and q.type == "single" for q in request.params.questions
        ),
        "presentedTypes": presented_types(request.params),
        "createdAt": request.created_at,
    }
    if request.tool_call_id is not None:
        data["toolCallId"] = request.tool_call_id
    if request.parent_tool_call_id is not None:
        data["parentToolCallId"] = request.parent_tool_call_id
    return data


def completion_entries(outcome: Outcome, *, background: bool) -> list[tuple[str, dict[str, Any]]]:
    """The entries that record an outcome: history always, the queue's for background forms."""
    body: dict[str, Any] = {"requestId": outcome.request_id}
    if outcome.result is not None:
        body["result"] = outcome.result.to_details()
    if outcome.error is not None:
        body["error"] = outcome.error
    entries = [(HISTORY_COMPLETED, {"version": 1, **body})]
    if background:
        entries.append((QUEUE_COMPLETED, dict(body)))
    return entries


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


_QUEUE_TYPES = frozenset(
    {
        QUEUED,
        QUEUE_COMPLETED,
        BACKGROUND_ANSWER,
        TOOL_RESULT,
        DRAFT,
        PANEL,
        HISTORY_REQUEST,
        HISTORY_COMPLETED,
        PENDING_DISMISSED,
        "ask:resume-answer",
    }
)


@attrs.frozen
class RebuiltRequest:
    request: AskRequest
    draft: Mapping[str, Any] | None
    outcome: Outcome | None
    delivered: bool


@attrs.frozen
class RecoveredAnswer:
    """A reopened interrupted form that was answered, its answer not yet delivered."""

    tool_call_id: str
    request_id: str
    params: AskParams
    outcome: Outcome


@attrs.frozen
class RebuiltQueue:
    """What a branch says about the background queue (catalog §3.5)."""

    requests: tuple[RebuiltRequest, ...]
    panel_visible: bool
    recovered_answers: tuple[RecoveredAnswer, ...] = ()


def rebuild_queue(branch: Sequence[Any]) -> RebuiltQueue:
    """Read queue state from the entries of one branch, root first.

    - requests: ``ask:queued`` entries whose params re-validate; the first per request id wins;
    - a completion attaches only when it comes after its request; a later one overwrites;
    - delivered: request ids named by ``ask:background-answer`` entries, or by the results of a
      successful ``wait_for_answers`` tool result;
    - drafts: the newest ``ask:draft`` per request; the panel: the newest ``ask:panel``.
    """
    from pi_agent_ask.form.validate import params_from_saved

    requests: dict[str, AskRequest] = {}
    outcomes: dict[str, Outcome] = {}
    delivered: set[str] = set()
    drafts: dict[str, Mapping[str, Any]] = {}
    panel_visible = True
    call_requests: dict[str, Mapping[str, Any]] = {}
    history_outcomes: dict[str, Mapping[str, Any]] = {}
    dismissed: list[str] = []
    resumed_delivered: set[str] = set()
    for entry in branch:
        if entry.type not in _QUEUE_TYPES:
            continue
        data = thaw(entry.data)
        match entry.type:
            case "ask:queued":
                request_id = data.get("requestId")
                if not isinstance(request_id, str) or request_id in requests:
                    continue
                params = params_from_saved(data.get("params"))
                if params is None:
                    continue
                params = apply_presented_types(params, data.get("presentedTypes"))
                tool_call_id = data.get("toolCallId")
                parent = data.get("parentToolCallId")
                requests[request_id] = AskRequest(
                    request_id=request_id,
                    params=attrs.evolve(params, background=True),
                    background=True,
                    created_at=str(data.get("createdAt", entry.timestamp)),
                    tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
                    parent_tool_call_id=parent if isinstance(parent, str) else None,
                    source="background",
                )
            case "ask:queue-completed":
                request_id = data.get("requestId")
                request = requests.get(request_id) if isinstance(request_id, str) else None
                if request is None:
                    continue
                outcome = outcome_from_entry(data, request.parent_tool_call_id)
                if outcome is not None:
                    outcomes[request.request_id] = outcome
            case "ask:background-answer":
                details = data.get("details")
                if isinstance(details, Mapping) and isinstance(details.get("requestId"), str):
                    delivered.add(details["requestId"])
            case "tool-result":
                result = data.get("result")
                if data.get("name") == "wait_for_answers" and isinstance(result, Mapping):
                    if result.get("isError"):
                        continue
                    details = result.get("details")
                    if isinstance(details, Mapping):
                        for item in details.get("results", ()) or ():
                            if isinstance(item, Mapping) and isinstance(item.get("requestId"), str):
                                delivered.add(item["requestId"])
            case "ask:draft":
                request_id = data.get("requestId")
                if isinstance(request_id, str) and isinstance(data.get("form"), Mapping):
                    drafts[request_id] = data["form"]
            case "ask:panel":
                panel_visible = bool(data.get("visible", True))
            case "ask:history-request":
                call_id = data.get("toolCallId")
                if isinstance(call_id, str) and isinstance(data.get("requestId"), str):
                    # The newest request of a call is the one a reopened form completes.
                    call_requests[call_id] = data
            case "ask:history-completed":
                if isinstance(data.get("requestId"), str):
                    history_outcomes[data["requestId"]] = data
            case "ask:pending-dismissed":
                if isinstance(data.get("toolCallId"), str):
                    dismissed.append(data["toolCallId"])
            case "ask:resume-answer":
                details = data.get("details")
                if isinstance(details, Mapping) and isinstance(details.get("requestId"), str):
                    resumed_delivered.add(details["requestId"])
            case _:
                pass
    return RebuiltQueue(
        requests=tuple(
            RebuiltRequest(
                request=request,
                draft=drafts.get(request_id),
                outcome=outcomes.get(request_id),
                delivered=request_id in delivered,
            )
            for request_id, request in requests.items()
        ),
        panel_visible=panel_visible,
        recovered_answers=_recovered_answers(
            dismissed, call_requests, history_outcomes, resumed_delivered
        ),
    )


def _recovered_answers(
    dismissed: Sequence[str],
    call_requests: Mapping[str, Mapping[str, Any]],
    outcomes: Mapping[str, Mapping[str, Any]],
    delivered: set[str],
) -> tuple[RecoveredAnswer, ...]:
    """Reopened forms answered (``ask:pending-dismissed`` with a submitted completion) whose
    ``ask:resume-answer`` message is not on the branch: recorded, never delivered."""
    from pi_agent_ask.form.validate import params_from_saved

    found = []
    for call_id in dict.fromkeys(dismissed):
        request = call_requests.get(call_id)
        if request is None:
            continue
        request_id = request["requestId"]
        completion = outcomes.get(request_id)
        if request_id in delivered or completion is None:
            continue
        outcome = outcome_from_entry(completion, None)
        if outcome is None or outcome.result is None or outcome.result.cancelled:
            continue
        params = params_from_saved(request.get("params"))
        if params is None:
            continue
        found.append(RecoveredAnswer(call_id, request_id, params, outcome))
    return tuple(found)


# --------------------------------------------------------------------------------------------
# Interrupted foreground calls
# --------------------------------------------------------------------------------------------

RESUME_ANSWER = "ask:resume-answer"


@attrs.frozen
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
    """The newest unresolved foreground ``ask_user`` call on ``branch``, or ``None``.

    Unresolved: a ``tool-call`` entry without a ``tool-result`` for its id, without an
    ``ask:pending-dismissed`` entry, and not a queued background call. Its form comes from the
    newest valid ``ask:payload`` for the call; failing that, ``revalidate(arguments)`` (the
    original arguments, validated again; returns ``AskParams`` or ``None``); failing both, an
    older call is tried.
    """
    from pi_agent_ask.form.validate import params_from_saved

    calls: list[tuple[str, Mapping[str, Any]]] = []
    resolved: set[str] = set()
    payloads: dict[str, list[Any]] = {}
    requests: dict[str, Mapping[str, Any]] = {}
    completed: dict[str, Mapping[str, Any]] = {}
    for entry in branch:
        data = entry.data
        match entry.type:
            case "tool-call":
                call_id = data.get("toolCallId")
                if data.get("name") == "ask_user" and isinstance(call_id, str):
                    calls.append((call_id, data))
            case "tool-result" | "ask:pending-dismissed":
                if isinstance(data.get("toolCallId"), str):
                    resolved.add(data["toolCallId"])
            case "ask:queued":
                if isinstance(data.get("toolCallId"), str):
                    resolved.add(data["toolCallId"])
            case "ask:payload":
                source = data.get("sourceEntryId")
                if isinstance(source, str) and data.get("version") == 1:
                    payloads.setdefault(source, []).append(data.get("params"))
            case "ask:history-request":
                call_id = data.get("toolCallId")
                if isinstance(call_id, str):
                    requests[call_id] = data
            case "ask:history-completed":
                if isinstance(data.get("requestId"), str):
                    completed[data["requestId"]] = data
            case _:
                pass
    for call_id, call in reversed(calls):
        if call_id in resolved:
            continue
        params = None
        for saved in reversed(payloads.get(call_id, [])):
            params = params_from_saved(thaw(saved), present_single_as_multi=present_single_as_multi)
            if params is not None:
                break
        if params is None:
            params = revalidate(thaw(call.get("arguments")))
        if params is None:
            continue
        request = requests.get(call_id)
        request_id = request.get("requestId") if request is not None else None
        recorded = None
        if isinstance(request_id, str) and request_id in completed:
            recorded = outcome_from_entry(completed[request_id], None)
            if recorded is None or recorded.result is None:
                # Completed without an answer (a UI failure): the form is asked again, under a
                # new journal key.
                request_id, recorded = None, None
        if not isinstance(request_id, str):
            request_id = None
        parent = call.get("parentToolCallId")
        created = request.get("createdAt") if request is not None else None
        return InterruptedCall(
            tool_call_id=call_id,
            params=attrs.evolve(params, background=False),
            request_id=request_id,
            parent_tool_call_id=parent if isinstance(parent, str) else None,
            created_at=created if isinstance(created, str) else None,
            recorded=recorded,
        )
    return None
