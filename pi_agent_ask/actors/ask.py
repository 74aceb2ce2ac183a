"""``ask_user``: its three paths, and the forms they run.

- **foreground** (``tui``, not background): the form runs in the tool call's task once it holds
  the surface (FIFO with every other claimant); the call returns its answer;
- **background** (``tui``, ``background: true`` or background-only mode): the request is
  journaled and queued, the call returns a receipt; the queue shows the form later in its
  nursery (``run_background_form``) and delivers the answer at a boundary, a wake or a wait;
- **host form** (not ``tui``): an external UI, if one connects (``external.py``), answers a
  foreground call; otherwise (and for background calls) the non-TUI fallback result.

Every path journals the request before anything waits on it, and its outcome before it is
announced or returned (``outcomes.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.core import BranchWriter, PendingCall, RuntimeCore
from pi_agent_ask.actors.errors import ToolError, ToolFailed, ToolInterrupted
from pi_agent_ask.actors.form import (
    FormFailed,
    FormInput,
    OnChange,
    Saved,
    answer_saved,
    close_inbox,
    run_form,
)
from pi_agent_ask.actors.notifications import Notify, unheard
from pi_agent_ask.actors.outcomes import (
    FORM_INTERRUPTED_TEXT,
    record_interrupted,
    record_outcome,
    result_of,
    write_outcome,
)
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AskResult, fallback_result, invalid_result
from pi_agent_ask.form.schema_check import schema_error_text
from pi_agent_ask.form.types import Validation
from pi_agent_ask.form.validate import validate_bounded_params
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import journal as jr

ANSWER_NOT_SAVED_TEXT = (
    "The answer could not be saved to the session file ({error}); the question stays open "
    "with what you entered: submit it again."
)
"""The notice of a background answer whose write failed on the disk (``OSError``)."""


async def ask_user(
    rt: RuntimeCore,
    writer: BranchWriter,
    arguments: Any,
    tool_call_id: str | None,
    parent_tool_call_id: str | None,
    call: PendingCall | None = None,
    validation: Validation | None = None,
) -> dict[str, Any]:
    """One ``ask_user`` call, after ``call_tool`` checked its arguments at the boundary.

    ``call`` is the call's ``tool-call`` entry when it is not written yet: it goes first in
    the chain of the request's entries (one write instead of two). ``validation``: the
    arguments' validation when ``call_tool`` made it with the boundary check.
    """
    if call is None:
        call = PendingCall(("", {}), written=True)
    if validation is None:
        validation = validate_bounded_params(
            arguments,
            present_single_as_multi=rt.config.present_single_as_multi,
            background_only=rt.config.background_only,
        )
    if validation.schema_error:
        raise ToolError(schema_error_text("ask_user", validation.issues))
    if validation.params is None or validation.issues:
        raw_title = arguments.get("title") if isinstance(arguments, Mapping) else None
        return texts.tool_result(invalid_result(raw_title, validation.issues))
    params = validation.params
    background = params.background or rt.config.background_only
    request = AskRequest(
        request_id=new_request_id(),
        params=params,
        background=background,
        created_at=rt._timestamps.now(),
        tool_call_id=tool_call_id,
        parent_tool_call_id=parent_tool_call_id,
        source="background" if background and rt.mode == "tui" else "tool",
    )
    shared = jr.shared_params(params)  # one copy for the request's entries, encoded once
    entries: list[tuple[str, Mapping[str, Any]]] = [
        (jr.PAYLOAD, jr.payload_entry(params, tool_call_id, request.created_at, shared=shared)),
        (jr.HISTORY_REQUEST, jr.history_request_entry(request, shared=shared)),
    ]
    # Recording a request is shielded (``PendingCall.append_with``): once its entries may be
    # on the branch, the call goes on to record an outcome (or to enqueue it), whatever
    # cancels the caller.
    if rt.mode != "tui":
        return await _host_form(rt, writer, request, entries, call)
    if background:
        return await _background(rt, writer, request, entries, call, shared)
    await call.append_with(writer, entries)
    return await _foreground(rt, writer, request)


def new_request_id() -> str:
    """A random (version 4) UUID in its text form."""
    return str(uuid.uuid4())


async def _host_form(
    rt: RuntimeCore,
    writer: BranchWriter,
    request: AskRequest,
    entries: Sequence[tuple[str, Mapping[str, Any]]],
    call: PendingCall,
) -> dict[str, Any]:
    """Outside ``tui``: an external UI answers a foreground call, else the fallback result."""
    await call.append_with(writer, entries)
    if not request.background:
        # Only this path (outside ``tui``) asks an external UI: a terminal's form never
        # loads the bridge (``tests/test_cold_imports.py``).
        from pi_agent_ask.actors.external import negotiate_and_run

        external = await negotiate_and_run(rt, writer, request)
        if external is not None:
            return external
    outcome_result = fallback_result(request.params, request.request_id)
    with trio.CancelScope(shield=True):
        await writer.append_many(
            jr.completion_entries(
                Outcome(request.request_id, result=outcome_result), background=False
            )
        )
    return texts.fallback_tool_result(request.params, request.request_id)


async def _background(
    rt: RuntimeCore,
    writer: BranchWriter,
    request: AskRequest,
    entries: list[tuple[str, Mapping[str, Any]]],
    call: PendingCall,
    shared: codec.Spliced,
) -> dict[str, Any]:
    """Journal and queue the request; the receipt says how many are pending.

    The queue writes the request's entries and the call's result (the receipt) in the
    transition that enqueues it: one write, and the receipt's pending count is the queue's.
    """
    entries.append((jr.QUEUED, jr.queued_entry(request, shared=shared)))
    settings = rt.config.form_settings  # its form is made when first shown (``Item.form``)
    question_ids = [question.id for question in request.params.questions]
    background_only = rt.config.background_only

    receipts: dict[int, dict[str, Any]] = {}  # one result per count: journaled and returned

    def receipt(pending: int) -> dict[str, Any]:
        made = receipts.get(pending)
        if made is None:
            made = receipts[pending] = texts.receipt_tool_result(
                request.request_id, question_ids, pending, background_only=background_only
            )
        return made

    def result_entry(pending: int) -> tuple[str, Mapping[str, Any]]:
        return (
            jr.TOOL_RESULT,
            jr.tool_result_entry(call.tool_call_id, "ask_user", receipt(pending)),
        )

    recording = q.Recording((*call.unwritten(), *entries), result_entry, writer)
    pending: int | Exception = await rt._ask_queue(
        lambda reply: q.Enqueue(request, settings, reply, recording), shielded=True
    )
    if isinstance(pending, Exception):
        raise pending
    call.written = call.result_written = True
    return receipt(pending)


async def _foreground(rt: RuntimeCore, writer: BranchWriter, request: AskRequest) -> dict[str, Any]:
    result = await run_foreground(rt, writer, request, record_interruption=True)
    if result.cancelled:
        rt._aborts_tx.send_nowait(request.request_id)
    return texts.tool_result(result, params=request.params)


async def run_foreground(
    rt: RuntimeCore,
    writer: BranchWriter,
    request: AskRequest,
    *,
    record_interruption: bool,
    extra_entries: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> AskResult:
    """Run a foreground form in this task: wait for the surface (FIFO), answer, record.

    An interrupted form (the call was cancelled, the session changed) raises
    ``ToolInterrupted``; with ``record_interruption`` it is first journaled as cancelled with
    its drafts. A broken surface records an error outcome and raises ``ToolFailed``.
    """
    claim_id = next(rt._ids)
    scope = trio.CancelScope()
    commands, inbox = trio.open_memory_channel[FormInput](64)  # 64: key handlers never await
    grants, granted = trio.open_memory_channel[q.Grant](1)
    latest = fs.new_form(request.params, rt.config.form_settings)
    final: fs.FormState | None = None

    async def on_change(state: fs.FormState, saved: Saved | None) -> None:
        nonlocal latest
        latest = state
        answer_saved(saved, None)  # a foreground form's drafts are kept with it, not on disk

    failure: str | None = None
    try:
        # Inside the try: the request is journaled already, so an abort from here on must
        # still record its outcome (the finally below).
        await rt._queue_tx.send(
            q.AcquireSurface(claim_id, request.flow_id, commands, scope, grants)
        )
        await granted.receive()
        with scope:
            try:
                final = await host_form(rt, request, latest, commands, inbox, on_change)
            except FormFailed as error:
                failure = str(error)
    finally:
        close_inbox(inbox)
        await rt.tell_queue(q.ReleaseSurface(claim_id))
        interrupted = final is None or final.outcome is None
        if record_interruption and interrupted and failure is None:
            with trio.CancelScope(shield=True):
                await record_interrupted(writer, request, latest)
    if failure is not None:
        failed = Outcome(request.request_id, error=failure)
        await record_outcome(rt, writer, request, failed, extra=extra_entries)
        raise ToolFailed(f"Question form failed: {failure}")
    if final is None or final.outcome is None:
        raise ToolInterrupted(FORM_INTERRUPTED_TEXT)
    result = result_of(request, final)
    await record_outcome(
        rt, writer, request, Outcome(request.request_id, result=result), extra=extra_entries
    )
    return result


async def host_form(
    rt: RuntimeCore,
    request: AskRequest,
    form: fs.FormState,
    commands: trio.MemorySendChannel[FormInput],
    inbox: trio.MemoryReceiveChannel[FormInput],
    on_change: OnChange | None,
    *,
    scope: trio.CancelScope | None = None,
) -> fs.FormState | None:
    """Open a form: announce it, notify once, and run it until it has an outcome.

    Without ``scope`` (a foreground form, already inside its scope) it first passes through
    the scheduler, also when the runtime is open: a form the queue cancelled to make room for
    this one (a session change, say) hides itself in that pass, before this one is shown.

    ``scope`` is the form's cancel scope for a caller outside it (the queue's form runner,
    which runs background forms one after the other, and passes through the scheduler itself
    when a cancelled foreground claim may still be showing). The form runs under it from its
    first wait on (``run_form``); ``None`` when the scope cancelled it. A form cancelled
    before it runs announces and shows nothing, as one cancelled at its first pass."""
    if scope is not None and (scope.cancel_called or not rt._opened.is_set()):
        # It is cancelled already, or must wait for the runtime to open: all under its scope.
        with scope:
            return await host_form(rt, request, form, commands, inbox, on_change)
        return None
    if scope is None:
        await rt._opened.wait()
    flow_id = request.flow_id
    if rt.events.has_subscribers(ev.STARTED):  # else the payload is not made
        rt.events.emit(ev.STARTED, _started(request, flow_id))
    config = rt.config
    changed = _no_change if on_change is None else on_change
    deferred = rt._put_back if request.background else None

    def run(scope: trio.CancelScope | None = None) -> Coroutine[Any, Any, fs.FormState | None]:
        return run_form(
            flow_id=flow_id,
            state=form,
            inbox=inbox,
            commands=commands,
            surface=rt._surface,
            on_change=changed,
            on_defer=deferred,
            scope=scope,
        )

    enabled, channels = config.notifications_enabled, config.notification_channels
    if unheard(enabled, channels, rt._write_terminal):
        return await run(scope=scope)  # nobody would hear of it: no notification is made
    first = request.params.questions[0]
    link = rt._notify_link
    notify = Notify(
        flow_id, first.label, first.prompt, enabled, channels, link(flow_id) if link else None
    )
    if scope is None:
        await rt._notify_tx.send(notify)
        return await run()
    with scope:
        await rt._notify_tx.send(notify)
        return await run()
    return None


def _started(request: AskRequest, flow_id: str) -> dict[str, Any]:
    """The ``pi-agent-ask:started`` payload of ``request``'s form."""
    # Each question's arguments with the presented type in place of the requested one (the
    # key keeps its place).
    questions = [
        {**question.to_json(), "type": question.effective_type}
        for question in request.params.questions
    ]
    started: dict[str, Any] = {
        "version": 1,
        "flowId": flow_id,
        "askRequestId": request.request_id,
        "source": request.source,
        "questions": questions,
        "createdAt": request.created_at,
    }
    if request.tool_call_id is not None:
        started["toolCallId"] = request.tool_call_id
    if request.params.title is not None:
        started["title"] = request.params.title
    return started


