"""One agent's pi-agent-ask tools on one runtime, in MCP's terms.

``AgentTools(runtime, *, progress_interval=PROGRESS_INTERVAL)`` serves the tools of one agent
(one MCP connection on the stdio server, one agent key on the desk) on one ``Runtime`` from
``open_runtime``. It is transport-free: the stdio server and the desk both put it behind their
``tools/list`` and ``tools/call`` handlers. Use one ``AgentTools`` per runtime (it owns the
runtime's turn boundary). Forms need a ``tui``-mode runtime with a surface that shows them
(a terminal, ``NullSurface`` plus submit events, or ``elicitation.ElicitationSurface``).

- ``list_tools() -> list[mcp.types.Tool]``: the tools the settings expose now, with the
  contract's ``inputSchema`` and ``outputSchema`` and MCP ``annotations`` (a schema root
  without ``type`` gets ``"type": "object"``, which MCP requires; the contract's output
  schemas are an ``anyOf`` of objects, so nothing else changes).
- ``await call_tool(name, arguments, *, report_progress=None, tool_call_id=None)
  -> mcp.types.CallToolResult``: content, ``structuredContent`` and ``isError`` as the
  runtime's result dict has them. ``report_progress(progress, total, message)`` is awaited
  every ``progress_interval`` seconds while a foreground ``ask_user`` or a
  ``wait_for_answers`` waits for the person (pass it only when the client gave a
  ``progressToken``); a failing callback stops the ticks, never the call. Malformed arguments
  and unexpected failures are tool errors (``isError``), never exceptions; ``None`` (a call
  without MCP's optional ``arguments``) is ``{}``.
- ``await take_background_answers() -> list[dict]``: the waiting background answers, marked
  delivered; each is ``{"customType", "text", "details"}`` (``details``: ``{requestId,
  parentToolCallId?, result?, error?}``). ``await take_background_messages(text_only=False)``
  gives the turn-boundary messages themselves (what the Claude Code hook fetches; with
  ``text_only`` the ones with image blocks stay for a tool result), and
  ``await give_back(messages)`` returns taken messages that could not be handed on: they are
  journaled as given back (``Runtime.give_back``) and come first in the next result or take,
  also after a restart (kept in memory only when that write fails).
- ``awaited_requests``: the request ids of the foreground asks waiting now (a desk can mark
  exactly the forms its agent is blocked on); ``on_awaiting()``, when set, is called each
  time they change.
- ``end_waits(ended)``: no person will answer through this server any more (its client closed
  its input): every call that waits for the person, now or later, returns ``ended(request
  ids)`` instead (the forms stay queued; ``request ids``: the requests it waited for), while
  calls that need no person (a ``wait_for_answers`` with nothing pending) go on as before.
- ``close()``: unsubscribe from the runtime's events (also ``with AgentTools(...) as tools``).

Background answers: MCP cannot push into a model's context, so every answer the runtime's turn
boundary hands out is appended to the result of the agent's next call of any of these tools,
exactly once: as one extra text block (plus its image blocks) in ``content``, and in
``structuredContent`` under ``BACKGROUND_ANSWERS`` (``"backgroundAnswers"``, a list of the
entries above; an additive key: the output schemas allow unknown keys). ``AgentTools`` marks
the agent busy at once (``agent_started``) and never settles it: an idle runtime would hand
answers to ``runtime.wakeups``, which nobody reads over MCP.

Foreground ``ask_user`` in ``tui`` mode runs as a *background* ask plus a wait for exactly that
request (the runtime closes a cancelled foreground form as cancelled; a client that cuts a long
call must not lose the form). The call waits for the request's ``pi-agent-ask:completed``
event, then takes the turn boundary: the answer becomes this call's result (``content``,
``details``-free ``structuredContent`` as a foreground result has it) and any other waiting
answers are appended. When the client cuts the call (cancellation, connection gone) the form
stays queued and its answer arrives later like any background answer: through
``wait_for_answers``, the next tool result or a hook, never lost and never twice. A boundary
taken by someone else meanwhile (a hook, a concurrent call) hands that answer to the waiting
call; a concurrent ``wait_for_answers`` takes it into its own result, and the waiting call
then says so (an ``isError`` result naming the request). In the journal such a form is a
background request. Outside ``tui`` mode (``json``/``rpc``: the non-TUI fallback, or an
external UI) calls go to the runtime unchanged.

Limit: a form that ends with an *error* outcome (its surface broke: ``Runtime.surface_failed``)
emits no ``pi-agent-ask:completed`` event, so a foreground call waiting for it goes on waiting
until the client cuts it; the error then arrives like a background answer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp.types as types
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.form import text as texts
from pi_agent_ask.form import tools as tool_names
from pi_agent_ask.form.result import BackgroundOutcome
from pi_agent_ask.mcp_common import PROGRESS_INTERVAL, progress_plus
from pi_agent_ask.mcp_common.answers import answer_entry
from pi_agent_ask.mcp_common.closing import CutOnClose

BACKGROUND_ANSWERS = "backgroundAnswers"
"""The ``structuredContent`` key of the background answers appended to a tool result."""
PROGRESS_MESSAGE = "Waiting for the user's answer"
ELSEWHERE_TEXT = (
    "The answer to ask_user [{request_id}] was already delivered with another tool result "
    "(backgroundAnswers or wait_for_answers); look for that requestId there."
)
INTERNAL_ERROR_TEXT = "pi-agent-ask internal error: {error}"
NO_FORMS_HEAD = (
    "Needs user input: this MCP server cannot show a form (it uses no pi-agent-ask desk, and "
    "the MCP client has no form elicitation, or its form could not be used). Ask the user "
    "these questions yourself:"
)
NO_FORMS_TAIL = (
    "Nothing was answered (structuredContent: cancelled, no answers). To answer in a form "
    "instead, the user runs `pi-agent-ask desk` in a terminal and this server without "
    "`--desk off`: forms are then kept for the desk until answered."
)
NO_FORMS_WAIT_TEXT = (
    "wait_for_answers has nothing to wait for: this MCP server cannot show forms (it uses no "
    "pi-agent-ask desk, and the MCP client has no form elicitation, or its form could not be "
    "used). To answer in forms, the user runs `pi-agent-ask desk` in a terminal and this "
    "server without `--desk off`."
)
"""The non-TUI fallback in MCP's words: the contract's text speaks of the host's interactive
TUI mode and of ``details``, which an MCP client has neither of."""
BACKGROUND_HEAD = "Background answers that arrived meanwhile:"

ReportProgress = Callable[[float, float | None, str | None], Awaitable[None]]
WaitsEnded = Callable[[tuple[str, ...]], types.CallToolResult]
"""The result of a call that waited for the person once no person answers (``end_waits``)."""


def _object_root(schema: Mapping[str, Any]) -> dict[str, Any]:
    # MCP requires ``"type": "object"`` at a tool schema's root; the contract's output schemas
    # are an ``anyOf`` of objects there, so saying it once more changes nothing they accept.
    return dict(schema) if "type" in schema else {"type": "object", **schema}


def _optional_object_root(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if schema is None else _object_root(schema)


def mcp_tool(definition: Mapping[str, Any]) -> types.Tool:
    """An MCP ``Tool`` from one of the runtime's tool definitions: the shape
    ``tool_definitions(format="mcp")`` gives (title, annotations, exposure), as the SDK's type."""
    [shape] = tool_names.in_format([dict(definition)], "mcp")
    return types.Tool(
        name=shape["name"],
        title=shape["title"],
        description=shape["description"],
        input_schema=_object_root(shape["inputSchema"]),
        output_schema=_optional_object_root(shape.get("outputSchema")),
        annotations=types.ToolAnnotations.model_validate(shape["annotations"]),
        _meta=shape["_meta"],
    )


