"""Remote answers: ``pi-agent-ask:submit`` events routed to the visible form they name.

The event bus calls ``on_submit`` synchronously, and once the runtime is open it routes the
submission there and then: the envelope and content are checked at the boundary
(``form/untrusted.py``), the queue's committed state names the flow's command channel
(``QueueActor.flow_commands``: ``FindFlow`` without its round trip), and the response goes
into the form's inbox with a ``SubmitReply``; the form applies it and answers, and that answer
is the ``pi-agent-ask:submit-result``. No task, no pass through the queue. Only when the inbox
is full (a form behind on 64 inputs) does a task of its own wait to hand it over. Before the
runtime is open (nothing may be emitted yet), and for a submission made inside another one's
routing (a ``submit-result`` listener that submits again), a submission takes the old way: a
task of its own asks the queue (``FindFlow``) and waits for the form's reply. The queue never
sends into a form's inbox.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.core import RuntimeCore
from pi_agent_ask.actors.form import FLOW_NOT_ACTIVE, FormInput, RemoteResponse
from pi_agent_ask.actors.queue_state import CommandSink
from pi_agent_ask.form import untrusted


@attrs.define(eq=False, repr=False)
class SubmitReply:
    """The reply of one routed submission: the form's answer (``None``, or ``(error,
    message)``) becomes its ``submit-result`` event, emitted once; closed unanswered (the form
    ended first), ``flow_not_found``. Duck-types the one-shot reply channel a form answers."""

    rt: RuntimeCore
    request_id: str
    flow_id: str
    answered: bool = False

    def send_nowait(self, value: tuple[str, str] | None, /) -> None:
        if self.answered:
            raise trio.BrokenResourceError("this submission was answered already")
        self.answered = True
        _submit_result(self.rt, self.request_id, self.flow_id, value)

    def close(self) -> None:
        if not self.answered:
            self.send_nowait(FLOW_NOT_ACTIVE)

    def __enter__(self) -> SubmitReply:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def on_submit(rt: RuntimeCore, payload: Any) -> None:
    """The ``pi-agent-ask:submit`` handler: route the submission now (see the module). A
    submission made while another is routed here (a ``submit-result`` listener that submits
    again) goes to a task of its own: the handler never nests, however often a client retries."""
    flow_commands = rt._flow_commands
    if flow_commands is None or not rt._opened.is_set() or rt._routing_submit:
        rt._nursery.start_soon(handle_submit, rt, payload)
        return
    rt._routing_submit = True
    try:
        _route_submit(rt, flow_commands, payload)
    finally:
        rt._routing_submit = False


def _route_submit(
    rt: RuntimeCore, flow_commands: Callable[[str], CommandSink | None], payload: Any
) -> None:
    ids = _accepted(rt, payload)
    if ids is None:
        return
    request_id, flow_id = ids
    target = flow_commands(flow_id)
    if target is None:
        _submit_result(rt, request_id, flow_id, FLOW_NOT_ACTIVE)
        return
    # The queue holds the sinks this runtime enqueued: form command channels.
    assert isinstance(target, trio.MemorySendChannel)
    reply = SubmitReply(rt, request_id, flow_id)
    message = RemoteResponse(dict(payload["response"]), reply)
    try:
        target.send_nowait(message)
    except trio.WouldBlock:
        rt._nursery.start_soon(_hand_over_later, target.clone(), message)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        reply.close()  # the form ended (its inbox is closed): the flow is not active


async def _hand_over_later(
    target: trio.MemorySendChannel[FormInput], message: RemoteResponse
) -> None:
    """A submission for a form whose inbox is full: wait for room, as the form's own keys do."""
    try:
        with target:
            await target.send(message)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        message.reply.close()


def _accepted(rt: RuntimeCore, payload: Any) -> tuple[str, str] | None:
    """The submission's ``(requestId, flowId)`` when its envelope and content pass the
    boundary checks; otherwise its refusal is told (``submit-result``) and ``None``."""
    problem = _submit_envelope_problem(payload)
    if problem is None:
        problem = _submit_content_problem(payload)
        if problem is None:
            return payload["requestId"], payload["flowId"]
    request_id = payload.get("requestId") if isinstance(payload, Mapping) else None
    flow_id = payload.get("flowId") if isinstance(payload, Mapping) else None
    _submit_result(rt, request_id, flow_id, problem)
    return None


async def handle_submit(rt: RuntimeCore, payload: Any) -> None:
    """A submission made before the runtime opened (or inside another one's routing), in a
    task of its own: the queue names the flow (``FindFlow``) and the form's reply is awaited."""
    ids = _accepted(rt, payload)
    if ids is None:
        return
    request_id, flow_id = ids
    target = await rt._find_flow(flow_id)
    if target is None:
        _submit_result(rt, request_id, flow_id, FLOW_NOT_ACTIVE)
        return
    replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
    try:
        with target:
            await target.send(RemoteResponse(dict(payload["response"]), replies))
        with reply:
            answer = await reply.receive()
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
        answer = FLOW_NOT_ACTIVE
    _submit_result(rt, request_id, flow_id, answer)


def _submit_result(
    rt: RuntimeCore, request_id: Any, flow_id: Any, problem: tuple[str, str] | None
) -> None:
    if not rt.events.has_subscribers(ev.SUBMIT_RESULT):
        return  # nobody hears it: the payload is not made
    payload: dict[str, Any] = {"version": 1, "requestId": request_id, "flowId": flow_id}
    if problem is None:
        payload["ok"] = True
    else:
        payload.update(ok=False, error=problem[0], message=problem[1])
    rt.events.emit(ev.SUBMIT_RESULT, payload)


def _submit_envelope_problem(payload: Any) -> tuple[str, str] | None:
    # ``type(...) is dict`` first: a dict (what a client sends) skips the ABC check.
    if type(payload) is not dict and not isinstance(payload, Mapping):
        return ("invalid_request", "Submit event must be an object.")
    if payload.get("version") != 1:
        return ("invalid_request", "Submit event version must be 1.")
    if not isinstance(payload.get("requestId"), str) or not payload["requestId"].strip():
        return ("invalid_request", "Submit event requestId is required.")
    if not isinstance(payload.get("flowId"), str) or not payload["flowId"].strip():
        return ("invalid_request", "Submit event flowId is required.")
    response = payload.get("response")
    if type(response) is not dict and not isinstance(response, Mapping):
        return ("invalid_request", "Submit response must be an object.")
    if response.get("kind") not in ("answer", "cancel"):
        return ("invalid_request", 'Submit response kind must be "answer" or "cancel".')
    return None


def _submit_content_problem(payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """The boundary check of a submission (``form/untrusted.py``): ids that are not valid text
    are an ``invalid_request``; a response that is not a bounded JSON value of valid text is an
    ``invalid_answer`` (the flow stays open)."""
    if not untrusted.passes_flat((payload["requestId"], payload["flowId"]), _ID_KEYS_CHARS):
        ids = untrusted.check({"requestId": payload["requestId"], "flowId": payload["flowId"]})
        if ids is not None:
            return ("invalid_request", f"Submit event {ids.describe()}.")
    refusal = untrusted.check(payload["response"])
    if refusal is not None:
        return ("invalid_answer", f"Submit {refusal.within('response').describe()}.")
    return None


_ID_KEYS_CHARS = len("requestId") + len("flowId")
