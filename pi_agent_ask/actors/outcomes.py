"""How a form's ending is recorded and announced: the one way every ``ask_user`` path (a
foreground form, a background form, an external UI, a reopened form) journals its outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.core import TEARDOWN_TIMEOUT, BranchWriter, RuntimeCore
from pi_agent_ask.actors.persistence import PersistenceClosedError
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult, build_result
from pi_agent_ask.persistence import journal as jr

FORM_INTERRUPTED_TEXT = "Question form interrupted"
"""A foreground form that ended without an outcome (``ToolInterrupted``)."""


def result_of(request: AskRequest, final: fs.FormState) -> AskResult:
    """The result of a form that has an outcome."""
    assert final.outcome is not None
    return build_result(
        request.params,
        final.drafts,
        presented_types=final.types,
        cancelled=final.outcome.cancelled,
        request_id=request.request_id,
    )


async def record_interrupted(
    writer: BranchWriter, request: AskRequest, form: fs.FormState
) -> AskResult:
    """A foreground call that was aborted ends as cancelled, on its own branch only;
    returns that cancelled result."""
    result = build_result(
        request.params,
        form.drafts,
        presented_types=form.types,
        cancelled=True,
        request_id=request.request_id,
    )
    with trio.move_on_after(TEARDOWN_TIMEOUT), suppress(StaleBranch, PersistenceClosedError):
        await writer.append_many(
            jr.completion_entries(Outcome(request.request_id, result=result), background=False)
        )
    return result


async def record_outcome(
    rt: RuntimeCore,
    writer: BranchWriter,
    request: AskRequest,
    outcome: Outcome,
    extra: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> None:
    """Journal an outcome (and ``extra`` entries in the same frame), then announce it.

    Shielded: an outcome is never half-written.
    """
    with trio.CancelScope(shield=True):
        await write_outcome(rt, writer, request, outcome, extra)


async def write_outcome(
    rt: RuntimeCore,
    writer: BranchWriter,
    request: AskRequest,
    outcome: Outcome,
    extra: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> None:
    """``record_outcome`` for a caller that is shielded already (the queue's form runner)."""
    # One ``to_details`` for the entries and the event: the entries are encoded when written
    # and nothing keeps their data, so the event's listeners get a dict nobody else reads.
    details = outcome.result.to_details() if outcome.result is not None else None
    completion = jr.completion_entries(outcome, background=request.background, details=details)
    entries = [*completion, *extra] if extra else completion
    await writer.append_many(entries)
    if outcome.result is not None:
        announce_completed(rt, request, outcome.result, details=details)


def announce_completed(
    rt: RuntimeCore,
    request: AskRequest,
    result: AskResult,
    *,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Emit ``pi-agent-ask:completed`` for a flow that ended with ``result`` (``details``: its
    ``to_details()``, when made already)."""
    payload: dict[str, Any] = {
        "version": 1,
        "flowId": request.flow_id,
        "askRequestId": request.request_id,
        "source": request.source,
        "result": result.to_details() if details is None else details,
        "completedAt": rt._timestamps.now(),
    }
    if request.tool_call_id is not None:
        payload["toolCallId"] = request.tool_call_id
    rt.events.emit(ev.COMPLETED, payload)