def call_tool_result(result: Mapping[str, Any]) -> types.CallToolResult:
    """The MCP result of a runtime tool result dict (``details`` stays in the journal)."""
    data: dict[str, Any] = {"content": list(result.get("content", []))}
    if "structuredContent" in result:
        data["structuredContent"] = result["structuredContent"]
    data["isError"] = bool(result.get("isError", False))
    return types.CallToolResult.model_validate(data)


RELATIVE_EXPORT_TEXT = (
    "export_ask_history on the pi-agent-ask desk needs an absolute path, not {path!r}: the "
    "desk does not know this agent's working directory. (Through `pi-agent-ask mcp`, a "
    "relative path is taken in the agent's directory.)"
)


def relative_export_path(name: str, arguments: Any) -> str | None:
    """The ``path`` of an ``export_ask_history`` call when it is a relative one (a path the
    runtime would take in its own working directory), else ``None``."""
    if name != tool_names.EXPORT_ASK_HISTORY or not isinstance(arguments, Mapping):
        return None
    path = arguments.get("path")
    return path if isinstance(path, str) and path and not Path(path).is_absolute() else None


def given_arguments(arguments: Any) -> Any:
    """A call's arguments as the runtime takes them: MCP's ``arguments`` is optional, and a
    call without it (``None`` from the SDK) has no arguments, ``{}``."""
    return {} if arguments is None else arguments


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def in_mcp_words(result: types.CallToolResult) -> types.CallToolResult:
    """A result of the non-TUI fallback (an ``ask_user`` that returns its questions as text,
    a refused ``wait_for_answers``) with the contract's host words in MCP's
    (``NO_FORMS_HEAD``, ``NO_FORMS_TAIL``, ``NO_FORMS_WAIT_TEXT``); any other result as it is."""
    content: list[Any] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            text = block.text
            if text == texts.WAIT_NON_TUI_TEXT:
                text = NO_FORMS_WAIT_TEXT
            elif texts.FALLBACK_HEAD in text:
                text = text.replace(texts.FALLBACK_HEAD, NO_FORMS_HEAD)
                text = text.replace(texts.FALLBACK_TAIL, NO_FORMS_TAIL)
            block = block.model_copy(update={"text": text}) if text != block.text else block
        content.append(block)
    return result.model_copy(update={"content": content})


