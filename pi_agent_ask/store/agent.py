"""One agent's tools on a team desk: ``ask_user`` and ``wait_for_answers`` over the store.

The agent's state is the store's, not the desk's: any desk of the store serves any agent, and
a call retried on another desk (``pi-agent-ask mcp --desk URL,URL``: same call key, in the
request's ``_meta``) resumes what the first attempt started. Per call:

- ``ask_user``: validated as everywhere (``form/validate.py``), then the request keyed by
  ``(agent, call key)`` (asked once however often the call is retried). A background ask
  answers with the receipt; a foreground ask waits for its own outcome and takes it with the
  call key ``KEY/own``. When the call ends without it (the client went away), the request
  becomes a background one, so its answer arrives later, like any background answer.
- ``wait_for_answers``: waits until none of the agent's background requests is pending, then
  takes every undelivered background outcome with the call key. While it waits, the store
  has a mark of it (a lease, extended as a claim's is), so every desk shows the agent blocked
  on its pending forms, whichever desk serves the call.
- ``list_ask_history``, ``read_ask_history`` (when the desk's settings turn the history tools
  on, as on a desk of files): the agent's own requests and outcomes, read under its own key
  (``store/history.py``);
- every result carries the background answers taken with the call key (``backgroundAnswers``,
  as on a desk of files).

Waits sleep on :class:`~pi_agent_ask.store.wakes.Wakes` (``LISTEN``), never on a timer.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from typing import Any, Final, TypeGuard

import attrs
import mcp.types as types
import psycopg
import trio

from pi_agent_ask.form import text as texts
from pi_agent_ask.form import tools as tool_names
from pi_agent_ask.form.result import AskResult, BackgroundOutcome, invalid_result
from pi_agent_ask.form.schema_check import schema_error_text, schema_refusal
from pi_agent_ask.form.types import AskParams
from pi_agent_ask.form.validate import params_from_saved, validate_ask_params
from pi_agent_ask.mcp_common import PROGRESS_INTERVAL
from pi_agent_ask.mcp_common.connection import CALL_KEY_META
from pi_agent_ask.mcp_common.tools import (
    ELSEWHERE_TEXT,
    ReportProgress,
    call_tool_result,
    error_result,
    given_arguments,
    mcp_tool,
    progress_ticks,
    with_background_answers,
)
from pi_agent_ask.store.board import HEARTBEAT, LEASE
from pi_agent_ask.store.db import Delivered, Store
from pi_agent_ask.store.history import TEAM_HISTORY_TOOLS, history_tool, team_records
from pi_agent_ask.store.wakes import AsyncStore, Wakes

__all__ = ["StoreAgentTools"]

OWN_SUFFIX: Final = "/own"
EXPORT_ELSEWHERE_TEXT: Final = (
    "export_ask_history is not offered by a team desk: the file would be written on the desk's "
    "host, not this agent's. Read the records with list_ask_history and read_ask_history, or "
    "export from the desk's web page (History)."
)
MAX_CALL_KEY: Final = 200
NUL_TEXT: Final = (
    "ask_user was not asked: {path} holds a NUL character (U+0000), which the team's store "
    "(PostgreSQL) cannot keep. Remove it (it often comes with text from a binary file) and ask "
    "again."
)


def _nul_at(value: object, path: str = "") -> str | None:
    """The path (``questions[0].prompt``) of the first key or text in ``value`` that holds
    NUL, which PostgreSQL's text and JSON cannot store; ``None`` when there is none."""
    if isinstance(value, str):
        return (path or "the form") if "\x00" in value else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                return where
            found = _nul_at(item, where)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def is_call_key(key: object) -> TypeGuard[str]:
    """Whether ``key`` can be a call key: printable text of 1 to ``MAX_CALL_KEY`` characters."""
    return isinstance(key, str) and 0 < len(key) <= MAX_CALL_KEY and key.isprintable()


