"""The runtime: wires the actors and offers the tool calls and host hooks of ``API.md``.

Actors (each owns its state, all talk through memory channels):

- persistence — the session file; every write is acknowledged only once it reached the OS;
- queue — the input surface, the background FIFO, deliveries, waits, Herdr (``queue.py``);
- form — one per visible form, in the tool call's task (foreground) or the queue's nursery
  (background) (``form.py``);
- waiter — the task of a ``wait_for_answers`` call, talking to the queue;
- notifications — one notification per opened form, never blocking a form.

The ``Runtime`` object itself holds only channel ends, configuration read at open, and the
revocable journal view of the current branch: after a session change, writes from surfaces of
the old branch are refused (``StaleBranch``) instead of landing on the new one.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.errors import ToolError, ToolFailed, ToolInterrupted
from pi_agent_ask.actors.external import negotiate_and_run
from pi_agent_ask.actors.form import (
    FLOW_NOT_ACTIVE,
    FailedSurface,
    FormFailed,
    FormInput,
    NullSurface,
    RemoteResponse,
    SettingsUpdate,
    Surface,
    SurfaceFailed,
    Terminal,
    TerminalFactory,
    UserCommand,
    close_inbox,
    failure_text,
    run_form,
)
from pi_agent_ask.actors.notifications import Notify, channels_from_json, run_notifications
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.queue_state import CommandSink, ReplyTo
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form import untrusted
from pi_agent_ask.form.result import AskResult, build_result, fallback_result, invalid_result
from pi_agent_ask.form.tools import tool_definitions_for
from pi_agent_ask.form.types import AskParams
from pi_agent_ask.form.validate import (
    schema_error_text,
    validate_ask_params,
    validate_bounded_params,
)
from pi_agent_ask.persistence import journal as jr

_R = TypeVar("_R")

Mode = Literal["tui", "print", "json", "rpc"]
MODES: tuple[Mode, ...] = ("tui", "print", "json", "rpc")
SESSION_REASONS = ("startup", "resume", "fork", "new", "reload", "tree")
RESUME_REASONS = ("startup", "resume", "fork")

WAIT_BUSY_TEXT = "Another wait_for_answers call is already waiting."
WAIT_NON_TUI_TEXT = "wait_for_answers requires interactive TUI mode."
WAIT_INTERRUPTED_TEXT = "Question wait interrupted"
FORM_INTERRUPTED_TEXT = "Question form interrupted"
TEARDOWN_TIMEOUT = 5.0
"""Seconds a cancelled task may spend telling the queue or the journal that it ended."""
WAIT_HIDDEN_TEXT = "wait_for_answers is not available in background-only mode."
CALL_INTERRUPTED_TEXT = "Tool call interrupted: the session changed."
INTERRUPTED_TEXTS = {"ask_user": FORM_INTERRUPTED_TEXT, "wait_for_answers": WAIT_INTERRUPTED_TEXT}


CALL_FAILURES: tuple[type[Exception], ...] = (
    WriteRefused,
    PersistenceClosedError,
    OSError,
    ValueError,
    RecursionError,
)
"""What a tool call turns into a tool error besides ``ToolError``: a write the journal refused
(an entry too large or not storable), the runtime closing, the disk or a path failing (``OSError``;
``ValueError`` for a NUL byte in a path), and deep recursion in a library. Everything else
(``trio.Cancelled``, ``KeyboardInterrupt``, and exceptions that mean a bug here, such as
``TypeError``, ``AttributeError``, ``KeyError``, ``AssertionError``) propagates."""

_REOPEN_FAILURES: tuple[type[Exception], ...] = (ToolError, StaleBranch, *CALL_FAILURES)
"""What reopening an interrupted form reports as a notice (or, interrupted, leaves for later)."""


def _refusal_text(name: object, refusal: untrusted.Refusal | None) -> str:
    shown = name if isinstance(name, str) and untrusted.check(name) is None else "?"
    if refusal is None:
        refusal = untrusted.Refusal("name", "must be a string")
    path = refusal.path
    if path.startswith("arguments"):
        path = path.removeprefix("arguments").removeprefix(".") or "root"
    return f"Validation failed for tool {json.dumps(shown)}:\n  - {path}: {refusal.message}"


def _failure_text(name: str, error: Exception) -> str:
    match error:
        case WriteRefused():
            text = f"{name} failed: the session file refused the entry: {error}"
        case PersistenceClosedError():
            text = f"{name} failed: the runtime is closing ({error})"
        case _:
            text = f"{name} failed: {str(error) or type(error).__name__}"
    return untrusted.scrub_text(text)  # the text is journaled: it must be storable itself


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


@attrs.define(eq=False)
class BranchWriter:
    """The journal as one branch's surfaces see it: revoked when the session changes."""

    journal: Any
    revoked: bool = False

    async def append(self, type_: str, data: Mapping[str, Any]) -> Any:
        if self.revoked:
            raise StaleBranch(type_)
        return await self.journal.append(type_, data)

    async def append_many(self, entries: Sequence[tuple[str, Mapping[str, Any]]]) -> Any:
        if self.revoked:
            raise StaleBranch(entries[0][0] if entries else "")
        return await self.journal.append_many(entries)

    async def branch(self) -> Any:
        return await self.journal.branch()

    async def read(self, read: Any) -> Any:
        return await self.journal.read(read)