def _image_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return []
    return [
        dict(block)
        for block in content or ()
        if isinstance(block, Mapping) and block.get("type") == "image"
    ]


def with_background_answers(
    result: types.CallToolResult, messages: list[dict[str, Any]]
) -> types.CallToolResult:
    """``result`` with ``messages`` appended (text block, image blocks, structured entries)."""
    if not messages:
        return result
    entries = [answer_entry(message) for message in messages]
    text = "\n\n".join([BACKGROUND_HEAD, *(entry["text"] for entry in entries)])
    extra: list[Any] = [types.TextContent(type="text", text=text)]
    for message in messages:
        extra.extend(types.ImageContent.model_validate(b) for b in _image_blocks(message))
    structured = dict(result.structured_content or {})
    structured[BACKGROUND_ANSWERS] = [*structured.get(BACKGROUND_ANSWERS, []), *entries]
    return result.model_copy(
        update={"content": [*result.content, *extra], "structured_content": structured}
    )


@attrs.define(eq=False)
class AgentTools:
    """One agent's tools on one runtime; see the module docstring for the interface."""

    runtime: Any
    """The ``Runtime`` (``pi_agent_ask.actors.runtime``) this agent's calls run on."""
    progress_interval: float = attrs.field(default=PROGRESS_INTERVAL, kw_only=True)
    on_awaiting: Callable[[], None] | None = attrs.field(default=None, kw_only=True)
    """Called when ``awaited_requests`` changed (a desk redraws what its agent is blocked on)."""
    _by_call: dict[str, _Waiter] = attrs.field(factory=dict, init=False)
    """Foreground asks in flight by tool-call id (their completion event names it)."""
    _by_request: dict[str, _Waiter] = attrs.field(factory=dict, init=False)
    """The same asks by request id (a boundary taken elsewhere routes their answer here)."""
    _boundary_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _unsubscribe: Callable[[], None] | None = attrs.field(default=None, init=False)
    _carry: list[dict[str, Any]] = attrs.field(factory=list, init=False)
    """Messages marked delivered whose call was cut before it could return them, and whose
    give-back could not be journaled (``give_back``); normally empty."""
    _ended: WaitsEnded | None = attrs.field(default=None, init=False)
    _person: CutOnClose = attrs.field(factory=lambda: CutOnClose(), init=False)
    """The waits for the person in flight, cut by ``end_waits`` (which sets ``_ended``)."""

    def __attrs_post_init__(self) -> None:
        # Never idle: an idle runtime hands answers to ``wakeups``, which MCP cannot deliver.
        self.runtime.agent_started()
        self._unsubscribe = self.runtime.events.on(ev.COMPLETED, self._on_completed)

    def __enter__(self) -> AgentTools:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _on_completed(self, payload: Any) -> None:
        if isinstance(payload, Mapping):
            waiter = self._by_call.get(payload.get("toolCallId"))  # type: ignore[arg-type]
            if waiter is not None:
                waiter.ready.set()

    def end_waits(self, ended: WaitsEnded) -> None:
        """From now on, a call that waits for the person returns ``ended(request ids)``."""
        if self._ended is None:
            self._ended = ended
            self._person.close()

    @property
    def awaited_requests(self) -> frozenset[str]:
        """Request ids of the foreground asks waiting now (the agent is blocked on these)."""
        return frozenset(self._by_request)

    # -- listing -------------------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        return [mcp_tool(definition) for definition in self.runtime.tool_definitions()]

    # -- calls ---------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        *,
        report_progress: ReportProgress | None = None,
        tool_call_id: str | None = None,
    ) -> types.CallToolResult:
        call_id = tool_call_id or f"mcp-{uuid.uuid4().hex}"
        arguments = given_arguments(arguments)
        try:
            if self._runs_as_background(name, arguments):
                return await self._foreground_ask(call_id, arguments, report_progress)
            if name == tool_names.WAIT_FOR_ANSWERS:
                async with self._progress(report_progress):
                    waited = await self._wait_for_answers(arguments, call_id)
                if isinstance(waited, types.CallToolResult):  # ended: no person answers here
                    return with_background_answers(waited, await self._handed_out())
                result = waited
            else:
                result = await self.runtime.call_tool(name, arguments, tool_call_id=call_id)
            out = call_tool_result(result)
            if self.runtime.mode != "tui":
                out = in_mcp_words(out)
        except Exception as error:  # a bug must be an error result, never a dead server
            out = error_result(INTERNAL_ERROR_TEXT.format(error=f"{type(error).__name__}: {error}"))
        return with_background_answers(out, await self._handed_out())

    async def take_background_answers(self) -> list[dict[str, Any]]:
        return [answer_entry(message) for message in await self._handed_out()]

    async def take_background_messages(self, *, text_only: bool = False) -> list[dict[str, Any]]:
        """The waiting turn-boundary messages themselves, marked delivered (``text_only``:
        those without image blocks; the others wait for a tool result)."""
        return await self._handed_out(text_only=text_only)

    async def give_back(self, messages: list[dict[str, Any]]) -> None:
        """Messages taken but not handed on (a cut call, a hook's broken connection): the next
        tool result or take returns them first. They are journaled as given back, so they
        survive a restart; when that write fails they are kept here instead. Shielded: it
        runs in cleanups of cancelled calls."""
        if not messages:
            return
        with trio.CancelScope(shield=True):
            try:
                await self.runtime.give_back(messages)
                return
            except Exception:  # the write failed (the disk, the runtime closing): keep them
                pass
        self._carry = [*messages, *self._carry]

    async def _handed_out(
        self, own: str | None = None, *, text_only: bool = False
    ) -> list[dict[str, Any]]:
        """The boundary's messages, for a caller that returns them with no checkpoint after.

        The boundary marks them delivered. An answer another foreground ask in flight waits
        for goes to that ask instead (``own``: the caller's own request, kept). A call cut at
        the one checkpoint here gives back what it took (``give_back``) instead of dropping
        it with its result; after it, the caller returns straight to the transport, which
        writes the result unless the client cancelled in between (a window of no
        checkpoints)."""
        async with self._boundary_lock:
            carried: list[dict[str, Any]] = []
            kept_back: list[dict[str, Any]] = []
            for message in self._carry:
                held = text_only and texts.has_image_blocks(message)
                (kept_back if held else carried).append(message)
            self._carry = kept_back
            taken = [*carried, *await self.runtime.turn_boundary(text_only=text_only)]
        kept = []
        for message in taken:
            request_id = _request_id(message)
            waiter = self._by_request.get(request_id)
            if waiter is not None and request_id != own and waiter.message is None:
                waiter.message = message
                waiter.ready.set()
            else:
                kept.append(message)
        try:
            # A cancel point and nothing else (trio.sleep(0) as ruff asks it spelled): a
            # caller cancelled here gives the messages back.
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            await self.give_back(kept)
            raise
        return kept

    def _runs_as_background(self, name: str, arguments: Any) -> bool:
        return (
            name == tool_names.ASK_USER
            and self.runtime.mode == "tui"
            and not self.runtime.config.background_only
            and isinstance(arguments, Mapping)
            and arguments.get("background", False) is False
            and name in self.runtime.tool_names()
        )

    async def _foreground_ask(
        self, call_id: str, arguments: Mapping[str, Any], report_progress: ReportProgress | None
    ) -> types.CallToolResult:
        waiter = self._by_call[call_id] = _Waiter()
        request_id: str | None = None
        try:
            queued = await self.runtime.call_tool(
                tool_names.ASK_USER, {**arguments, "background": True}, tool_call_id=call_id
            )
            receipt = queued.get("structuredContent")
            if queued.get("isError") or not (
                isinstance(receipt, Mapping) and receipt.get("status") == "queued"
            ):
                # A schema or semantic failure: nothing was queued; the result says why.
                return with_background_answers(call_tool_result(queued), await self._handed_out())
            request_id = str(receipt["requestId"])
            self._by_request[request_id] = waiter
            self._awaiting_changed()
            stats = await self.runtime.statistics(params_of=(request_id,))
            params = dict(stats.params).get(request_id)
            async with self._progress(report_progress):
                with self._person.cut_on_close():
                    await waiter.ready.wait()
            if not waiter.ready.is_set() and self._ended is not None:
                # No person answers here any more: the form stays queued.
                return with_background_answers(self._ended((request_id,)), await self._handed_out())
            # Two tries: the completion event fires just before the queue records the
            # outcome; the second boundary is a round trip behind that record.
            messages: list[dict[str, Any]] = []
            for _attempt in range(2):
                if waiter.message is None:
                    messages = await self._handed_out(own=request_id)
                if waiter.message is not None:
                    # Another call's boundary took this answer and routed it here.
                    own, waiter.message = waiter.message, None
                    return with_background_answers(_as_foreground(own, params), messages)
                mine = [m for m in messages if _request_id(m) == request_id]
                if mine:
                    others = [m for m in messages if _request_id(m) != request_id]
                    return with_background_answers(_as_foreground(mine[0], params), others)
                if messages:
                    break
            return with_background_answers(
                error_result(ELSEWHERE_TEXT.format(request_id=request_id)), messages
            )
        finally:
            # From here on (and when the call is cut before this) the answer is an ordinary
            # background answer: it stays queued for the next boundary or wait; one already
            # routed here goes back to the next call.
            del self._by_call[call_id]
            if request_id is not None:
                self._by_request.pop(request_id, None)
                self._awaiting_changed()
            if waiter.message is not None:
                await self.give_back([waiter.message])
            waiter.returned.set()

    async def _wait_for_answers(
        self, arguments: Any, call_id: str
    ) -> dict[str, Any] | types.CallToolResult:
        """The runtime's ``wait_for_answers``; once ``end_waits`` was called, that call's
        ``ended`` result when the wait needs the person (a request is pending). A wait in
        flight then is cut (answers it held go back to delivery; the forms stay queued) and
        looked at again."""
        with self._person.cut_on_close() as wait:
            result: dict[str, Any] = await self.runtime.call_tool(
                tool_names.WAIT_FOR_ANSWERS, arguments, tool_call_id=call_id
            )
        if not wait.cancelled_caught:
            return result
        assert self._ended is not None
        stats = await self.runtime.statistics()
        if stats.pending:
            return self._ended(tuple(stats.pending))
        # Nothing pending: it returns at once (with the answers the cut one gave back).
        return dict(
            await self.runtime.call_tool(
                tool_names.WAIT_FOR_ANSWERS, arguments, tool_call_id=call_id
            )
        )

    async def wait_answered_returned(self) -> None:
        """Return once every foreground ask whose answer has come has returned it: a server
        that leaves this runtime then cuts only the calls that still wait for the person."""
        for waiter in list(self._by_call.values()):
            if waiter.ready.is_set():
                await waiter.returned.wait()

    def _awaiting_changed(self) -> None:
        if self.on_awaiting is not None:
            self.on_awaiting()

    def _progress(self, report_progress: ReportProgress | None) -> Any:
        return progress_ticks(report_progress, self.progress_interval)


