"""Where ``pi-agent-ask mcp`` sends each call: a running desk, or its own runtime.

The server serves one agent for the whole stdio session, whatever starts or stops around it.
Its **side** is either the desk (every call forwarded, ``forward.py``) or local (its own
runtime on the agent's journal, ``stdio.open_local``). Which one is decided again:

- on every ``tools/list`` and ``tools/call``: one ``stat`` of the desk's connection file; when
  it changed since the last look (or a call found the desk gone), the file is read and the
  desk probed (``find_desk``);
- when the file changes between calls (``watch.py``: the kernel says so, nothing polls), so a
  desk that starts is used at once: forms kept meanwhile appear on it and a waiting
  ``wait_for_answers`` goes on there.

Moving between sides keeps every form, because both sides use one journal per agent key: by
default the local runtime opens the very journal the desk keeps for this key
(``mcp_common.journals``), closing it before the desk is called (so the desk can open it) and
opening it again when the desk is gone. Before a local side with the client's form
elicitation is left for a desk, the forms the client shows are let end (answered or dismissed
there: nothing a person answered is dropped, and the desk never shows such a form again);
the side serves calls meanwhile and shows no new form. A call in flight when the side changes: a
``wait_for_answers`` goes on on the new side; any other call returns a sentence saying where
its question is (its answer arrives through ``wait_for_answers`` or a later tool result). A
desk that stops under a call (killed, or restarted) is reported in a plain sentence, never the
transport's exception text.

Local, without the client's form elicitation, nothing can show a form, so the forms are
**kept** for a desk: ``ask_user`` queues the form and says so (start ``pi-agent-ask desk``),
also on standard error, and ``wait_for_answers`` waits until a desk shows them. With
``--desk off`` (no desk will ever come) the contract's non-TUI fallback applies instead, also
once the client's form elicitation failed (the call it failed on says so, without a desk; the
questions queued behind it end as not asked, and every outcome not yet delivered goes to the
agent with the next result: ``handover.py``). A
journal no desk would see (``--session``, or one held in memory because another server given
the same ``--key`` has the file) keeps no such question: ``ask_user`` is refused, saying what helps.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import mcp.types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

if TYPE_CHECKING:
    # The tools (and the runtime under them) load with the first call, after ``initialize``.
    from pi_agent_ask.mcp_common.tools import AgentTools, ReportProgress
    from pi_agent_ask.mcp_server.hook import TakeForHook
    from pi_agent_ask.persistence.session_values import SessionFileError
from pi_agent_ask.form import tools as tool_names
from pi_agent_ask.mcp_common import progress_plus
from pi_agent_ask.mcp_common.asgi import progress_reporter
from pi_agent_ask.mcp_common.connection import DeskAddress, find_desk
from pi_agent_ask.mcp_common.journals import wait_until_free
from pi_agent_ask.mcp_server.forward import (
    DeskGone,
    DeskUpstream,
    desk_take,
    forward_call,
    forward_list,
)
from pi_agent_ask.mcp_server.handover import Changes, hand_over
from pi_agent_ask.mcp_server.input_end import PersonWaits

__all__ = [
    "DESK_STOPPED_TEXT",
    "KEPT_HINT",
    "KEPT_TEXT",
    "MOVED_TEXT",
    "NO_FORMS_LOG",
    "SHARED_TEXT",
    "UNRECORDED_LOG",
    "UNRECORDED_TEXT",
    "Router",
]

KEPT_TEXT = (
    "No pi-agent-ask desk is running and this MCP client cannot show forms, so the question "
    "is kept (requestId {request_id}). To answer it, the user runs `pi-agent-ask desk` in a "
    "terminal: the question appears there, and its answer reaches you through "
    "wait_for_answers or with a later tool result."
)
KEPT_HINT = (
    "No pi-agent-ask desk is running and this MCP client cannot show forms: the question is "
    "kept until the user runs `pi-agent-ask desk` in a terminal."
)
KEPT_LOG = (
    "pi-agent-ask: no desk is running and the client cannot show forms; a question is kept "
    "(requestId {request_id}): run `pi-agent-ask desk` in a terminal to answer it"
)
WAIT_LOG = (
    "pi-agent-ask: wait_for_answers waits for a desk: run `pi-agent-ask desk` in a terminal "
    "to answer the questions kept"
)
NO_FORMS_LOG = (
    "pi-agent-ask: with --desk off and a client that cannot show forms, ask_user returns its "
    "questions as text for the agent to ask; to answer in forms, run `pi-agent-ask desk` in a "
    "terminal and this server without --desk off"
)
SHARED_TEXT = (
    "Nothing was asked: no pi-agent-ask desk is running, this MCP client cannot show forms, "
    "and another pi-agent-ask server given the same --key ({key!r}) holds the journal where "
    "questions are kept for a desk. The user runs "
    "`pi-agent-ask desk` in a terminal (then ask again: both servers use it), or gives this "
    "server its own `--key`."
)
SHARED_LOG = (
    "pi-agent-ask: a question was refused: no desk is running, the client cannot show forms, "
    "and another server of the key {key!r} holds its journal; run `pi-agent-ask desk` in a "
    "terminal, or give this server its own --key"
)
UNSEEN_TEXT = (
    "Nothing was asked: no pi-agent-ask desk is running, this MCP client cannot show forms, "
    "and a desk does not see the questions kept in this server's --session file. The user "
    "runs `pi-agent-ask desk` in a terminal (then ask again: the question goes there), or "
    "runs this server without --session."
)
UNSEEN_LOG = (
    "pi-agent-ask: a question was refused: no desk is running, the client cannot show forms, "
    "and a desk does not see this server's --session file; run `pi-agent-ask desk` in a "
    "terminal, or run this server without --session"
)
DESK_STOPPED_TEXT = (
    "The pi-agent-ask desk did not answer this call (it stopped, or is not running). Nothing "
    "is lost: a question that reached it stays queued for the next desk, and its answer "
    "reaches you through wait_for_answers or with a later tool result."
)
MOVED_TEXT = (
    "A pi-agent-ask desk {what} while this call waited; the question stays queued and is "
    "shown {where}. Its answer reaches you through wait_for_answers or with a later tool result."
)
ELICITATION_FAILED_TEXT = (
    "The MCP client's question form could not be used ({why}). This is not the user's "
    "answer or cancellation: the question stays queued, and "
    "pi-agent-ask now keeps questions for a desk: the user runs `pi-agent-ask desk` in a "
    "terminal to answer them, and the answers reach you through wait_for_answers or with a "
    "later tool result."
)
ELICITATION_FAILED_LOG = (
    "pi-agent-ask: the client's form could not be used ({why}); questions are kept for a "
    "desk: run `pi-agent-ask desk` in a terminal to answer them"
)
ELICITATION_FAILED_OFF_TEXT = (
    "The MCP client's question form could not be used ({why}). This is not the user's "
    "answer or cancellation. This server runs with --desk off, so nothing else shows forms: "
    "ask the user these questions yourself (from now on ask_user returns its questions as "
    "text for that). This agent's journal records the question as not asked, so nothing "
    "shows it again."
)
ELICITATION_FAILED_OFF_LOG = (
    "pi-agent-ask: the client's form could not be used ({why}); with --desk off nothing else "
    "shows forms: ask_user now returns its questions as text for the agent to ask"
)
UNRECORDED_TEXT = (
    "The answer given in the MCP client's form could not be recorded (the write to the session "
    "journal failed), so it was not kept. A pi-agent-ask desk started meanwhile: the question "
    "stays queued and is shown there, to be answered again. Its answer reaches you through "
    "wait_for_answers or with a later tool result."
)
UNRECORDED_LOG = (
    "pi-agent-ask: an answer given in the client's form could not be recorded (the session "
    "journal's write failed); the question goes to the desk, to be answered there again"
)
DRAIN_LOG = (
    "pi-agent-ask: a desk started; the form open in the client stays there until it is "
    "answered or dismissed, then this agent's questions go to the desk"
)
IN_JOURNAL = (
    "Nothing is lost: {questions} queued in this agent's session journal, {path} "
    "(`pi-agent-ask history list --session {path}` lists what was asked)"
)
IN_MEMORY = (
    "This server kept its questions in memory only (another server given the same --key holds "
    "the journal), so they end with it"
)
JOURNAL_REFUSED_TEXT = "pi-agent-ask cannot open its session journal: {why}. {hint}"
JOURNAL_REFUSED_LOG = "pi-agent-ask: cannot open the session journal: {why}. {hint}"
SESSION_HINT = (
    "Give --session a pi-agent-ask session file, or a path where one may be made, or leave "
    "--session out; then call again."
)
STATE_HINT = "Check that the state directory (--state) is a directory this user may write."
SIGNATURE_MISSING = (0, 0, -1)
HANDOVER_TIMEOUT = 10.0
"""Seconds a local side waits for a stopping desk to let go of the state directory."""


def _signature(path: Path) -> tuple[int, int, int]:
    try:
        stat = path.stat()
    except OSError:
        return SIGNATURE_MISSING
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


@attrs.define(eq=False)
class _Side:
    """One side's state: its tools (local) or upstream (desk), and the calls running on it."""

    address: DeskAddress | None
    local: Any = None
    """The ``LocalServer`` of a local side."""
    upstream: DeskUpstream | None = None
    close: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)
    calls: set[trio.CancelScope] = attrs.field(factory=set)
    attached: bool = False
    draining: bool = False
    """A local side that lets the client's open forms end before a move: it still serves."""
    left_because: str = ""
    """What a call cut by the move away from this side returns (its question stays queued)."""
    hooks: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """A desk side's hook socket (a local side's belongs to its ``LocalServer``)."""
    hooks_closed: trio.Event = attrs.field(factory=trio.Event)
    waits: int = 0
    """The ``wait_for_answers`` calls running on the side."""
    changes: Changes = attrs.field(factory=Changes)
    """Noted as each call on the side ends (``handover.py``)."""

    @property
    def is_desk(self) -> bool:
        return self.address is not None


