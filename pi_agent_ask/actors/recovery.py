"""Session changes, the queue's rebuild from the branch, and interrupted calls reopened.

- ``change_session``: drafts saved on the old branch, the old branch's writer revoked, the file
  side switched, and the queue rebuilt with a new epoch, however the switch ends;
- ``rebuild``: the queue restored from the session's fold of the branch (``jr.recover``), and
  on ``startup``, ``resume`` and ``fork`` the newest interrupted foreground ``ask_user`` call
  reopened in a detached task;
- ``resume_interrupted``: that call's recorded answer delivered, or its form asked again; the
  answer reaches the agent as a follow-up message (``ask:resume-answer``) through the queue.
"""

from __future__ import annotations

import functools
import uuid
from contextlib import suppress
from typing import Any

import attrs
import trio

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.ask import run_foreground
from pi_agent_ask.actors.core import BranchWriter, RuntimeCore, now_iso
from pi_agent_ask.actors.dispatch import CALL_FAILURES
from pi_agent_ask.actors.errors import ToolError, ToolInterrupted
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.records import AskRequest, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.types import AskParams
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr

SESSION_REASONS = ("startup", "resume", "fork", "new", "reload", "tree")
RESUME_REASONS = ("startup", "resume", "fork")

_REOPEN_FAILURES: tuple[type[Exception], ...] = (ToolError, StaleBranch, *CALL_FAILURES)
"""What reopening an interrupted form reports as a notice (or, interrupted, leaves for later)."""


def resume_answer_message(
    tool_call_id: str, request_id: str, params: AskParams, result: AskResult
) -> dict[str, Any]:
    """The follow-up message that brings a reopened form's answer to the agent."""
    content = texts.tool_result(result, params=params)["content"]
    return {
        "role": "user",
        "customType": jr.RESUME_ANSWER,
        "content": content[0]["text"] if len(content) == 1 else content,
        "details": {
            "toolCallId": tool_call_id,
            "requestId": request_id,
            "result": result.to_details(),
        },
    }


async def change_session(rt: RuntimeCore, reason: str, session: Any = None) -> None:
    """Dispose what belongs to the old branch and rebuild from the new one
    (``Runtime.change_session``)."""
    if reason not in SESSION_REASONS:
        raise ValueError(f"reason must be one of {', '.join(SESSION_REASONS)}, not {reason!r}")
    # Save the drafts of the old branch on the old branch, then revoke: from here on,
    # surfaces of the old branch cannot write anywhere.
    await rt.quiesce()
    rt._writer.revoked = True
    seen = len(rt._journal.reports)
    switched = False
    try:
        await rt._journal.switch(reason, session)
        switched = True
    finally:
        # Whatever the switch did (done, refused: not a session file, cancelled half-way),
        # the runtime follows the branch the journal is on now: a fresh writer and a
        # rebuild, shielded so a cancellation cannot leave the revoked writer in place
        # (every later write would be refused). A switch that did not finish recovers no
        # interrupted call: the next startup or resume does.
        for report in rt._journal.reports[seen:]:
            rt.notice(report.describe())
        writer = BranchWriter(rt._journal)
        try:
            with trio.CancelScope(shield=True), suppress(PersistenceClosedError):
                await rebuild(rt, reason if switched else "reload", writer)
        finally:
            rt._writer = writer  # ``rebuild`` installs it; here also when the rebuild failed


