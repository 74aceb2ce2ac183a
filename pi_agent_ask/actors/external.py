"""The external UI bridge: a foreground ``ask_user`` outside TUI mode, answered by a provider.

Negotiation (000 §Non-TUI, catalog §7.4): once per foreground non-TUI call the runtime emits
``pi-agent-ask:external-ui`` with ``{version: 1, mode, toolCallId, connect(provider)}``.
``connect`` accepts the first provider with ``version == 1``, a non-blank ``id`` and an
``open`` coroutine function, and refuses every later call (including calls after the emit
returned). Without a provider the caller falls back to the non-TUI result.

With a provider, the call holds the input surface like any form. It ends at the first of:

- the provider's ``open(request)`` returning a response (validated like a remote submission;
  a malformed one is a tool error ``External ask UI returned an invalid response: …``);
- ``open`` raising (disconnection, rejection): a tool error with its message;
- a valid ``pi-agent-ask:submit`` for the flow (an invalid one leaves the flow open);
- the call being cancelled (operation abort): ``open`` is cancelled, late responses are ignored,
  and ``pi-agent-ask:completed`` carries the cancelled result.

Every terminal path cancels ``open`` (the provider's abort signal) and removes the flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import outcomes
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.core import BranchWriter, RuntimeCore
from pi_agent_ask.actors.errors import ToolFailed, ToolInterrupted
from pi_agent_ask.actors.form import FormInput, RemoteResponse, close_inbox, remote_apply
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form import untrusted
from pi_agent_ask.persistence import journal as jr

INVALID_RESPONSE = "External ask UI returned an invalid response: "


def _acceptable(provider: Any) -> bool:
    provider_id = getattr(provider, "id", None)
    return (
        getattr(provider, "version", None) == 1
        and isinstance(provider_id, str)
        and bool(provider_id.strip())
        and callable(getattr(provider, "open", None))
    )


def _response_problem(response: Any) -> str | None:
    if not isinstance(response, Mapping):
        return "Submit response must be an object."
    refusal = untrusted.check(response)
    if refusal is not None:  # the boundary: see form/untrusted.py
        return f"response {refusal.describe()}." if refusal.path else f"response {refusal.message}."
    if response.get("kind") not in ("answer", "cancel"):
        return 'Submit response kind must be "answer" or "cancel".'
    return None


async def negotiate_and_run(
    runtime: RuntimeCore, writer: BranchWriter, request: AskRequest
) -> dict[str, Any] | None:
    """Offer the call to an external UI; ``None`` when no provider connected."""
    chosen: list[Any] = []
    open_for_offers = True

    def connect(provider: Any) -> bool:
        if not open_for_offers or chosen or not _acceptable(provider):
            return False
        chosen.append(provider)
        return True

    runtime.events.emit(
        ev.EXTERNAL_UI,
        {
            "version": 1,
            "mode": runtime.mode,
            "toolCallId": request.tool_call_id,
            "connect": connect,
        },
    )
    open_for_offers = False
    if not chosen:
        return None
    provider = chosen[0]

    form = fs.new_form(request.params, runtime.config.form_settings)
    ask = {
        "version": 1,
        "flowId": request.flow_id,
        "toolCallId": request.tool_call_id,
        "questions": [
            question.to_json() | {"type": question.effective_type}
            for question in request.params.questions
        ],
    }
    if request.params.title is not None:
        ask["title"] = request.params.title

    final: fs.FormState | None = None
    failure: str | None = None
    claim_id = next(runtime._ids)
    scope = trio.CancelScope()
    commands, inbox = trio.open_memory_channel[FormInput](64)  # 64: synchronous senders
    grants, granted = trio.open_memory_channel[q.Grant](1)
    try:
        await runtime._queue_tx.send(
            q.AcquireSurface(claim_id, request.flow_id, commands, scope, grants)
        )
        await granted.receive()
        runtime.events.emit(ev.STARTED, _started(request, ask))
        with scope:
            async with trio.open_nursery() as nursery:

                async def from_provider() -> None:
                    nonlocal final, failure
                    try:
                        response = await provider.open(dict(ask))
                    except Exception as error:  # the provider failed: a tool error, not an answer
                        failure = str(error) or type(error).__name__
                    else:
                        problem = _response_problem(response)
                        if problem is None:
                            state, answer_problem = remote_apply(form, dict(response))
                            if answer_problem is None:
                                final = state
                            else:
                                failure = INVALID_RESPONSE + answer_problem[1]
                        else:
                            failure = INVALID_RESPONSE + problem
                    nursery.cancel_scope.cancel()

                async def from_submit() -> None:
                    nonlocal final
                    state = form
                    async for message in inbox:
                        if not isinstance(message, RemoteResponse):
                            continue  # an external flow has no terminal surface
                        state, problem = remote_apply(state, message.response)
                        with message.reply:
                            message.reply.send_nowait(problem)
                        if state.outcome is not None:
                            final = state
                            nursery.cancel_scope.cancel()
                            return

                nursery.start_soon(from_provider)
                nursery.start_soon(from_submit)
    finally:
        close_inbox(inbox)
        await runtime.tell_queue(q.ReleaseSurface(claim_id))
        if final is None and failure is None:
            # Aborted (the call was cancelled, the session changed): the provider's ``open``
            # was cancelled with the nursery; the request ends as cancelled, on its branch.
            with trio.CancelScope(shield=True):
                cancelled = await outcomes.record_interrupted(writer, request, form)
            # A bridge learns the flow ended (and how), as for every other ending.
            outcomes.announce_completed(runtime, request, cancelled)
    if failure is not None:
        await writer.append_many(
            jr.completion_entries(Outcome(request.request_id, error=failure), background=False)
        )
        raise ToolFailed(failure)
    if final is None:
        raise ToolInterrupted(outcomes.FORM_INTERRUPTED_TEXT)
    result = outcomes.result_of(request, final)
    await outcomes.record_outcome(
        runtime, writer, request, Outcome(request.request_id, result=result)
    )
    if result.cancelled:
        runtime._aborts_tx.send_nowait(request.request_id)
    return texts.tool_result(result, params=request.params)


def _started(request: AskRequest, ask: Mapping[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "version": 1,
        "flowId": request.flow_id,
        "askRequestId": request.request_id,
        "source": request.source,
        "questions": ask["questions"],
        "createdAt": request.created_at,
    }
    if request.tool_call_id is not None:
        payload["toolCallId"] = request.tool_call_id
    if request.params.title is not None:
        payload["title"] = request.params.title
    return payload
