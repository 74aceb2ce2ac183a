"""Remote answers: ``pi-agent-ask:submit`` events routed to the visible form they name.

Each submission is handled in a task of its own (the event bus calls ``on_submit``
synchronously): its envelope and content are checked at the boundary (``form/untrusted.py``),
the queue names the flow's command channel, the form applies the response and replies, and a
``pi-agent-ask:submit-result`` says how it went. The queue never sends into a form's inbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.core import RuntimeCore, hand_over
from pi_agent_ask.actors.form import FLOW_NOT_ACTIVE, RemoteResponse
from pi_agent_ask.form import untrusted


def on_submit(rt: RuntimeCore, payload: Any) -> None:
    """The ``pi-agent-ask:submit`` handler: route the submission in a task of its own."""
    rt._nursery.start_soon(handle_submit, rt, payload)


async def handle_submit(rt: RuntimeCore, payload: Any) -> None:
    problem = _submit_envelope_problem(payload)
    request_id = payload.get("requestId") if isinstance(payload, Mapping) else None
    flow_id = payload.get("flowId") if isinstance(payload, Mapping) else None
    if problem is None:
        problem = _submit_content_problem(payload)
    if problem is not None:
        _submit_result(rt, request_id, flow_id, problem)
        return
    assert isinstance(flow_id, str)  # the envelope check requires a flowId string
    target = await rt._find_flow(flow_id)
    if target is None:
        _submit_result(rt, request_id, flow_id, ("flow_not_found", "Ask flow is not active."))
        return
    replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
    try:
        with target:
            await hand_over(target, RemoteResponse(dict(payload["response"]), replies))
        with reply:
            answer = await reply.receive()
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
        answer = FLOW_NOT_ACTIVE
    _submit_result(rt, request_id, flow_id, answer)


def _submit_result(
    rt: RuntimeCore, request_id: Any, flow_id: Any, problem: tuple[str, str] | None
) -> None:
    payload: dict[str, Any] = {"version": 1, "requestId": request_id, "flowId": flow_id}
    if problem is None:
        payload["ok"] = True
    else:
        payload.update(ok=False, error=problem[0], message=problem[1])
    rt.events.emit(ev.SUBMIT_RESULT, payload)


def _submit_envelope_problem(payload: Any) -> tuple[str, str] | None:
    if not isinstance(payload, Mapping):
        return ("invalid_request", "Submit event must be an object.")
    if payload.get("version") != 1:
        return ("invalid_request", "Submit event version must be 1.")
    if not isinstance(payload.get("requestId"), str) or not payload["requestId"].strip():
        return ("invalid_request", "Submit event requestId is required.")
    if not isinstance(payload.get("flowId"), str) or not payload["flowId"].strip():
        return ("invalid_request", "Submit event flowId is required.")
    response = payload.get("response")
    if not isinstance(response, Mapping):
        return ("invalid_request", "Submit response must be an object.")
    if response.get("kind") not in ("answer", "cancel"):
        return ("invalid_request", 'Submit response kind must be "answer" or "cancel".')
    return None


def _submit_content_problem(payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """The boundary check of a submission (``form/untrusted.py``): ids that are not valid text
    are an ``invalid_request``; a response that is not a bounded JSON value of valid text is an
    ``invalid_answer`` (the flow stays open)."""
    ids = untrusted.check({"requestId": payload["requestId"], "flowId": payload["flowId"]})
    if ids is not None:
        return ("invalid_request", f"Submit event {ids.describe()}.")
    refusal = untrusted.check(payload["response"])
    if refusal is not None:
        return ("invalid_answer", f"Submit {refusal.within('response').describe()}.")
    return None