async def _no_change(_state: fs.FormState, saved: Saved | None) -> None:
    """A form's ``on_change`` for an owner that keeps no drafts."""
    answer_saved(saved, None)


async def run_background_form(
    rt: RuntimeCore,
    request: AskRequest,
    form: fs.FormState,
    epoch: int,
    scope: trio.CancelScope,
    commands: trio.MemorySendChannel[FormInput],
    inbox: trio.MemoryReceiveChannel[FormInput],
) -> None:
    """The body of a visible background form, run by the queue's form runner.

    The form runs under ``scope`` (defer, session change and the queue's end cancel it;
    ``host_form`` enters it); what comes after it, the outcome's write and ``FormStopped``,
    runs outside it, where the runner's shield keeps it from being cut off (an outcome is
    never half-written)."""
    latest = form
    outcome: Outcome | None = None
    writer = rt._writer
    final: fs.FormState | None = None
    failure: str | None = None

    async def on_change(state: fs.FormState, saved: Saved | None) -> None:
        nonlocal latest
        latest = state
        try:
            await rt._queue_tx.send(q.DraftChanged(request.request_id, epoch, state, saved))
        except BaseException:
            if saved is not None:
                saved.close()  # not handed to the queue (cancelled, or the queue is gone)
            raise

    try:
        try:
            final = await host_form(rt, request, form, commands, inbox, on_change, scope=scope)
        except FormFailed as error:
            failure = str(error)
        if failure is not None:
            # The surface broke: an error outcome, never an invented answer.
            failed = Outcome(request.request_id, request.parent_tool_call_id, error=failure)
            await write_outcome(rt, writer, request, failed)
            outcome = failed
        elif final is not None:
            latest = final
            if final.outcome is not None:
                result = result_of(request, final)
                candidate = Outcome(request.request_id, request.parent_tool_call_id, result=result)
                try:
                    await write_outcome(rt, writer, request, candidate)
                except WriteRefused as error:
                    # Behind the boundary checks this means a bug; the form ends with an
                    # error the agent hears of, and the queue goes on.
                    failed = Outcome(
                        request.request_id,
                        request.parent_tool_call_id,
                        error=f"The answer could not be recorded: {error}",
                    )
                    await write_outcome(rt, writer, request, failed)
                    candidate = failed
                outcome = candidate
    except (StaleBranch, PersistenceClosedError, WriteRefused):
        outcome = None
    except OSError as error:
        # The disk failed: nothing of the write is on the branch (a failed frame is rolled
        # back), so nothing happened. The form stays pending with everything the person
        # entered (shown again, answerable), and they hear of it; no answer is invented.
        outcome = None
        rt.notice(ANSWER_NOT_SAVED_TEXT.format(error=error))
    finally:
        close_inbox(inbox)
        if outcome is None and latest.outcome is not None:
            # An answer that was not recorded did not happen: the form reopens with it.
            latest = attrs.evolve(latest, outcome=None)
        await rt.tell_queue(q.FormStopped(request.request_id, epoch, latest, outcome))