@attrs.frozen
class RuntimeConfig:
    """What the runtime reads from the settings at open (and on explicit changes)."""

    form_settings: fs.FormSettings = attrs.field(factory=fs.FormSettings)
    present_single_as_multi: bool = False
    background_only: bool = False
    history_tools: bool = False
    notifications_enabled: bool = True
    notification_channels: tuple[Any, ...] = ()


@attrs.define(eq=False)
class Runtime:
    """A running pi-agent-ask runtime. Created by ``open_runtime``; see ``API.md``."""

    mode: Mode
    events: ev.EventBus
    config: RuntimeConfig
    cwd: Path
    settings: Any
    """The loaded settings (``persistence.settings.LoadedSettings``) the runtime follows."""
    wakeups: trio.MemoryReceiveChannel[dict[str, Any]]
    _nursery: trio.Nursery
    _queue_tx: trio.MemorySendChannel[q.QueueMessage]
    _writer: BranchWriter
    _journal: Any
    _surface: Surface
    _notify_tx: trio.MemorySendChannel[Notify]
    _opened: trio.Event
    _aborts_tx: trio.MemorySendChannel[str]
    aborts: trio.MemoryReceiveChannel[str]
    _activity_tx: trio.MemorySendChannel[bool]
    """Agent busy/idle, forwarded to the queue by one task, so they arrive in call order."""
    _notices_tx: trio.MemorySendChannel[str]
    notices: trio.MemoryReceiveChannel[str]
    """Messages for the person: settings problems, damaged session files, recovery."""
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    history_index: Any = None
    """The history records of the last branch state listed (``persistence.history``)."""
    _epoch: int = 0
    _model_requested: bool = False
    _disposed: bool = False
    """Set when ``open_runtime`` leaves: a surface may outlive the runtime (the overlay's save
    finishing late), and nothing may start in the runtime's closed nursery then."""

    # -- host hooks ----------------------------------------------------------------------

    def agent_started(self) -> None:
        """An agent turn started: idle wakes stop until the agent settles again."""
        self._model_requested = True
        self._activity_tx.send_nowait(False)

    def agent_settled(self) -> None:
        """The agent is idle: a ready answer may now wake it (``wakeups``)."""
        self._activity_tx.send_nowait(True)

    async def turn_boundary(self) -> list[dict[str, Any]]:
        """The background-answer messages to add to the context now (each exactly once, ever).

        Once the request is with the queue, the reply is taken even if this call is cancelled:
        the queue journals the messages as delivered before replying, and a reply dropped on
        the floor would be an answer marked delivered that the agent never saw. (Shielded but
        not stuck: the queue replies to every request it takes, or its channel closes.)"""
        send, receive = trio.open_memory_channel[list[dict[str, Any]]](1)
        await self._queue_tx.send(q.TurnBoundary(send))
        with receive, trio.CancelScope(shield=True):
            return await receive.receive()
        # A cancel scope's exit swallows only its own cancellation, and nothing cancels this one.
        raise AssertionError("unreachable")

    async def user_message(self, text: str) -> None:
        """Ordinary input: releases an active wait as ``deferred`` and hides the panel."""
        await self._writer.append(jr.USER_MESSAGE, {"text": untrusted.scrub_text(text)})
        await self._ask_queue_done(lambda reply: q.Defer("user_message", reply))

    async def defer_queue(self) -> None:
        """Hide the panel and defer every question; queue and drafts are kept."""
        await self._ask_queue_done(lambda reply: q.Defer("hidden", reply))

    async def show_queue(self) -> None:
        """Reopen the panel on the pending questionnaire (``/ask-queue``)."""
        await self._ask_queue_done(lambda reply: q.Show(reply))

    async def statistics(self) -> q.QueueStats:
        """A snapshot of the queue: pending, completed, delivered, visible flow, Herdr owners."""
        return await self._ask_queue(lambda reply: q.Inspect(reply))

    async def send_command(self, flow_id: str, command: fs.Command) -> bool:
        """Send a form command (what a key press or click means) to a visible flow."""
        target = await self._find_flow(flow_id)
        if target is None:
            return False
        with target:
            try:
                await target.send(UserCommand(command))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The form ended between the lookup and the send: its owner closed its inbox.
                return False
        return True

    async def quiesce(self) -> None:
        """Close the visible background form and save every draft (bounded, shielded)."""
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(TEARDOWN_TIMEOUT),
            suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel),
        ):
            await self._ask_queue_done(lambda reply: q.Quiesce(reply))

    async def tell_queue(self, message: q.QueueMessage) -> None:
        """Send a message that must reach the queue even from a cancelled task (teardown).

        Shielded and bounded; once the runtime is being disposed the queue is gone and the
        message has nothing left to do, so a closed channel is not an error.
        """
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(TEARDOWN_TIMEOUT),
            suppress(trio.BrokenResourceError, trio.ClosedResourceError),
        ):
            await self._queue_tx.send(message)

    async def _ask_queue(self, make: Callable[[ReplyTo[_R]], q.QueueMessage]) -> _R:
        send, receive = trio.open_memory_channel[_R](1)
        await self._queue_tx.send(make(send))
        async with receive:
            return await receive.receive()

    async def _ask_queue_done(self, make: Callable[[ReplyTo[None]], q.QueueMessage]) -> None:
        """Ask the queue for something it only acknowledges (``None``)."""
        send, receive = trio.open_memory_channel[None](1)
        await self._queue_tx.send(make(send))
        async with receive:
            await receive.receive()

    async def _find_flow(self, flow_id: str) -> trio.MemorySendChannel[FormInput] | None:
        """A clone of the command channel of the visible flow ``flow_id`` (``None``: not active)."""
        sink: CommandSink | None = await self._ask_queue(lambda reply: q.FindFlow(flow_id, reply))
        # The queue holds the sinks this runtime enqueued: form command channels.
        assert sink is None or isinstance(sink, trio.MemorySendChannel)
        return sink

    # -- tools -----------------------------------------------------------------------------

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The tools this runtime exposes now (they change with the question mode)."""
        return tool_definitions_for(
            question_mode="background-only" if self.config.background_only else "standard",
            history_tools=self.config.history_tools,
        )

    # -- settings ---------------------------------------------------------------------------

    def apply_settings(self, loaded: Any) -> None:
        """Settings changed (the overlay saved them, a reset, a reload): apply them live.

        Behaviour and notification settings reach the visible form at once and every later
        form; ``presentSingleAsMulti`` applies to forms created from now on. The question mode
        and the history tools keep their values: the mode changes only through
        ``set_question_mode``, the history tools on the next start (000).
        """
        fresh = config_from_settings(loaded)
        self.config = attrs.evolve(
            fresh,
            background_only=self.config.background_only,
            history_tools=self.config.history_tools,
        )
        self.settings = loaded
        if not self._disposed:  # disposed: no form is open any more to push them to
            self._nursery.start_soon(self._push_form_settings, self.config.form_settings)

    async def surface_failed(self, message: str) -> None:
        """The terminal surface broke: the visible form and every later one end with an error.

        Nothing the person entered is turned into an answer; queued forms keep their drafts
        until they are shown (and then fail too), so a host can restart with a new surface.
        """
        self._surface = FailedSurface(message)
        self.notice(f"The question form could not be shown: {message}")
        stats = await self.statistics()
        visible = stats.visible
        if visible is None:
            return
        target = await self._find_flow(visible)
        if target is not None:
            with target, suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await target.send(SurfaceFailed(message))

    async def _push_form_settings(self, settings: fs.FormSettings) -> None:
        stats = await self.statistics()
        visible = stats.visible
        if visible is None:
            return
        target = await self._find_flow(visible)
        if target is not None:
            with target, suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await target.send(SettingsUpdate(settings))

    async def set_question_mode(
        self,
        mode: str,
        *,
        confirm: Callable[[str], Awaitable[bool]] | None = None,
    ) -> bool:
        """Switch between ``standard`` and ``background-only`` (what ``/ask-mode`` does).

        Saves ``behaviour.questionMode`` in the global settings file, then applies it. Once the
        agent has made its first model request (``agent_started`` was called), a change of the
        effective tool interface needs ``await confirm(message)`` to return true first (the
        host's cache-impact confirmation); without ``confirm``, or on refusal, nothing changes
        and this returns false. A failed save changes nothing either (the error is a notice).
        Queued questions and answers are kept; enabling background-only releases a running
        ``wait_for_answers`` as ``deferred`` (reason ``mode_changed``) without cancelling forms.
        """
        from pi_agent_ask.persistence.settings import SettingsSaveError, save_settings

        if mode not in ("standard", "background-only"):
            raise ValueError(f"question mode must be 'standard' or 'background-only', not {mode!r}")
        loaded = self.settings
        behaviour = attrs.evolve(loaded.global_config.behaviour, question_mode=mode)
        global_config = attrs.evolve(loaded.global_config, behaviour=behaviour)
        updated = loaded.with_global_config(global_config)
        background_only = updated.config.behaviour.question_mode == "background-only"
        changes_tools = background_only != self.config.background_only
        if changes_tools and self._model_requested:
            message = (
                f"Switching to {'background-only' if background_only else 'standard'} mode "
                "changes the agent's tools, so the next model request cannot reuse the cached "
                "prompt. Switch anyway?"
            )
            if confirm is None or not await confirm(message):
                return False
        try:
            await trio.to_thread.run_sync(save_settings, loaded.path, global_config)
        except SettingsSaveError as error:
            self.notice(str(error))
            return False
        self.settings = updated
        self.config = attrs.evolve(self.config, background_only=background_only)
        if changes_tools:
            await self._queue_tx.send(q.ModeChanged(background_only))
        if mode != updated.config.behaviour.question_mode:
            self.notice(
                f"Saved question mode {mode}; this project's trusted settings keep "
                f"{updated.config.behaviour.question_mode} in effect here."
            )
        return True

    def tool_names(self) -> tuple[str, ...]:
        names = ["ask_user"]
        if not self.config.background_only:
            names.append("wait_for_answers")
        if self.config.history_tools:
            names += ["list_ask_history", "read_ask_history", "export_ask_history"]
        return tuple(names)

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        tool_call_id: str | None = None,
        parent_tool_call_id: str | None = None,
    ) -> dict[str, Any]:
        """Run one tool call and return its result dict (see ``API.md``).

        Every call ends as a result or a tool error (``isError: true``): arguments that are not
        bounded, valid JSON text (``form/untrusted.py``) are refused before anything is
        journaled; a refused write, a disk failure or a bad path is a tool error. Only
        cancellation and bugs propagate (``docs/errors.md``)."""
        refusal = untrusted.check(
            {"name": name, "toolCallId": tool_call_id, "parentToolCallId": parent_tool_call_id}
        )
        if refusal is None:
            # The arguments on their own: the bounds are the same as for ``validate``.
            inner = untrusted.check(arguments)
            refusal = inner.within("arguments") if inner is not None else None
        if refusal is not None or not isinstance(name, str):
            # Nothing of the call can be stored: refused whole, and not journaled.
            return tool_error(_refusal_text(name, refusal))
        try:
            return await self._call_tool(name, arguments, tool_call_id, parent_tool_call_id)
        except CALL_FAILURES as error:
            return tool_error(_failure_text(name, error))

    async def _call_tool(
        self,
        name: str,
        arguments: Any,
        tool_call_id: str | None,
        parent_tool_call_id: str | None,
    ) -> dict[str, Any]:
        call: dict[str, Any] = {"toolCallId": tool_call_id, "name": name, "arguments": arguments}
        if parent_tool_call_id is not None:
            call["parentToolCallId"] = parent_tool_call_id
        writer = self._writer
        result: dict[str, Any] | None = None
        recorded = False
        try:
            try:
                await writer.append(jr.TOOL_CALL, call)
            except WriteRefused:
                recorded = True  # the call is not on the branch: no result goes after it
                raise
            try:
                if name not in self.tool_names():
                    result = tool_error(f"Tool {name!r} is not available.")
                elif name == "ask_user":
                    result = await self._ask_user(
                        writer, arguments, tool_call_id, parent_tool_call_id
                    )
                elif name == "wait_for_answers":
                    # The wait writes its own result first: that entry is its delivery mark.
                    result = await self._wait_for_answers(writer, tool_call_id)
                    recorded = True
                else:
                    from pi_agent_ask.persistence import history

                    try:
                        result = await history.call_history_tool(self, writer, name, arguments)
                    except history.HistoryError as error:
                        raise ToolError(str(error)) from None
            except ToolError as error:
                result = tool_error(str(error))
            except CALL_FAILURES as error:
                # After the call was journaled: its result (this error) is journaled too.
                result = tool_error(_failure_text(name, error))
        except StaleBranch:
            # The session changed under the call: its branch is gone for it, and it says so.
            result = tool_error(INTERRUPTED_TEXTS.get(name, CALL_INTERRUPTED_TEXT))
            recorded = True
        finally:
            # An aborted call is recorded as aborted, so recovery does not mistake it for an
            # interrupted one; a crash leaves no result, and recovery reopens the form.
            if not recorded:
                entry = result if result is not None else tool_error("Tool call aborted")
                with (
                    trio.CancelScope(shield=True),
                    trio.move_on_after(TEARDOWN_TIMEOUT),
                    suppress(StaleBranch, PersistenceClosedError, WriteRefused, OSError),
                ):
                    await writer.append(
                        jr.TOOL_RESULT,
                        {"toolCallId": tool_call_id, "name": name, "result": entry},
                    )
        return result

    # -- ask_user --------------------------------------------------------------------------

    async def _ask_user(
        self,
        writer: BranchWriter,
        arguments: Any,
        tool_call_id: str | None,
        parent_tool_call_id: str | None,
    ) -> dict[str, Any]:
        # ``call_tool`` checked the arguments at the boundary already.
        validation = validate_bounded_params(
            arguments,
            present_single_as_multi=self.config.present_single_as_multi,
            background_only=self.config.background_only,
        )
        if validation.schema_error:
            raise ToolError(schema_error_text("ask_user", validation.issues))
        if validation.params is None or validation.issues:
            raw_title = arguments.get("title") if isinstance(arguments, Mapping) else None
            return texts.tool_result(invalid_result(raw_title, validation.issues))
        params = validation.params
        background = params.background or self.config.background_only
        request = AskRequest(
            request_id=str(uuid.uuid4()),
            params=params,
            background=background,
            created_at=now_iso(),
            tool_call_id=tool_call_id,
            parent_tool_call_id=parent_tool_call_id,
            source="background" if background and self.mode == "tui" else "tool",
        )
        entries: list[tuple[str, Mapping[str, Any]]] = [
            (jr.PAYLOAD, jr.payload_entry(params, tool_call_id, request.created_at)),
            (jr.HISTORY_REQUEST, jr.history_request_entry(request)),
        ]
        # Recording a request is shielded: once its entries may be on the branch, the call
        # goes on to record an outcome (or to enqueue it), whatever cancels the caller.
        if self.mode != "tui":
            with trio.CancelScope(shield=True):
                await writer.append_many(entries)
            if not background:
                external = await self._external_ui(writer, request)
                if external is not None:
                    return external
            outcome_result = fallback_result(params, request.request_id)
            with trio.CancelScope(shield=True):
                await writer.append_many(
                    jr.completion_entries(
                        Outcome(request.request_id, result=outcome_result), background=False
                    )
                )
            return texts.fallback_tool_result(params, request.request_id)
        if background:
            entries.append((jr.QUEUED, jr.queued_entry(request)))
            form = fs.new_form(params, self.config.form_settings, background=True)
            with trio.CancelScope(shield=True):
                await writer.append_many(entries)
                pending: int = await self._ask_queue(lambda reply: q.Enqueue(request, form, reply))
            return texts.receipt_tool_result(
                request.request_id,
                [question.id for question in params.questions],
                pending,
                background_only=self.config.background_only,
            )
        with trio.CancelScope(shield=True):
            await writer.append_many(entries)
        return await self._foreground(writer, request)

    async def _foreground(self, writer: BranchWriter, request: AskRequest) -> dict[str, Any]:
        result = await self._run_foreground(writer, request, record_interruption=True)
        if result.cancelled:
            self._aborts_tx.send_nowait(request.request_id)
        return texts.tool_result(result, params=request.params)

    async def _run_foreground(
        self,
        writer: BranchWriter,
        request: AskRequest,
        *,
        record_interruption: bool,
        extra_entries: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> AskResult:
        """Run a foreground form in this task: wait for the surface (FIFO), answer, record.

        An interrupted form (the call was cancelled, the session changed) raises ToolError;
        with ``record_interruption`` it is first journaled as cancelled with its drafts.
        """
        claim_id = next(self._ids)
        scope = trio.CancelScope()
        commands, inbox = trio.open_memory_channel[FormInput](64)  # 64: key handlers never await
        grants, granted = trio.open_memory_channel[q.Grant](1)
        latest = fs.new_form(request.params, self.config.form_settings)
        final: fs.FormState | None = None

        async def on_change(state: fs.FormState) -> None:
            nonlocal latest
            latest = state

        failure: str | None = None
        try:
            # Inside the try: the request is journaled already, so an abort from here on must
            # still record its outcome (the finally below).
            await self._queue_tx.send(
                q.AcquireSurface(claim_id, request.flow_id, commands, scope, grants)
            )
            await granted.receive()
            with scope:
                try:
                    final = await self._host_form(request, latest, commands, inbox, on_change)
                except FormFailed as error:
                    failure = str(error)
        finally:
            close_inbox(inbox)
            await self.tell_queue(q.ReleaseSurface(claim_id))
            interrupted = final is None or final.outcome is None
            if record_interruption and interrupted and failure is None:
                with trio.CancelScope(shield=True):
                    await self._record_interrupted(writer, request, latest)
        if failure is not None:
            failed = Outcome(request.request_id, error=failure)
            await self._record_outcome(writer, request, failed, extra=extra_entries)
            raise ToolFailed(f"Question form failed: {failure}")
        if final is None or final.outcome is None:
            raise ToolInterrupted(FORM_INTERRUPTED_TEXT)
        result = self._result_of(request, final)
        await self._record_outcome(
            writer, request, Outcome(request.request_id, result=result), extra=extra_entries
        )
        return result

    async def _record_interrupted(
        self, writer: BranchWriter, request: AskRequest, form: fs.FormState
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

    def _result_of(self, request: AskRequest, final: fs.FormState) -> AskResult:
        assert final.outcome is not None
        return build_result(
            request.params,
            final.drafts,
            presented_types=final.types,
            cancelled=final.outcome.cancelled,
            request_id=request.request_id,
        )

    async def _record_outcome(
        self,
        writer: BranchWriter,
        request: AskRequest,
        outcome: Outcome,
        extra: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> None:
        """Journal an outcome (and ``extra`` entries in the same frame), then announce it.

        Shielded: an outcome is never half-written.
        """
        entries = [*jr.completion_entries(outcome, background=request.background), *extra]
        with trio.CancelScope(shield=True):
            await writer.append_many(entries)
        if outcome.result is not None:
            self._announce_completed(request, outcome.result)

    def _announce_completed(self, request: AskRequest, result: AskResult) -> None:
        """Emit ``pi-agent-ask:completed`` for a flow that ended with ``result``."""
        payload: dict[str, Any] = {
            "version": 1,
            "flowId": request.flow_id,
            "askRequestId": request.request_id,
            "source": request.source,
            "result": result.to_details(),
            "completedAt": now_iso(),
        }
        if request.tool_call_id is not None:
            payload["toolCallId"] = request.tool_call_id
        self.events.emit(ev.COMPLETED, payload)

    async def _host_form(
        self,
        request: AskRequest,
        form: fs.FormState,
        commands: trio.MemorySendChannel[FormInput],
        inbox: trio.MemoryReceiveChannel[FormInput],
        on_change: Any,
    ) -> fs.FormState:
        """Open a form: announce it, notify once, and run it until it has an outcome."""
        await self._opened.wait()
        started: dict[str, Any] = {
            "version": 1,
            "flowId": request.flow_id,
            "askRequestId": request.request_id,
            "source": request.source,
            "questions": [
                question.to_json() | {"type": question.effective_type}
                for question in request.params.questions
            ],
            "createdAt": request.created_at,
        }
        if request.tool_call_id is not None:
            started["toolCallId"] = request.tool_call_id
        if request.params.title is not None:
            started["title"] = request.params.title
        self.events.emit(ev.STARTED, started)
        first = request.params.questions[0]
        await self._notify_tx.send(
            Notify(
                request.flow_id,
                first.label,
                first.prompt,
                self.config.notifications_enabled,
                self.config.notification_channels,
            )
        )

        async def changed(state: fs.FormState) -> None:
            if on_change is not None:
                await on_change(state)

        return await run_form(
            flow_id=request.flow_id,
            state=form,
            inbox=inbox,
            commands=commands,
            surface=self._surface,
            on_change=changed,
            on_defer=self.defer_queue if request.background else None,
        )

    async def run_background_form(
        self,
        request: AskRequest,
        form: fs.FormState,
        epoch: int,
        scope: trio.CancelScope,
        commands: trio.MemorySendChannel[FormInput],
        inbox: trio.MemoryReceiveChannel[FormInput],
    ) -> None:
        """The body of a visible background form, run in the queue's nursery."""
        latest = form
        outcome: Outcome | None = None
        writer = self._writer

        async def on_change(state: fs.FormState) -> None:
            nonlocal latest
            latest = state
            await self._queue_tx.send(q.DraftChanged(request.request_id, epoch, state))

        try:
            with scope:
                try:
                    final = await self._host_form(request, form, commands, inbox, on_change)
                except FormFailed as error:
                    # The surface broke: an error outcome, never an invented answer.
                    failed = Outcome(
                        request.request_id, request.parent_tool_call_id, error=str(error)
                    )
                    await self._record_outcome(writer, request, failed)
                    outcome = failed
                    return
                latest = final
                if final.outcome is not None:
                    result = self._result_of(request, final)
                    candidate = Outcome(
                        request.request_id, request.parent_tool_call_id, result=result
                    )
                    try:
                        await self._record_outcome(writer, request, candidate)
                    except WriteRefused as error:
                        # Behind the boundary checks this means a bug; the form ends with an
                        # error the agent hears of, and the queue goes on.
                        failed = Outcome(
                            request.request_id,
                            request.parent_tool_call_id,
                            error=f"The answer could not be recorded: {error}",
                        )
                        await self._record_outcome(writer, request, failed)
                        candidate = failed
                    outcome = candidate
        except (StaleBranch, PersistenceClosedError, WriteRefused):
            outcome = None
        finally:
            close_inbox(inbox)
            await self.tell_queue(q.FormStopped(request.request_id, epoch, latest, outcome))

    # -- remote submissions ---------------------------------------------------------------

    def _on_submit(self, payload: Any) -> None:
        self._nursery.start_soon(self._handle_submit, payload)

    async def _handle_submit(self, payload: Any) -> None:
        problem = _submit_envelope_problem(payload)
        request_id = payload.get("requestId") if isinstance(payload, Mapping) else None
        flow_id = payload.get("flowId") if isinstance(payload, Mapping) else None
        if problem is None:
            problem = _submit_content_problem(payload)
        if problem is not None:
            self._submit_result(request_id, flow_id, problem)
            return
        assert isinstance(flow_id, str)  # the envelope check requires a flowId string
        target = await self._find_flow(flow_id)
        if target is None:
            self._submit_result(request_id, flow_id, ("flow_not_found", "Ask flow is not active."))
            return
        replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
        try:
            with target:
                await target.send(RemoteResponse(dict(payload["response"]), replies))
            async with reply:
                answer = await reply.receive()
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
            answer = FLOW_NOT_ACTIVE
        self._submit_result(request_id, flow_id, answer)

    def _submit_result(
        self, request_id: Any, flow_id: Any, problem: tuple[str, str] | None
    ) -> None:
        payload: dict[str, Any] = {"version": 1, "requestId": request_id, "flowId": flow_id}
        if problem is None:
            payload["ok"] = True
        else:
            payload.update(ok=False, error=problem[0], message=problem[1])
        self.events.emit(ev.SUBMIT_RESULT, payload)

    # -- wait_for_answers ----------------------------------------------------------------

    async def _wait_for_answers(
        self, writer: BranchWriter, tool_call_id: str | None
    ) -> dict[str, Any]:
        """Wait as the queue decides; write the result (the delivery mark), then acknowledge.

        Acknowledging marks the results delivered; it happens only once the tool-result entry
        is on the branch, so a session change in between cannot lose the mark.
        """
        if self.mode != "tui":
            raise ToolError(WAIT_NON_TUI_TEXT)
        if self.config.background_only:
            raise ToolError(WAIT_HIDDEN_TEXT)
        wait_id = next(self._ids)
        replies, reply = trio.open_memory_channel[q.WaitEnd](1)
        await self._queue_tx.send(q.StartWait(wait_id, replies))
        acknowledged = False
        try:
            end = await reply.receive()
            if end.status == "busy":
                raise ToolError(WAIT_BUSY_TEXT)
            if end.status == "aborted":
                raise ToolInterrupted(WAIT_INTERRUPTED_TEXT)
            params = await self._params_lookup(end)
            if end.status == "complete":
                result = texts.wait_complete_result(end.request_ids, end.results, params=params)
            else:
                assert end.reason is not None
                result = texts.wait_deferred_result(
                    end.reason, end.request_ids, end.pending_request_ids, end.results, params=params
                )
            entry = {"toolCallId": tool_call_id, "name": "wait_for_answers", "result": result}
            try:
                with trio.CancelScope(shield=True):
                    await writer.append(jr.TOOL_RESULT, entry)
            except StaleBranch:
                raise ToolInterrupted(WAIT_INTERRUPTED_TEXT) from None
            acknowledged = True
            return result
        finally:
            # Always tell the queue the wait ended; unacknowledged results go back to delivery.
            await self.tell_queue(q.EndWait(wait_id, acknowledged))

    async def _params_lookup(self, end: q.WaitEnd) -> dict[str, AskParams]:
        stats: q.QueueStats = await self._ask_queue(lambda reply: q.Inspect(reply))
        return dict(stats.params)

    # -- session lifecycle ----------------------------------------------------------------

    async def change_session(self, reason: str, session: Any = None) -> None:
        """Dispose what belongs to the old branch and rebuild from the new one.

        ``reason`` is ``startup``, ``resume``, ``fork``, ``new``, ``reload`` or ``tree``.
        ``session`` is the session file to continue with (``resume``, ``fork``: the file the
        branch was forked into, ``new``), or the entry id to move the leaf to (``tree``).
        """
        if reason not in SESSION_REASONS:
            raise ValueError(f"reason must be one of {', '.join(SESSION_REASONS)}, not {reason!r}")
        # Save the drafts of the old branch on the old branch, then revoke: from here on,
        # surfaces of the old branch cannot write anywhere.
        await self.quiesce()
        self._writer.revoked = True
        seen = len(self._journal.reports)
        switched = False
        try:
            await self._journal.switch(reason, session)
            switched = True
        finally:
            # Whatever the switch did (done, refused: not a session file, cancelled half-way),
            # the runtime follows the branch the journal is on now: a fresh writer and a
            # rebuild, shielded so a cancellation cannot leave the revoked writer in place
            # (every later write would be refused). A switch that did not finish recovers no
            # interrupted call: the next startup or resume does.
            for report in self._journal.reports[seen:]:
                self.notice(report.describe())
            self._writer = BranchWriter(self._journal)
            with trio.CancelScope(shield=True), suppress(PersistenceClosedError):
                await self._rebuild(reason if switched else "reload")

    async def _rebuild(self, reason: str) -> None:
        self._epoch += 1
        # Read from the session's fold: bounded by what is pending, not by the history.
        rebuilt, interrupted = await self._writer.read(
            functools.partial(
                jr.recover,
                revalidate=self._revalidate,
                present_single_as_multi=self.config.present_single_as_multi,
                interrupted=reason in RESUME_REASONS and self.mode == "tui",
            )
        )
        if interrupted is not None:
            # Detached: an open recovered form never blocks the session lifecycle.
            self._nursery.start_soon(self._resume_interrupted, self._writer, interrupted)
        items = []
        for restored in rebuilt.requests:
            form = fs.new_form(restored.request.params, self.config.form_settings, background=True)
            if restored.draft is not None:
                try:
                    form = attrs.evolve(
                        fs.state_from_json(
                            restored.request.params, restored.draft, self.config.form_settings
                        ),
                        background=True,
                    )
                except ValueError:
                    # A draft that no longer fits its form is dropped, never half-applied.
                    self.notice(
                        "A saved draft could not be restored; the form reopens empty: "
                        f"{restored.request.request_id}"
                    )
            items.append(
                q.RestoredItem(restored.request, form, restored.outcome, restored.delivered)
            )
        follow_ups = tuple(
            q.FollowUp(
                jr.RESUME_ANSWER,
                resume_answer_message(r.tool_call_id, r.request_id, r.params, r.outcome.result),
                wake=True,
            )
            for r in rebuilt.recovered_answers
            if r.outcome.result is not None
        )
        await self._ask_queue_done(
            lambda reply: q.Restore(
                self._epoch,
                tuple(items),
                rebuilt.panel_visible,
                self._writer,
                reply,
                follow_ups=follow_ups,
            )
        )

    def _revalidate(self, arguments: Any) -> AskParams | None:
        validation = validate_ask_params(
            arguments,
            cwd=self.cwd,
            present_single_as_multi=self.config.present_single_as_multi,
        )
        return validation.params if validation.ok else None

    def notice(self, text: str) -> None:
        """A message for the person (the host shows ``notices``); never blocks."""
        self._notices_tx.send_nowait(text)

    async def _resume_interrupted(self, writer: BranchWriter, call: jr.InterruptedCall) -> None:
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
        await self._opened.wait()  # nothing, not even Herdr, before the body runs
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
                self.notice(
                    "Delivering an ask_user answer recorded before the interruption: "
                    f"{count} question(s)."
                )
        else:
            self.notice(f"Reopening unanswered ask_user form: {count} question(s).")
            try:
                if call.request_id is None:
                    await writer.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))
                dismissed = (jr.PENDING_DISMISSED, {"toolCallId": call.tool_call_id})
                result = await self._run_foreground(
                    writer, request, record_interruption=False, extra_entries=[dismissed]
                )
            except _REOPEN_FAILURES as error:
                if isinstance(error, ToolInterrupted):
                    return  # the session changed or the runtime closed: recovery runs later
                self.notice(f"Could not reopen unanswered ask_user form: {error}")
                return
        if result.cancelled:
            self.notice("Unanswered ask_user form dismissed.")
            return
        message = resume_answer_message(
            call.tool_call_id, request.request_id, request.params, result
        )
        await self.tell_queue(q.FollowUp(jr.RESUME_ANSWER, message, wake=True))

    # -- external UI ----------------------------------------------------------------------

    async def _external_ui(
        self, writer: BranchWriter, request: AskRequest
    ) -> dict[str, Any] | None:
        return await negotiate_and_run(self, writer, request)


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


