"""The desk's agents: one runtime, one journal and one set of tools per agent key.

The registry opens an agent's runtime the first time its key calls (``open_runtime`` on the
key's journal under the state directory, ``mode="tui"``, on an :class:`AgentSurface` of the
board), and at desk start for every journal already there, so queued forms, drafts and
undelivered answers come back after a restart before any agent reconnects. Isolation is
structural: a key reaches only its own runtime, whose journal holds only its own requests and
history; nothing here takes a request id from one agent to another.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import attrs
import mcp.types as types
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.desk.board import AgentSurface, Board, Shown, put_aside_hint
from pi_agent_ask.form import tools as tool_names
from pi_agent_ask.mcp_common import PROGRESS_INTERVAL
from pi_agent_ask.mcp_common.journals import check_key, known_keys, record_key
from pi_agent_ask.mcp_common.tools import (
    RELATIVE_EXPORT_TEXT,
    AgentTools,
    ReportProgress,
    error_result,
    relative_export_path,
)
from pi_agent_ask.persistence.session_file import SessionFileError

__all__ = ["HANDED_KEPT", "Agent", "AgentRegistry", "AgentUnavailable"]

HANDED_KEPT = 8
"""Hook takes of one agent whose messages the desk keeps to be given back."""


class AgentUnavailable(Exception):
    """An agent's journal could not be opened (damaged, not a session file, unwritable)."""


@attrs.define(eq=False)
class Agent:
    """One agent on the desk: its runtime and its tools."""

    key: str
    runtime: Any
    tools: AgentTools
    board: Board
    journal: Path
    _dirty: trio.Event = attrs.field(factory=trio.Event)
    _waits: int = 0
    """``wait_for_answers`` calls in progress (they wait for every pending form)."""
    _requests: dict[str, str] = attrs.field(factory=dict)
    """Flow id -> request id of the forms started and not completed (from the events)."""
    _completed: set[str] = attrs.field(factory=set)
    """Requests announced completed (``pi-agent-ask:completed``, sent once the outcome is
    journaled) that the last statistics may still count as pending."""
    put_aside: Callable[[str], None] = lambda _key: None
    """Called with the key once a deferred queue of this agent is back in the line."""
    _handed: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)
    """Receipt -> the messages a hook take handed out, until given back or pushed out by
    ``HANDED_KEPT`` later takes (a hook's reply is written within seconds of its take)."""

    async def take_for_hook(self) -> tuple[str, list[dict[str, Any]]]:
        """The agent's waiting text answers for its server's Claude Code hook, marked
        delivered, and the receipt that gives them back (``""`` when there are none)."""
        messages = await self.tools.take_background_messages(text_only=True)
        if not messages:
            return "", messages
        receipt = secrets.token_urlsafe(12)
        self._handed[receipt] = messages
        while len(self._handed) > HANDED_KEPT:
            del self._handed[next(iter(self._handed))]
        return receipt, messages

    async def give_back_taken(self, receipt: str) -> bool:
        """Give back what the take with ``receipt`` handed out (its hook could not pass it on):
        journaled, and first in the agent's next result. ``False`` for an unknown receipt."""
        messages = self._handed.pop(receipt, None)
        if messages is None:
            return False
        await self.tools.give_back(messages)
        return True

    def list_tools(self) -> list[types.Tool]:
        return self.tools.list_tools()

    async def call_tool(
        self, name: str, arguments: Any, *, report_progress: ReportProgress | None = None
    ) -> types.CallToolResult:
        """One tool call of this agent (``AgentTools.call_tool``); while it waits for the person
        (a foreground ``ask_user``, ``wait_for_answers``) the board marks the agent blocked."""
        relative = relative_export_path(name, arguments)
        if relative is not None:
            # The desk's own working directory is no agent's: never write a file there.
            return error_result(RELATIVE_EXPORT_TEXT.format(path=relative))
        blocking = self._blocks(name, arguments)
        waits = name == tool_names.WAIT_FOR_ANSWERS
        if blocking:
            self._waits += waits
            self.board.wait_started(self.key)
        try:
            result = await self.tools.call_tool(name, arguments, report_progress=report_progress)
            return _in_desk_words(result) if waits else result
        finally:
            if blocking:
                self._waits -= waits
                self.board.wait_ended(self.key)
            self.changed()

    def blocked_on(self, flow_id: str) -> bool:
        """Whether this agent, while it waits, waits on the form ``flow_id``: a
        ``wait_for_answers`` waits on every form; a foreground ask on its own request (until
        its request is known, on any)."""
        if self._waits:
            return True
        awaited = self.tools.awaited_requests
        request = self._requests.get(flow_id)
        return not awaited or request is None or request in awaited

    def on_started(self, payload: Any) -> None:
        if isinstance(payload, Mapping):
            flow, request = payload.get("flowId"), payload.get("askRequestId")
            if isinstance(flow, str) and isinstance(request, str):
                self._requests[flow] = request

    def _blocks(self, name: str, arguments: Any) -> bool:
        # In background-only mode every ask is a background one.
        background_only = name == tool_names.ASK_USER and self.runtime.config.background_only
        return tool_names.waits_for_person(name, arguments) and not background_only

    def changed(self) -> None:
        """Something may have changed the agent's pending count: refresh it soon."""
        self._dirty.set()

    def on_completed(self, payload: Any) -> None:
        """A request completed: it is no longer pending, whatever the queue's statistics say
        until the queue has taken the outcome in (the form hides before that)."""
        if isinstance(payload, Mapping) and isinstance(payload.get("askRequestId"), str):
            self._completed.add(payload["askRequestId"])
            self._requests.pop(payload.get("flowId"), None)  # type: ignore[arg-type]
            self.changed()

    async def keep_count(self) -> None:
        """Keep the board's pending count of this agent current (woken by :meth:`changed`).

        A deferred queue (Esc on a background form) is reopened at once: on the desk, Esc
        means "later", and the agent's next form takes its turn behind every other agent's
        (``put_aside`` says so)."""
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            stats = await self.runtime.statistics()
            pending = set(stats.pending)
            self._completed &= pending  # the queue knows about the others by now
            self.board.set_pending(self.key, len(pending - self._completed))
            if not stats.panel_visible and stats.pending:
                await self.runtime.show_queue()
                self.put_aside(self.key)