@attrs.define(eq=False)
class _Waiter:
    """A foreground ask in flight: ``ready`` is set when its request completed, or when another
    call's boundary took its answer (then in ``message``)."""

    ready: trio.Event = attrs.field(factory=trio.Event)
    message: dict[str, Any] | None = None
    returned: trio.Event = attrs.field(factory=trio.Event)
    """Set when its call has returned (or was cut)."""


def _as_foreground(message: Mapping[str, Any], params: Any) -> types.CallToolResult:
    """A foreground ``ask_user`` result from the background answer of its request."""
    outcome = BackgroundOutcome.from_json(message.get("details") or {})
    if outcome.result is None:
        return error_result(outcome.error or "Question form failed")
    return call_tool_result(texts.tool_result(outcome.result, params=params))


def _request_id(message: Mapping[str, Any]) -> Any:
    details = message.get("details")
    return details.get("requestId") if isinstance(details, Mapping) else None


@asynccontextmanager
async def progress_ticks(report: ReportProgress | None, interval: float) -> AsyncIterator[None]:
    """Progress notifications every ``interval`` seconds while the block runs: a timer task in
    the block's own nursery, cancelled when the block ends (no poll of any state)."""
    if report is None:
        yield
        return

    async def tick() -> None:
        elapsed = 0.0
        while True:
            await trio.sleep(interval)
            elapsed = progress_plus(elapsed, interval)
            try:
                await report(elapsed, None, PROGRESS_MESSAGE)
            except Exception:  # the client went away or refused: the call goes on silently
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        try:
            yield
        finally:
            nursery.cancel_scope.cancel()
