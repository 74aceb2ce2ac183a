"""The waiter's bookkeeping as a pure reducer: one ``wait_for_answers`` call, start to end.

No awaits, no Trio, no I/O. ``wait.py`` is the shell: it performs the one effect each step
gives (a send to the queue, a receive, a lookup, the tool-result write), reduces what came of
it, and in its ``finally`` performs what ``finish`` says, however the call ends (returned,
failed, cancelled, or an exception of the journal). The queue's side of a wait (membership,
routing, deferral, give-back) is the queue reducer's (``queue_state.py``).

The reducer holds:

1. **Gates first.** Outside ``tui`` or in background-only mode the call fails at once with a
   tool error, and nothing reaches the queue.
2. **One end per start.** ``finish`` gives exactly one ``EndWait`` once ``StartWait`` may have
   reached the queue (it was sent), and none before: the queue always hears that a wait it
   knows ended, and never of one it does not.
3. **Acknowledged only when recorded.** ``EndWait.acknowledged`` is true only after the
   tool-result entry (the delivery mark of the answers it returns) was written; the call then
   returns exactly the result that entry holds. Any other end gives the answers back.
4. **Failures by type.** A busy queue is a plain tool error; an aborted wait (the session
   changed, the runtime closes) and a write refused as stale are ``interrupted``.
5. **No step out of turn.** Each phase accepts only the message its effect produces; anything
   else is a bug in the shell (``WaiterError``), never silently accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from pi_agent_ask.actors.queue_state import WaitEnd
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.form.text import (  # defined with the other texts; named here as before
    WAIT_BUSY_TEXT,
    WAIT_HIDDEN_TEXT,
    WAIT_INTERRUPTED_TEXT,
    WAIT_NON_TUI_TEXT,
)
from pi_agent_ask.form.types import AskParams

Phase = Literal["refused", "starting", "waiting", "looking_up", "writing", "returned", "failed"]


class WaiterError(Exception):
    """A message the waiter's current phase does not accept: a bug in the shell."""


@attrs.frozen(repr=False)
class Waiter:
    """One waiter. ``sent``: ``StartWait`` was sent (the queue may know the wait)."""

    wait_id: int
    tool_call_id: str | None
    phase: Phase = "starting"
    sent: bool = False
    end: WaitEnd | None = None
    entry: Mapping[str, Any] | None = None
    """The tool-result entry being (or that was) written."""
    acknowledged: bool = False


# -- messages: what came of the last effect ----------------------------------------------------


class Sent(Fieldless):
    """``StartWait`` reached the queue's channel."""


@attrs.frozen(repr=False)
class Ended:
    """The queue's reply: how the wait ended."""

    end: WaitEnd


@attrs.frozen(repr=False)
class ParamsFound:
    """The parameters of the queue's requests (for option labels in the result)."""

    params: Mapping[str, AskParams]


class Written(Fieldless):
    """The tool-result entry is on the branch."""


class WriteStale(Fieldless):
    """The tool-result write was refused: the session changed under the wait."""


Message = Sent | Ended | ParamsFound | Written | WriteStale


# -- effects: what the shell does next ---------------------------------------------------------


@attrs.frozen(repr=False)
class StartWait:
    """Send ``StartWait(wait_id)`` to the queue; reduce ``Sent`` once it is sent."""

    wait_id: int


class ReceiveEnd(Fieldless):
    """Receive the queue's reply; reduce ``Ended``."""


@attrs.frozen(repr=False)
class LookupParams:
    """Ask the queue for the parameters of the wait's requests; reduce ``ParamsFound``."""

    request_ids: tuple[str, ...]


@attrs.frozen(repr=False)
class WriteResult:
    """Write the tool-result entry (shielded); reduce ``Written``, or ``WriteStale``."""

    entry: Mapping[str, Any]


@attrs.frozen(repr=False)
class Fail:
    """End the call with a tool error; ``interrupted``: it ended without an outcome."""

    text: str
    interrupted: bool = False


@attrs.frozen(repr=False)
class Return:
    """End the call with this result (the one the written entry holds)."""

    result: Mapping[str, Any]


@attrs.frozen(repr=False)
class EndWait:
    """Tell the queue the wait ended (shielded); ``acknowledged``: its result is recorded."""

    wait_id: int
    acknowledged: bool


Effect = StartWait | ReceiveEnd | LookupParams | WriteResult | Fail | Return


def start(
    wait_id: int, tool_call_id: str | None, *, tui: bool, background_only: bool
) -> tuple[Waiter, Effect]:
    """A new waiter and its first effect."""
    waiter = Waiter(wait_id, tool_call_id)
    if not tui:
        return attrs.evolve(waiter, phase="refused"), Fail(WAIT_NON_TUI_TEXT)
    if background_only:
        return attrs.evolve(waiter, phase="refused"), Fail(WAIT_HIDDEN_TEXT)
    return waiter, StartWait(wait_id)


def reduce(waiter: Waiter, message: Message) -> tuple[Waiter, Effect]:
    """The waiter after ``message``, and the next effect."""
    match waiter.phase, message:
        case "starting", Sent():
            return attrs.evolve(waiter, phase="waiting", sent=True), ReceiveEnd()
        case "waiting", Ended(end=end):
            if end.status == "busy":
                return attrs.evolve(waiter, phase="failed", end=end), Fail(WAIT_BUSY_TEXT)
            if end.status == "aborted":
                failed = attrs.evolve(waiter, phase="failed", end=end)
                return failed, Fail(WAIT_INTERRUPTED_TEXT, interrupted=True)
            results = (result.request_id for result in end.results)
            named = tuple(dict.fromkeys((*end.request_ids, *end.pending_request_ids, *results)))
            return attrs.evolve(waiter, phase="looking_up", end=end), LookupParams(named)
        case "looking_up", ParamsFound(params=params):
            assert waiter.end is not None
            entry = {
                "toolCallId": waiter.tool_call_id,
                "name": "wait_for_answers",
                "result": result_of(waiter.end, params),
            }
            return attrs.evolve(waiter, phase="writing", entry=entry), WriteResult(entry)
        case "writing", Written():
            assert waiter.entry is not None
            done = attrs.evolve(waiter, phase="returned", acknowledged=True)
            return done, Return(waiter.entry["result"])
        case "writing", WriteStale():
            return attrs.evolve(waiter, phase="failed"), Fail(WAIT_INTERRUPTED_TEXT, True)
    raise WaiterError(f"{type(message).__name__} in phase {waiter.phase}")


def finish(waiter: Waiter) -> EndWait | None:
    """What the shell tells the queue when the call ends, however it ends."""
    if not waiter.sent:
        return None
    return EndWait(waiter.wait_id, waiter.acknowledged)


def result_of(end: WaitEnd, params: Mapping[str, AskParams]) -> dict[str, Any]:
    """The tool result of a wait that ended ``complete`` or ``deferred``."""
    lookup = dict(params)
    if end.status == "complete":
        return texts.wait_complete_result(end.request_ids, end.results, params=lookup)
    assert end.status == "deferred" and end.reason is not None
    return texts.wait_deferred_result(
        end.reason, end.request_ids, end.pending_request_ids, end.results, params=lookup
    )