@attrs.define(eq=False)
class AgentRegistry:
    """Every agent the desk serves, keyed by agent key. Run it with ``nursery.start(run)``."""

    state_dir: Path
    board: Board
    settings: Path | None = None
    cwd: Path | None = None
    notice: Callable[[str], None] = lambda _text: None
    hint: Callable[[str], None] = lambda _text: None
    """Words on what a key did, shown until the next key (``DeskSurface.hint``)."""
    progress_interval: float | None = None
    """Seconds between progress notifications of long waits (``None``: AgentTools' default)."""
    write_terminal: Callable[[str], None] | None = None
    """Where the runtimes' notification bytes go (``None``: nowhere)."""
    form_url: Callable[[str, str], str] | None = None
    """The web page of agent ``key``'s form ``flow_id`` (notification commands get it)."""
    _agents: dict[str, Agent] = attrs.field(factory=dict)
    _opening: dict[str, trio.Event] = attrs.field(factory=dict)
    _failures: dict[str, str] = attrs.field(factory=dict)
    _nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reopen every agent with state in ``state_dir``, then serve until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            keys = await trio.to_thread.run_sync(known_keys, self.state_dir)
            for key in keys:
                with suppress(AgentUnavailable):  # reported as a notice; the desk goes on
                    await self.agent(key, at_start=True)
            task_status.started()
            await trio.sleep_forever()

    @property
    def keys(self) -> list[str]:
        return list(self._agents)

    def get(self, key: str) -> Agent | None:
        """The agent with ``key`` if it is open."""
        return self._agents.get(key)

    async def agent(self, key: str, *, at_start: bool = False) -> Agent:
        """The agent with ``key``, opening its runtime on first use.

        Raises ``InvalidKey`` for an unacceptable key and :class:`AgentUnavailable` when its
        journal cannot be opened. ``at_start``: a journal its agent's own ``pi-agent-ask mcp``
        server holds is no trouble (the server hands it over as soon as it sees this desk, and
        its first request opens it here), so it is not reported."""
        check_key(key)
        while True:
            agent = self._agents.get(key)
            if agent is not None:
                return agent
            opening = self._opening.get(key)
            if opening is None:
                break
            await opening.wait()
            if key in self._failures:
                raise AgentUnavailable(self._failures[key])
        assert self._nursery is not None, "AgentRegistry.run is not running"
        self._opening[key] = opening = trio.Event()
        self._failures.pop(key, None)
        try:
            started: Agent = await self._nursery.start(self._serve, key)
            return started
        except Exception as error:
            message = f"The desk cannot open the journal of agent {key!r}: {error}"
            self._failures[key] = message
            held = isinstance(error, SessionFileError) and error.reason == "locked"
            if not (at_start and held):
                self.notice(message)
            raise AgentUnavailable(message) from error
        finally:
            del self._opening[key]
            opening.set()

    def blocked_on(self, shown: Shown) -> bool:
        """The board's ``blocked_on``: whether ``shown``'s agent waits on that form now."""
        agent = self._agents.get(shown.key)
        return agent is None or agent.blocked_on(shown.flow_id)

    def apply_settings(self, loaded: Any) -> None:
        """The desk's settings changed (the overlay saved them): every runtime follows."""
        for agent in self._agents.values():
            agent.runtime.apply_settings(loaded)

    async def _serve(self, key: str, *, task_status: trio.TaskStatus[Agent]) -> None:
        """One agent's runtime, from its open until the desk stops. A failure after the open is
        that agent's alone: it is reported, the agent is forgotten, and its next call opens
        its journal again (the journal has everything)."""
        started = False
        try:
            journal = await trio.to_thread.run_sync(record_key, self.state_dir, key)
            self.board.add_agent(key)
            surface = AgentSurface(self.board, key)
            async with open_runtime(
                session=journal,
                mode="tui",
                settings=self.settings,
                cwd=self.cwd,
                surface=surface,
                write_terminal=self.write_terminal,
                # Never idle: an idle wake would hand a recovered answer to ``wakeups``, which
                # nothing reads over MCP (the agent takes it with its next call).
                agent_idle=False,
                notify_link=self._link(key),
            ) as runtime:
                interval = (
                    PROGRESS_INTERVAL if self.progress_interval is None else self.progress_interval
                )
                # Everything that listens to the runtime's events subscribes before the first
                # checkpoint, so the events of forms recovered at open are seen too.
                with AgentTools(runtime, progress_interval=interval) as tools:
                    agent = Agent(
                        key=key,
                        runtime=runtime,
                        tools=tools,
                        board=self.board,
                        journal=journal,
                        put_aside=self._put_aside,
                    )
                    unsubscribes = [
                        runtime.events.on(ev.STARTED, agent.on_started),
                        runtime.events.on(ev.COMPLETED, agent.on_completed),
                    ]
                    surface.on_show_or_hide = agent.changed
                    # A foreground ask's form is queued (or done): count it and redraw the
                    # blocked marks at once.
                    tools.on_awaiting = agent.changed
                    try:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(agent.keep_count)
                            nursery.start_soon(self._relay_notices, key, runtime)
                            nursery.start_soon(_drain, runtime.aborts)
                            agent.changed()
                            self._agents[key] = agent
                            try:
                                task_status.started(agent)
                                started = True
                                await trio.sleep_forever()
                            finally:
                                self._agents.pop(key, None)
                    finally:
                        for unsubscribe in unsubscribes:
                            unsubscribe()
        except Exception as error:
            if not started:
                raise
            self.notice(f"Agent {key!r} stopped: {type(error).__name__}: {error}")

    def _put_aside(self, key: str) -> None:
        """Agent ``key``'s questions were put aside (Esc, the page's Later) and are back in
        the line, behind every other agent's shown form: say so (``put_aside_hint``)."""
        self.hint(put_aside_hint(sum(1 for s in self.board.shown_forms() if s.key != key)))

    def _link(self, key: str) -> Callable[[str], str | None] | None:
        form_url = self.form_url
        if form_url is None:
            return None
        return lambda flow_id: form_url(key, flow_id)

    async def _relay_notices(self, key: str, runtime: Any) -> None:
        async for text in runtime.notices:
            self.notice(f"{key}: {text}")