@attrs.define(eq=False)
class Router:
    """The stdio server's calls, sent to the side that shows forms now (module docstring).

    ``open_local(keep, elicit, on_elicitation_failure, if_unusable)`` opens the local server
    (``stdio.open_local`` with its options bound; ``keep``: no elicitation, forms kept for a
    desk; ``elicit``: the client's form elicitation, when it has one; the last two are the
    elicitation surface's ``on_failure`` and ``if_unusable``). ``desk`` is
    ``"auto"``, ``"off"`` or a desk URL (with ``token``). Run :meth:`run` in a nursery
    (``nursery.start``) before the first call."""

    key: str
    desk: str
    desk_file: Path
    open_local: Callable[
        [bool, bool, Callable[[str], None], str], contextlib.AbstractAsyncContextManager[Any]
    ]
    elicitation: bool
    progress_interval: float
    token: str | None = None
    state_dir: Path | None = None
    """The desk state directory holding the local side's journal (``None``: another file)."""
    session_given: bool = False
    """The local side's journal is the one ``--session`` names."""
    cwd: Path = attrs.field(factory=Path.cwd)
    """The agent's working directory (a relative export path forwarded to a desk is taken
    there)."""
    log: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True)
    serve_hooks: Callable[[TakeForHook], Awaitable[None]] | None = None
    """Serves Claude Code's hook socket with a take until cancelled (``hook.py``): a desk
    side serves it with takes on the desk; a local side's ``open_local`` serves its own."""
    _nursery: trio.Nursery | None = None
    _side: _Side | None = None
    _seen: tuple[int, int, int] | None = None
    _lock: trio.Lock = attrs.field(factory=trio.Lock)
    _session: Any = None
    """The stdio client's MCP session (for the elicitation of a local side)."""
    _reopen: str = ""
    """Set when the local side must be opened again (the client's elicitation failed): what
    the calls cut by that return."""
    _handed: list[dict[str, Any]] = attrs.field(factory=list)
    """Outcomes taken from a side left after the client's form failed with ``--desk off``
    (``handover.py``), marked delivered: the next result returned carries them."""
    _refused: str = ""
    """The last journal refusal said on standard error (said again only when it changes)."""
    _drain: trio.CancelScope | None = None
    """The wait for the client's open forms before a move (the server's end cuts it)."""
    _person: PersonWaits = attrs.field(
        default=attrs.Factory(lambda self: PersonWaits(self.log), takes_self=True)
    )
    """Calls forwarded to a desk that wait for the person (the end of the input cuts them),
    and whether the client closed its input: no person answers through this server then."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                # No side yet: the first call chooses it, so ``initialize`` is answered before
                # the runtime is imported and the journal opened (clients time their start).
                if self.desk == "auto":
                    from pi_agent_ask.mcp_server.watch import watch_file

                    nursery.start_soon(watch_file, self.desk_file, self._changed)
                task_status.started()
                await trio.sleep_forever()
            finally:
                if self._drain is not None:
                    self._drain.cancel()
                if self._side is not None:
                    if self._handed and self._side.local is not None:
                        # Never returned: journaled as given back, for whatever serves next.
                        handed, self._handed = self._handed, []
                        await self._side.local.tools.give_back(handed)
                    await self._leave(self._side, shielded=True)

    def input_closed(self) -> None:
        """The client closed its input (MCP's end of a stdio session): no person answers
        through this server any more. The calls that wait for the person return now, saying
        where their forms stay (queued, nothing lost); the others are answered as usual before
        the server ends (``input_end.py``)."""
        self._person.close()
        if self._drain is not None:
            self._drain.cancel()  # the client's open forms can no longer be answered
        if self._side is not None and self._side.local is not None:
            self._end_waits(self._side)

    def _end_waits(self, side: _Side) -> None:
        journal = side.local.journal
        in_memory = side.local.in_memory

        def ended(request_ids: tuple[str, ...]) -> types.CallToolResult:
            questions = _questions(request_ids)
            where = IN_MEMORY if in_memory else IN_JOURNAL.format(questions=questions, path=journal)
            return self._person.ended(where, request_ids, None if in_memory else journal)

        side.local.tools.end_waits(ended)

    # -- the MCP handlers ----------------------------------------------------------------------

    async def list_tools(self, ctx: Any) -> types.ListToolsResult:
        self._session = ctx.session
        for _attempt in range(2):
            side = await self._current()
            if side.upstream is None:
                self._attach(side)
                return types.ListToolsResult(tools=side.local.tools.list_tools())
            try:
                return await forward_list(side.upstream)
            except DeskGone as gone:
                failure = gone
                await self._desk_failed(side)
        # Still the desk (``--desk URL``: no other side), and it does not answer.
        raise MCPError(INTERNAL_ERROR, _gone_text(failure))

    async def call_tool(
        self, ctx: Any, name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        from pi_agent_ask.mcp_common.tools import with_background_answers

        result = await self._call_tool(ctx, name, arguments)
        # No checkpoint from here to the transport's write, as for the tools' own answers.
        handed, self._handed = self._handed, []
        return with_background_answers(result, handed)

    async def _call_tool(
        self, ctx: Any, name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        from pi_agent_ask.mcp_common.tools import error_result

        self._session = ctx.session
        progress = _progress(ctx)
        report = None if progress is None else progress.report
        while True:
            side = await self._current()
            if progress is not None:
                progress.next_side()
            gone: DeskGone | None = None
            waits = int(name == tool_names.WAIT_FOR_ANSWERS)
            with trio.CancelScope() as scope:
                side.calls.add(scope)
                side.waits += waits
                try:
                    return await self._call_on(side, name, arguments, report)
                except DeskGone as failure:
                    gone = failure
                finally:
                    side.calls.discard(scope)
                    side.waits -= waits
                    side.changes.note()
            if gone is not None:
                await self._desk_failed(side)
                return error_result(_gone_text(gone))
            # The side changed under the call (``_leave`` cancelled it).
            if name != tool_names.WAIT_FOR_ANSWERS:
                return error_result(side.left_because)

    # -- one call on one side ------------------------------------------------------------------

    async def _call_on(
        self,
        side: _Side,
        name: str,
        arguments: dict[str, Any] | None,
        report: ReportProgress | None,
    ) -> types.CallToolResult:
        waits = tool_names.waits_for_person(name, arguments)
        if side.upstream is not None:
            from pi_agent_ask.mcp_common.tools import progress_ticks, relative_export_path

            relative = relative_export_path(name, arguments)
            if relative is not None and isinstance(arguments, Mapping):
                # The agent's working directory is this server's; the desk's is not.
                arguments = {**arguments, "path": str(self.cwd / relative)}

            upstream = side.upstream
            if not waits:
                return await forward_call(upstream, name, arguments)
            async with progress_ticks(report, self.progress_interval):
                return await self._person.unless_closed(
                    lambda: forward_call(upstream, name, arguments)
                )
        self._attach(side)
        tools: AgentTools = side.local.tools
        if not side.local.keep:
            result = await tools.call_tool(name, arguments, report_progress=report)
            if side.local.runtime.mode != "tui" and name == tool_names.ASK_USER and _taken(result):
                self.log(NO_FORMS_LOG)  # the non-TUI fallback: the agent is told the same
            return result
        if name == tool_names.ASK_USER and (side.local.in_memory or self.session_given):
            from pi_agent_ask.form.validate import validate_ask_params

            # A call the runtime refuses keeps nothing: the agent hears what is wrong with it,
            # not to have the user start a desk that would refuse the same call. Checked as in
            # background-only mode, which drops ``background``: so no call the runtime would
            # queue (whatever its mode) passes here to be kept where no desk looks.
            if not validate_ask_params(arguments, background_only=True).ok:
                return await tools.call_tool(name, arguments)
        if name == tool_names.ASK_USER and side.local.in_memory:
            from pi_agent_ask.mcp_common.tools import error_result

            self.log(SHARED_LOG.format(key=self.key))
            return error_result(SHARED_TEXT.format(key=self.key))
        if name == tool_names.ASK_USER and self.session_given:
            # Kept in the --session file, a question would wait for a desk that never looks
            # there (the desk keeps its own journals): refused, as for a journal in memory.
            from pi_agent_ask.mcp_common.tools import error_result

            self.log(UNSEEN_LOG)
            return error_result(UNSEEN_TEXT)
        if name == tool_names.ASK_USER and isinstance(arguments, Mapping):
            given = arguments.get("background", False)
            if isinstance(given, bool):
                arguments = {**arguments, "background": True}
            # Any other ``background`` goes as it came, for the schema to refuse.
            result = await tools.call_tool(name, arguments)
            return self._kept(result, background=given is True)
        if name == tool_names.WAIT_FOR_ANSWERS:
            stats = await side.local.runtime.statistics()
            if stats.pending:
                self.log(WAIT_LOG)
        return await tools.call_tool(name, arguments, report_progress=report)

    def _kept(self, result: types.CallToolResult, *, background: bool) -> types.CallToolResult:
        """A queued receipt of a kept form, saying what helps (and logging it)."""
        receipt = result.structured_content or {}
        if result.is_error or receipt.get("status") != "queued":
            return result
        request_id = str(receipt.get("requestId"))
        self.log(KEPT_LOG.format(request_id=request_id))
        if background:
            hint = types.TextContent(type="text", text=KEPT_HINT)
            return result.model_copy(update={"content": [*result.content, hint]})
        text = types.TextContent(type="text", text=KEPT_TEXT.format(request_id=request_id))
        # Other blocks (background answers appended) stay; the receipt's own text is replaced.
        return result.model_copy(update={"content": [text, *result.content[1:]]})

    def _attach(self, side: _Side) -> None:
        """Give a local side's elicitation surface the client's session (once it is known)."""
        surface = side.local.surface
        if side.attached or surface is None or self._session is None:
            return
        side.attached = True
        session = self._session

        async def elicit(message: str, schema: dict[str, Any]) -> types.ElicitResult:
            result: types.ElicitResult = await session.elicit_form(message, schema)
            return result

        side.local.nursery.start_soon(surface.serve, elicit, session.protocol_version)

    # -- choosing the side ---------------------------------------------------------------------

    def _changed(self) -> None:
        """The connection file changed between calls: settle now (in the background)."""
        assert self._nursery is not None
        self._nursery.start_soon(self._settle_in_background)

    async def _settle_in_background(self) -> None:
        """``_settle`` with no call to report to: a journal that cannot be opened is said on
        standard error (``_enter``), and the next call tries again and gets the error."""
        with contextlib.suppress(MCPError):
            await self._settle()

    async def _current(self) -> _Side:
        """The side to call now; after a move that is in progress (the lock), never a side
        that is closing. A local side letting the client's forms end before a move is not
        closing yet: it serves without waiting for the move."""
        if self._side is None or self._seen != _signature(self.desk_file):
            await self._settle()
        side = self._side
        if side is not None and side.draining:
            # Its calls are cut when the move goes on, like those in flight before it (the
            # caller registers its call with no checkpoint after this return).
            return side
        async with self._lock:
            assert self._side is not None
            return self._side

    async def _settle(self) -> None:
        """Look at the connection file (when it changed) and move to the side it says."""
        # Shielded: a call cut by its client must not leave the server between two sides.
        with trio.CancelScope(shield=True):
            async with self._lock:
                signature = _signature(self.desk_file)
                if self._side is not None and signature == self._seen:
                    return
                self._seen = signature
                wanted = await self._wanted()
                side = self._side
                reopen, self._reopen = self._reopen, ""
                if side is not None and side.is_desk:
                    reopen = ""  # the client's elicitation failed after its side was left
                if side is not None and side.address == wanted and not reopen:
                    return
                if side is not None:
                    if reopen:
                        side.left_because = reopen
                        if self.desk == "off" and side.local is not None:
                            self._handed += await hand_over(
                                side.local, side.changes, lambda: side.waits
                            )
                    elif wanted is not None:
                        side.left_because = MOVED_TEXT.format(what="started", where="there")
                        await self._let_client_forms_end(side)
                    else:
                        side.left_because = MOVED_TEXT.format(
                            what="stopped", where="by the next desk"
                        )
                    await self._leave(side)
                self._side = None  # until one is entered (a journal refused leaves none)
                self._side = await self._enter(wanted)

    async def _wanted(self) -> DeskAddress | None:
        if self.desk == "off":
            return None
        if self.desk != "auto":
            return DeskAddress(url=self.desk, token=self.token or "", pid=os.getpid())
        try:
            return await find_desk(path=self.desk_file)
        except Exception as error:  # a desk that cannot be asked is a desk that is not there
            self.log(f"pi-agent-ask: not using the desk: {error}")
            return None

    async def _enter(self, address: DeskAddress | None) -> _Side:
        assert self._nursery is not None
        if address is None:
            from pi_agent_ask.persistence.session_values import SessionFileError

            side = _Side(address=None)
            try:
                side.local = await self._nursery.start(self._hold_local, side)
            except (SessionFileError, OSError) as error:
                raise self._journal_refused(error) from error
            # Show the forms in the client now (once a call told its session), not at the
            # agent's next call: after a desk stops, an idle agent makes none.
            self._attach(side)
            if self._person.closed.is_set():
                self._end_waits(side)
            return side
        side = _Side(address=address)
        side.upstream = DeskUpstream(
            url=address.url,
            token=address.token,
            key=self.key,
            nursery=self._nursery,
            desk_file=self.desk_file,
        )
        if self.desk == "auto":
            # The desk opens this agent's journal on its first request: ask now, so the forms
            # kept meanwhile appear on it before the agent's next call.
            self._nursery.start_soon(self._greet, side)
        if self.serve_hooks is not None:
            self._nursery.start_soon(self._serve_desk_hooks, side, self.serve_hooks)
        else:
            side.hooks_closed.set()
        return side

    def _journal_refused(self, error: SessionFileError | OSError) -> MCPError:
        """The JSON-RPC error of every request while the local side's journal cannot be opened
        (said once on standard error as well)."""
        from pi_agent_ask.persistence.session_values import SessionFileError

        reason: str
        if isinstance(error, SessionFileError):
            path, reason, why = error.path, error.reason, str(error)
        else:
            path, reason = error.filename, "cannot-open"
            why = f"{error.filename}: {error.strerror or error}"
        hint = SESSION_HINT if self.session_given else STATE_HINT
        text = JOURNAL_REFUSED_TEXT.format(why=why, hint=hint)
        if text != self._refused:
            self._refused = text
            self.log(JOURNAL_REFUSED_LOG.format(why=why, hint=hint))
        data = {"path": None if path is None else os.fspath(path), "reason": reason}
        return MCPError(INTERNAL_ERROR, text, data)

    async def _serve_desk_hooks(
        self, side: _Side, serve: Callable[[TakeForHook], Awaitable[None]]
    ) -> None:
        """The hook socket while ``side`` forwards to a desk: each take is the desk's, from
        its runtime of this agent (``_leave`` closes it before the next side opens its own)."""
        assert side.upstream is not None
        try:
            with side.hooks:
                await serve(desk_take(side.upstream, self.log))
        finally:
            side.hooks_closed.set()

    async def _greet(self, side: _Side) -> None:
        assert side.upstream is not None
        with contextlib.suppress(DeskGone, Exception):
            await forward_list(side.upstream)

    def _elicitation_failed(self, why: str) -> None:
        """The client's form failed (it answered an elicitation with an error, or the form
        refused its answers every time, ``elicitation.py``): it cannot show forms after all,
        so from now on they are kept for a desk (the form it failed on stays pending), or with
        ``--desk off`` the questions go back to the agent (the form it failed on ended as not
        asked: ``ElicitationSurface.end_unusable``)."""
        off = self.desk == "off"
        self.log((ELICITATION_FAILED_OFF_LOG if off else ELICITATION_FAILED_LOG).format(why=why))
        if not self.elicitation:
            return
        self.elicitation = False
        self._reopen = (ELICITATION_FAILED_OFF_TEXT if off else ELICITATION_FAILED_TEXT).format(
            why=why
        )
        self._seen = None
        assert self._nursery is not None
        self._nursery.start_soon(self._settle_in_background)

    async def _hold_local(self, side: _Side, *, task_status: trio.TaskStatus[Any]) -> None:
        keep = not self.elicitation and self.desk != "off"
        if self.state_dir is not None and self.desk == "auto":
            # A desk that is stopping removed its file first and closes the journals last:
            # the journal is this server's once no desk holds the state directory.
            with trio.move_on_after(HANDOVER_TIMEOUT):
                await trio.to_thread.run_sync(
                    wait_until_free, self.state_dir, abandon_on_cancel=True
                )
        from pi_agent_ask.mcp_server.elicitation import UNUSABLE_KEPT, UNUSABLE_TO_AGENT

        try:
            # The client's form, until it fails (``_elicitation_failed``): then forms are
            # kept for a desk, or with ``--desk off`` the questions go back to the agent.
            async with self.open_local(
                keep,
                self.elicitation,
                self._elicitation_failed,
                UNUSABLE_TO_AGENT if self.desk == "off" else UNUSABLE_KEPT,
            ) as local:
                task_status.started(local)
                await side.close.wait()
        finally:
            side.closed.set()

    async def _let_client_forms_end(self, side: _Side) -> None:
        """Before a local side is left for a desk: the forms the client shows stay there until
        the person answers or dismisses them (their answers reach the journal the desk opens
        next, and the desk never shows them again); no new form is shown there. The side
        serves calls meanwhile."""
        from pi_agent_ask import events as ev

        surface = side.local.surface if side.local is not None else None
        if surface is None:
            return
        if surface.showing:
            self.log(DRAIN_LOG)
        side.draining = True

        def on_completed(payload: Any) -> None:
            if isinstance(payload, Mapping) and isinstance(payload.get("flowId"), str):
                surface.recorded(payload["flowId"])

        # Subscribed before ``finish``: every outcome decided in the client comes after this.
        unsubscribe = side.local.runtime.events.on(ev.COMPLETED, on_completed)
        try:
            with trio.CancelScope() as self._drain:
                await surface.finish()
                if surface.unrecorded:
                    # The person decided in the client and the journal lost it: the form goes
                    # to the desk, and a call waiting on it says why it is asked again.
                    self.log(UNRECORDED_LOG)
                    side.left_because = UNRECORDED_TEXT
                # A foreground ask whose answer is recorded returns it (instead of being cut
                # below as a call that still waits for the person).
                await side.local.tools.wait_answered_returned()
        finally:
            unsubscribe()
            self._drain = None
            side.draining = False

    async def _leave(self, side: _Side, *, shielded: bool = False) -> None:
        """Cancel the calls on ``side`` and close it (a local side's journal is closed when
        this returns, so a desk can open it)."""
        for scope in list(side.calls):
            scope.cancel()
        side.close.set()
        if side.upstream is not None:
            side.hooks.cancel()
            with trio.CancelScope(shield=shielded):
                await side.hooks_closed.wait()
            if shielded:
                # The server's end, the desk still there: end the session there, so the desk
                # frees it now. Any other move leaves a desk that is gone: nothing to end.
                with trio.CancelScope(shield=True):
                    await side.upstream.close()
            else:
                side.upstream.reset()
            side.closed.set()
            return
        with trio.CancelScope(shield=shielded):
            await side.closed.wait()

    async def _desk_failed(self, side: _Side) -> None:
        """A call found the desk gone: look again (the file may be stale) on the next call."""
        if self._side is side and self.desk == "auto":
            self._seen = None
            await self._settle()


def _taken(result: types.CallToolResult) -> bool:
    """Whether an ``ask_user`` result is of a call the runtime took (it names its request),
    not one it refused as invalid (a tool error, or issues and no request)."""
    return not result.is_error and "requestId" in (result.structured_content or {})


def _questions(request_ids: tuple[str, ...]) -> str:
    """``the question (requestId X) stays`` / ``the questions (requestIds X, Y) stay``."""
    if len(request_ids) == 1:
        return f"the question (requestId {request_ids[0]}) stays"
    return f"the questions (requestIds {', '.join(request_ids)}) stay"


def _gone_text(gone: DeskGone) -> str:
    """What the agent is told of a desk that did not answer: its refusal of the token in its
    own words, else that it stopped."""
    return str(gone) if gone.refused else DESK_STOPPED_TEXT


@attrs.define(eq=False)
class _Progress:
    """The progress of one call, which may wait on several sides in turn: each side counts
    its seconds from zero, and MCP requires every value of a request to be larger than the
    one before, so a side's count goes on from what the earlier sides sent."""

    send: ReportProgress
    """The session's ``report_progress``."""
    sent: float = 0.0
    base: float = 0.0

    def next_side(self) -> None:
        self.base = self.sent

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        self.sent = progress_plus(self.base, progress)
        await self.send(self.sent, total, message)


def _progress(ctx: Any) -> _Progress | None:
    """The call's progress when it asked for progress (``progress_reporter``), else ``None``."""
    send = progress_reporter(ctx)
    return None if send is None else _Progress(send)