async def rebuild(rt: RuntimeCore, reason: str, writer: BranchWriter | None = None) -> None:
    """Restore the queue from the current branch, in a new epoch, through ``writer`` (the
    runtime's by default)."""
    writer = rt._writer if writer is None else writer
    rt._epoch += 1
    # Read from the session's fold: bounded by what is pending, not by the history.
    rebuilt, interrupted = await writer.read(
        functools.partial(
            jr.recover,
            revalidate=functools.partial(_revalidate, rt),
            present_single_as_multi=rt.config.present_single_as_multi,
            interrupted=reason in RESUME_REASONS and rt.mode == "tui" and not rt.one_call,
        )
    )
    if interrupted is not None:
        # Detached: an open recovered form never blocks the session lifecycle.
        rt._nursery.start_soon(resume_interrupted, rt, writer, interrupted)
    items = []
    for restored in rebuilt.requests:
        form = fs.new_form(restored.request.params, rt.config.form_settings, background=True)
        if restored.draft is not None:
            try:
                form = attrs.evolve(
                    fs.state_from_json(
                        restored.request.params, restored.draft, rt.config.form_settings
                    ),
                    background=True,
                )
            except ValueError:
                # A draft that no longer fits its form is dropped, never half-applied.
                rt.notice(
                    "A saved draft could not be restored; the form reopens empty: "
                    f"{restored.request.request_id}"
                )
        items.append(q.RestoredItem(restored.request, form, restored.outcome, restored.delivered))
    # Messages given back (``ask:returned``) go out first: they were handed out before
    # anything else now waiting.
    given_back = tuple(q.FollowUp(kind, message, wake=True) for kind, message in rebuilt.returned)
    follow_ups = given_back + tuple(
        q.FollowUp(
            jr.RESUME_ANSWER,
            resume_answer_message(r.tool_call_id, r.request_id, r.params, r.outcome.result),
            wake=True,
        )
        for r in rebuilt.recovered_answers
        if r.outcome.result is not None
    )
    epoch = rt._epoch
    # Calls meet ``writer`` only from here (a session change's calls until now met the revoked
    # one: interrupted, as during the switch). With no checkpoint before it, the restore is the
    # queue's next message before any of theirs; a background request written after the read
    # above and enqueued before the restore would be dropped by it (it holds what the read
    # found), after its call was told it was queued. The forms the restore shows write through
    # ``writer``.
    rt._writer = writer
    await rt._ask_queue_done(
        lambda reply: q.Restore(
            epoch,
            tuple(items),
            rebuilt.panel_visible,
            writer,
            reply,
            follow_ups=follow_ups,
        )
    )


def _revalidate(rt: RuntimeCore, arguments: Any) -> AskParams | None:
    validation = validate_ask_params(
        arguments,
        cwd=rt.cwd,
        present_single_as_multi=rt.config.present_single_as_multi,
    )
    return validation.params if validation.ok else None


async def resume_interrupted(
    rt: RuntimeCore, writer: BranchWriter, call: jr.InterruptedCall
) -> None:
    """Reopen an interrupted foreground form (or take the answer it already has); the answer
    goes to the agent as a follow-up."""
    request = AskRequest(
        request_id=call.request_id or str(uuid.uuid4()),
        params=call.params,
        background=False,
        created_at=call.created_at or now_iso(),
        tool_call_id=call.tool_call_id,
        parent_tool_call_id=call.parent_tool_call_id,
        source="ask:resume",
    )
    await rt._opened.wait()  # nothing, not even Herdr, before the body runs
    count = len(call.params.questions)
    if call.recorded is not None:
        # Already answered (or dismissed) and journaled; only the tool result was lost.
        # That answer is delivered, not asked again. Dismissed first, then delivered: a
        # crash in between leaves a dismissed call with an undelivered answer, which the
        # next rebuild delivers (``recovered_answers``).
        assert call.recorded.result is not None
        try:
            await writer.append(jr.PENDING_DISMISSED, {"toolCallId": call.tool_call_id})
        except (StaleBranch, PersistenceClosedError, WriteRefused):
            return  # the session changed or the runtime closed: recovery runs again later
        result = call.recorded.result
        if not result.cancelled:
            rt.notice(
                "Delivering an ask_user answer recorded before the interruption: "
                f"{count} question(s)."
            )
    else:
        rt.notice(f"Reopening unanswered ask_user form: {count} question(s).")
        try:
            if call.request_id is None:
                await writer.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))
            dismissed = (jr.PENDING_DISMISSED, {"toolCallId": call.tool_call_id})
            result = await run_foreground(
                rt, writer, request, record_interruption=False, extra_entries=[dismissed]
            )
        except _REOPEN_FAILURES as error:
            if isinstance(error, ToolInterrupted):
                return  # the session changed or the runtime closed: recovery runs later
            rt.notice(f"Could not reopen unanswered ask_user form: {error}")
            return
    if result.cancelled:
        rt.notice("Unanswered ask_user form dismissed.")
        return
    message = resume_answer_message(call.tool_call_id, request.request_id, request.params, result)
    await rt.tell_queue(q.FollowUp(jr.RESUME_ANSWER, message, wake=True))