DESK_DEFERRED_WHY = (
    "The user put the questions aside on the pi-agent-ask desk for now (Esc), so "
    "wait_for_answers stopped waiting."
)
"""A released wait's first line on the desk: the desk has no question panel to hide; Esc there
sends the form to the back of the line."""


def _in_desk_words(result: types.CallToolResult) -> types.CallToolResult:
    """A ``wait_for_answers`` result as the desk says it: a wait released by Esc (the queue's
    ``hidden`` reason) names what the person did on the desk. The rest of the text (what is
    still pending, what to do now) and ``structuredContent`` stay as they are."""
    structured = result.structured_content or {}
    if structured.get("status") != "deferred" or structured.get("reason") != "hidden":
        return result
    first, *rest = result.content
    if not isinstance(first, types.TextContent):
        return result
    _why, _newline, tail = first.text.partition("\n")
    text = first.model_copy(update={"text": DESK_DEFERRED_WHY + ("\n" + tail if tail else "")})
    return result.model_copy(update={"content": [text, *rest]})


async def _drain(channel: trio.MemoryReceiveChannel[Any]) -> None:
    """Aborts ask the host to stop the agent's current operation; over MCP the cancelled call's
    own result says so, so there is nothing more to do with them."""
    async for _item in channel:
        pass
