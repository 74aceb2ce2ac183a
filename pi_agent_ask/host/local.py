"""The LocalHost: a small agent host around a runtime, with a real agent-loop shape.

An agent here is a script of turns. ``LocalHost.turn(body)`` marks the agent busy, runs the
body (tool calls go through ``call``), then takes the turn boundary's background answers into
the context, and marks the agent idle. While idle, ``next_wakeup()`` waits for an answer that
should start a new turn. Every tool call, result and delivered message becomes a transcript
item, rendered with the contract's transcript rows (``form/text.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.records import Outcome
from pi_agent_ask.actors.runtime import Runtime
from pi_agent_ask.form import transcript
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.types import AskParams
from pi_agent_ask.form.validate import validate_ask_params

Line = tuple[tuple[str, str], ...]
HISTORY_TOOLS = frozenset({"list_ask_history", "read_ask_history", "export_ask_history"})


@attrs.define(eq=False)
class LocalHost:
    """An agent host: turns, tool calls recorded in the transcript, idle wakes."""

    runtime: Runtime
    emit: Callable[[Line], None]
    """Receives every transcript line as it is produced (the terminal, a log, a test)."""
    width: int = 80
    mark: Callable[[str], None] | None = None
    """Names the block of transcript lines that ends now (a call's rows), when the transcript
    can add late lines to earlier blocks."""
    place: Callable[[str, Sequence[Line]], bool] | None = None
    """Adds late lines to a named block; False when the block is gone. With ``mark`` and
    ``place``, answers taken by ``wait_for_answers`` show their card at the call that asked,
    and the wait row shows only the confirmation (000: no second card in Wait)."""
    context: list[Any] = attrs.field(factory=list)
    """What the model would see: tool results and background-answer messages, in order."""
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _calls: dict[str, str] = attrs.field(factory=dict)
    """Request id -> the tool call id whose rows the answer card belongs to."""
    _params: dict[str, AskParams] = attrs.field(factory=dict)
    """Request id -> the questions it asked: an answer card names options by their labels."""
    _idle: bool = True
    """Between turns (a runtime starts with its agent idle)."""
    _carded: set[str] = attrs.field(factory=set)
    """Requests whose card is shown already: cancelled while the agent was idle."""

    def __attrs_post_init__(self) -> None:
        self.runtime.events.on(ev.COMPLETED, self._completed)

    def _completed(self, payload: Any) -> None:
        """A background form cancelled while the agent is idle: its card now. A cancellation
        never wakes the agent and enters its context at the next turn's boundary (000: it
        only adds context), but the person who cancelled sees it at once, as when the agent
        works; the boundary adds the message without a second card."""
        if (
            not self._idle
            or not isinstance(payload, Mapping)
            or payload.get("source") != "background"
        ):
            return
        request_id, details = payload.get("askRequestId"), payload.get("result")
        if not isinstance(request_id, str) or not isinstance(details, Mapping):
            return
        if details.get("cancelled") is not True:
            return  # an answer wakes the agent, and its card comes with that delivery
        self._carded.add(request_id)
        self._card(Outcome(request_id, result=AskResult.from_details(dict(details))))

    def say(self, text: str, style: str = "text") -> None:
        self.emit(((style, text),))

    async def call(self, name: str, arguments: Any, parent: str | None = None) -> dict[str, Any]:
        """Call a tool as the model would, recording the call and its result."""
        call_id = f"call-{next(self._ids)}"
        if name == "ask_user":
            for line in transcript.call_rows(arguments, width=self.width):
                self.emit(line)
        elif name not in HISTORY_TOOLS:
            self.emit((("accent", name),))
        result = await self.runtime.call_tool(
            name, arguments, tool_call_id=call_id, parent_tool_call_id=parent
        )
        self.context.append(result)
        self._render_result(name, result)
        details = result.get("details")
        if name == "ask_user" and isinstance(details, dict) and details.get("status") == "queued":
            self._calls[details["requestId"]] = call_id
            asked = validate_ask_params(arguments)
            if asked.params is not None:
                self._params[details["requestId"]] = asked.params
            if self.mark is not None:
                self.mark(call_id)
        return result

    def _render_result(self, name: str, result: dict[str, Any]) -> None:
        if name in HISTORY_TOOLS:
            return  # history tools have empty call and result rows, errors included (000)
        if result.get("isError"):
            self.emit((("error", "  ! " + result["content"][0]["text"]),))
            return
        details = result.get("details", {})
        if name == "ask_user" and details.get("status") == "queued":
            self.emit((("muted", "  "), *transcript.receipt_row(details)))
        elif name == "ask_user":
            ask = AskResult.from_details(details)
            for line in transcript.result_rows(ask, width=self.width - 2):
                self.emit((("text", "  "), *line))
        elif name == "wait_for_answers":
            self.emit((("muted", "  "), *transcript.wait_confirmation(details)))
            for item in details.get("results", ()):
                outcome = Outcome.from_json(item)
                if outcome.request_id in self._carded:
                    self._carded.discard(outcome.request_id)  # its card is shown already
                    continue
                call_id = self._calls.get(outcome.request_id)
                card = self._card_lines(outcome)
                if self.place is not None and call_id is not None and self.place(call_id, card):
                    # The card went up to the call that asked; say so here, where the person
                    # is looking.
                    title = outcome.result.title if outcome.result is not None else None
                    where = f"{title}: " if title else ""
                    self.emit((("muted", f"  ↑ {where}answer card added at its question above"),))
                    continue
                for line in card:
                    self.emit(line)

    def _card_lines(self, outcome: Outcome) -> list[transcript.Line]:
        params = self._params.get(outcome.request_id)
        return transcript.background_card(outcome, width=self.width, params=params)

    def _card(self, outcome: Outcome) -> None:
        for line in self._card_lines(outcome):
            self.emit(line)

    def deliver(self, message: dict[str, Any]) -> None:
        """A background-answer message enters the context; the person sees its card (unless
        it was shown when the form was cancelled)."""
        self.context.append(message)
        outcome = Outcome.from_json(message["details"])
        if outcome.request_id in self._carded:
            self._carded.discard(outcome.request_id)
            return
        self._card(outcome)

    async def turn(self, body: Callable[[LocalHost], Awaitable[None]]) -> None:
        """One agent turn: busy while the body runs, then the boundary, then idle."""
        self._idle = False
        self.runtime.agent_started()
        try:
            await body(self)
        finally:
            for message in await self.runtime.turn_boundary():
                self.deliver(message)
            self.runtime.agent_settled()
            self._idle = True

    async def next_wakeup(self) -> dict[str, Any]:
        """Wait (idle) for an answer that starts a new turn; it enters the context."""
        message = await self.runtime.wakeups.receive()
        self.deliver(message)
        return message

    async def user_says(self, text: str) -> None:
        """Ordinary input from the person: releases a wait and hides the panel."""
        self.emit((("accent", "> "), ("text", text)))
        await self.runtime.user_message(text)

    async def work(self, what: str, seconds: float) -> None:
        """The agent doing something that is not asking: the queue keeps going meanwhile."""
        self.say(f"  … {what}", "muted")
        await trio.sleep(seconds)