def config_from_settings(loaded: Any) -> RuntimeConfig:
    """The runtime's view of loaded settings (``persistence.settings.LoadedSettings``)."""
    behaviour = loaded.config.behaviour
    notifications = loaded.config.notifications
    return RuntimeConfig(
        form_settings=fs.FormSettings(
            auto_submit_when_answered_without_notes=behaviour.auto_submit_when_answered_without_notes,
            confirm_dismiss_when_dirty=behaviour.confirm_dismiss_when_dirty,
            double_press_review_shortcuts=behaviour.double_press_review_shortcuts,
        ),
        present_single_as_multi=behaviour.present_single_as_multi,
        background_only=behaviour.question_mode == "background-only",
        history_tools=behaviour.history_tools,
        notifications_enabled=notifications.enabled,
        notification_channels=channels_from_json(notifications.to_json()["channels"]),
    )


@asynccontextmanager
async def open_runtime(
    session: str | Path | None = None,
    mode: Mode = "tui",
    settings: str | Path | None = None,
    input: Any = None,
    output: Any = None,
    cwd: str | Path | None = None,
    *,
    surface: Surface | None = None,
    write_terminal: Any = None,
    agent_idle: bool = True,
    terminal: TerminalFactory | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime; see ``API.md``. Leaving the block disposes every actor.

    ``surface`` replaces the terminal UI (tests and headless hosts pass ``NullSurface()``);
    ``write_terminal`` receives notification bytes (bell, OSC) instead of the terminal.
    ``agent_idle=False`` opens with the agent busy: a host that never reads ``wakeups`` (an
    MCP server) passes it, so an answer recovered at open is not handed to an idle wake.
    ``terminal`` makes the terminal surface of a ``tui`` runtime without ``surface`` (the UI
    layer passes it: ``pi_agent_ask.open_runtime``); without it such a runtime is headless.
    """
    import os

    from pi_agent_ask.actors.session import SessionJournal, open_session_file
    from pi_agent_ask.persistence.settings import load_settings, settings_path

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    settings_file = Path(settings) if settings is not None else settings_path(os.environ)
    loaded = load_settings(settings_file, project_dir=work_dir)
    config = config_from_settings(loaded)
    events = ev.EventBus()
    screen: Terminal | None = None
    if surface is None and mode == "tui" and terminal is not None:
        screen = terminal(loaded)
        surface = screen.surface
    elif surface is None:
        surface = NullSurface()
    if write_terminal is None and screen is not None and output is not None:
        write_terminal = _writer_to(output)
    if write_terminal is None:
        write_terminal = _discard

    # Opened before any task starts, off the event loop (it reads and checks the whole file):
    # a file that is not a session file fails here, plainly, and is left untouched.
    session_file = await trio.to_thread.run_sync(open_session_file, session)
    async with trio.open_nursery() as nursery:
        journal = await SessionJournal.start(nursery, session_file)
        runtime: Runtime | None = None
        try:
            writer = BranchWriter(journal)
            opened = trio.Event()
            wake_tx, wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
            abort_tx, abort_rx = trio.open_memory_channel[str](float("inf"))
            # Unbounded: notices are few, and a host that never reads them must not stall anything.
            notice_tx, notice_rx = trio.open_memory_channel[str](float("inf"))
            # Unbounded: the hooks are plain calls that must not block; one task forwards them.
            activity_tx, activity_rx = trio.open_memory_channel[bool](float("inf"))
            notify_tx, notify_rx = trio.open_memory_channel[Notify](0)
            queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)
            await nursery.start(
                functools.partial(run_notifications, notify_rx, write_terminal=write_terminal)
            )
            runtime = Runtime(
                mode=mode,
                events=events,
                config=config,
                cwd=work_dir,
                settings=loaded,
                wakeups=wake_rx,
                nursery=nursery,
                queue_tx=queue_tx,
                writer=writer,
                journal=journal,
                surface=surface,
                notify_tx=notify_tx,
                opened=opened,
                aborts_tx=abort_tx,
                aborts=abort_rx,
                notices_tx=notice_tx,
                notices=notice_rx,
                activity_tx=activity_tx,
            )
            actor = q.QueueActor(
                journal=writer,
                events=events,
                wakeups=wake_tx,
                run_background_form=runtime.run_background_form,
                tui=mode == "tui",
                surface_ready=False,
                idle=agent_idle,
            )
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            nursery.start_soon(_forward_activity, activity_rx, queue_tx.clone())
            events.on(ev.SUBMIT, runtime._on_submit)
            if screen is not None:
                screen.attach(runtime.apply_settings, work_dir)
                await nursery.start(_supervise_terminal, runtime, screen, input, output)
            for text in loaded.notices:
                runtime.notice(text)
            for report in journal.reports:
                runtime.notice(report.describe())
            await runtime._rebuild("startup")
            # Shown forms wait for this: nothing is emitted before the first checkpoint
            nursery.start_soon(_open_surface, opened, queue_tx.clone())
            yield runtime
        finally:
            # Orderly disposal: drafts reach the session file before the actors go, and the
            # persistence actor (shielded from outer cancellation, so cleanups of cancelled
            # calls can still record their outcomes) is closed last: also when starting up
            # failed, so a failed open never leaves it running.
            if runtime is not None:
                await runtime.quiesce()
                runtime._disposed = True
            nursery.cancel_scope.cancel()
            journal.close()


async def _supervise_terminal(
    runtime: Runtime,
    terminal: Terminal,
    input: Any,
    output: Any,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the terminal surface; if it breaks, its forms end with an error (never an answer)."""
    status = _StartOnce(task_status)
    try:
        await terminal.run(input, output, task_status=status)
    except Exception as error:  # any UI failure: reported, and the runtime goes on
        status.started()
        await runtime.surface_failed(failure_text(error))


@attrs.define(eq=False)
class _StartOnce:
    """A task status that may be marked started more than once (only the first counts)."""

    status: trio.TaskStatus[None]
    done: bool = False

    def started(self, value: None = None) -> None:
        if not self.done:
            self.done = True
            self.status.started(value)


async def _forward_activity(
    activity: trio.MemoryReceiveChannel[bool], queue: trio.MemorySendChannel[q.QueueMessage]
) -> None:
    async with activity, queue:
        async for idle in activity:
            await queue.send(q.AgentActivity(idle=idle))


def _writer_to(output: Any) -> Any:
    """Notification bytes (bell, OSC) go to the form's terminal output."""

    def write(text: str) -> None:
        output.write_raw(text)
        output.flush()

    return write


def _discard(_text: str) -> None:
    pass


async def _open_surface(opened: trio.Event, queue: trio.MemorySendChannel[q.QueueMessage]) -> None:
    """Runs once the ``async with`` body reached its first checkpoint: only now may forms
    (recovered ones first) be shown and take Herdr, so handlers registered at the top of the
    body see every event."""
    opened.set()
    async with queue:
        await queue.send(q.SurfaceReady())