def call_key_of(meta: object) -> str:
    """The call key the client sent (``is_call_key``), else a new one."""
    if isinstance(meta, Mapping) and is_call_key(key := meta.get(CALL_KEY_META)):
        return key
    return "desk-" + uuid.uuid4().hex


def _params(saved: Mapping[str, Any]) -> AskParams | None:
    return params_from_saved(saved)


def _outcome(delivered: Delivered) -> BackgroundOutcome:
    return BackgroundOutcome(delivered.request_id, result=AskResult.from_details(delivered.result))


@attrs.define(eq=False)
class StoreAgentTools:
    """The tools of agent ``key`` on the store (``list_tools``, ``call_tool``)."""

    store: AsyncStore
    wakes: Wakes
    key: str
    progress_interval: float = PROGRESS_INTERVAL
    history_tools: bool = False
    """Offer ``TEAM_HISTORY_TOOLS`` (the desk's ``behaviour.historyTools``)."""

    def list_tools(self) -> list[types.Tool]:
        definitions = tool_names.tool_definitions_for(history_tools=self.history_tools)
        return [
            mcp_tool(tool)
            for tool in definitions
            if tool["name"] not in tool_names.HISTORY_TOOLS or tool["name"] in TEAM_HISTORY_TOOLS
        ]

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        *,
        call_key: str,
        report_progress: ReportProgress | None = None,
    ) -> types.CallToolResult:
        arguments = given_arguments(arguments)
        if name == tool_names.ASK_USER:
            result = await self._ask(arguments, call_key, report_progress)
        elif name == tool_names.WAIT_FOR_ANSWERS:
            refused = schema_refusal(name, arguments)
            if refused is not None:
                result = error_result(refused)
            else:
                async with progress_ticks(report_progress, self.progress_interval):
                    return await self._wait(call_key)
        elif name == tool_names.EXPORT_ASK_HISTORY and self.history_tools:
            result = error_result(EXPORT_ELSEWHERE_TEXT)
        elif name in TEAM_HISTORY_TOOLS and self.history_tools:
            rows = await self.store.run(
                Store.requests_of, self.store.store, self.key, as_agent=True
            )
            result = await trio.to_thread.run_sync(
                lambda: history_tool(name, arguments, team_records(rows))
            )
        else:
            result = error_result(f"Unknown tool {name!r} on this desk.")
        return with_background_answers(result, await self._background(call_key))

    async def _background(self, call_key: str) -> list[dict[str, Any]]:
        return [message for _request, message in await self._taken(call_key)]

    async def _taken(self, call_key: str) -> list[tuple[str, dict[str, Any]]]:
        """The background answers the call ``call_key`` carries (``Store.take``): each
        request id with its turn-boundary message."""
        taken = await self.store.run(Store.take, self.store.store, self.key, call_key)
        return [
            (d.request_id, texts.background_answer_message(_outcome(d), params=_params(d.params)))
            for d in taken
        ]

    async def take_for_hook(self, call_key: str) -> list[dict[str, Any]]:
        """The background answers for the agent's Claude Code hook, taken under ``call_key``
        as a tool call takes them (the same key takes the same answers again). A hook adds text
        only: answers with images are given back at once, for the next tool result."""
        taken = await self._taken(call_key)
        with_images = [request for request, message in taken if texts.has_image_blocks(message)]
        if with_images:
            await self.store.run(Store.give_back, self.store.store, self.key, call_key, with_images)
        return [message for _request, message in taken if not texts.has_image_blocks(message)]

    async def give_back_hook(self, call_key: str) -> int:
        """Give back what the hook's take ``call_key`` carried (its reply was not passed on):
        the agent's next call takes it. Returns how many answers were given back."""
        return await self.store.run(Store.give_back, self.store.store, self.key, call_key)

    async def _ask(
        self, arguments: Any, call_key: str, report_progress: ReportProgress | None
    ) -> types.CallToolResult:
        validation = await trio.to_thread.run_sync(validate_ask_params, arguments)
        params = validation.params
        if params is None:
            if validation.schema_error:
                return error_result(schema_error_text(tool_names.ASK_USER, validation.issues))
            title = arguments.get("title") if isinstance(arguments, Mapping) else None
            return call_tool_result(texts.tool_result(invalid_result(title, validation.issues)))
        background = isinstance(arguments, Mapping) and arguments.get("background") is True
        saved = params.to_json()
        nul = _nul_at(saved)
        if nul is not None:
            return error_result(NUL_TEXT.format(path=nul))
        request_id, _background, _state = await self.store.run(
            Store.ask,
            self.store.store,
            self.key,
            call_key,
            saved,
            background=background,
        )
        if background:
            pending = await self.store.run(Store.pending_of, self.store.store, self.key)
            return call_tool_result(
                texts.receipt_tool_result(
                    request_id, [q.id for q in params.questions], len(pending)
                )
            )
        finished = False
        try:
            async with progress_ticks(report_progress, self.progress_interval):
                result = await self._own_answer(request_id, call_key + OWN_SUFFIX, params)
            finished = True
            return result
        finally:
            if not finished:
                with trio.CancelScope(shield=True):
                    await self.store.run(
                        Store.to_background, self.store.store, self.key, request_id
                    )

    async def _own_answer(
        self, request_id: str, own_key: str, params: AskParams
    ) -> types.CallToolResult:
        """Wait for the answer of this call's own request. While it waits, the request is
        made foreground again if it was made a background one (an earlier attempt of this
        call, on a desk that stopped under it), at the start and after each wake (that desk's
        change, which wakes the agent's calls, may come after this attempt began)."""
        while True:
            woken = self.wakes.agent(self.key)
            taken = await self.store.run(
                Store.take, self.store.store, self.key, own_key, request_id=request_id
            )
            if taken:
                result = AskResult.from_details(taken[0].result)
                return call_tool_result(texts.tool_result(result, params=params))
            state = await self.store.run(Store.waited_on, self.store.store, self.key, request_id)
            if state == "done":
                # Answered, and its answer already went out with another call of this agent.
                taken = await self.store.run(
                    Store.take, self.store.store, self.key, own_key, request_id=request_id
                )
                if taken:
                    continue
                return error_result(ELSEWHERE_TEXT.format(request_id=request_id))
            await woken.wait()

    async def _wait(self, call_key: str) -> types.CallToolResult:
        """``wait_for_answers``, marked in the store while it waits (every desk shows the
        agent's pending forms as blocking it), the mark extended like a claim's lease."""
        await self.store.run(Store.mark_wait, self.store.store, self.key, call_key, lease=LEASE)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keep_marked, call_key)
                result = await self._wait_for_answers(call_key)
                nursery.cancel_scope.cancel()
            return result
        finally:
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(5),
                contextlib.suppress(psycopg.OperationalError),
            ):
                # The store away: the mark's lease runs out by itself.
                await self.store.run(Store.unmark_wait, self.store.store, self.key, call_key)

    async def _keep_marked(self, call_key: str) -> None:
        while True:
            await trio.sleep(HEARTBEAT)
            with contextlib.suppress(psycopg.OperationalError):  # extended at the next beat
                await self.store.run(
                    Store.mark_wait, self.store.store, self.key, call_key, lease=LEASE
                )

    async def _wait_for_answers(self, call_key: str) -> types.CallToolResult:
        while True:
            woken = self.wakes.agent(self.key)
            pending = await self.store.run(Store.pending_of, self.store.store, self.key)
            if not pending:
                break
            await woken.wait()
        taken = await self.store.run(Store.take, self.store.store, self.key, call_key)
        lookup = {d.request_id: _params(d.params) for d in taken}
        result = texts.wait_complete_result(
            [d.request_id for d in taken],
            [_outcome(d) for d in taken],
            params=lambda request_id: lookup.get(request_id),
        )
        return call_tool_result(result)
