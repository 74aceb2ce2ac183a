"""What a ``--desk off`` server hands the agent when the client's form fails (``router.py``).

Nothing shows forms after that: the local side that used the client's form is left for the
contract's non-TUI fallback, whose runtime (``json`` mode) delivers no background answers. So
before that side is left:

1. every question still queued there ends as not asked: the elicitation surface ends each form
   it is shown after the failure with that error outcome (``elicitation.py``), and the queue
   shows them one after the other; a ``wait_for_answers`` waiting for them returns them;
2. whatever outcome is still undelivered then (those, and answers the person gave in the
   client before the failure) is taken from the side's turn boundary, marked delivered, for
   the router to append to the next result it returns: the call the move cuts, else the
   agent's next call (a server that ends first gives them back to its journal).

So none of the questions stays waiting for ever, and the agent hears of each once. The
outcome of a foreground ask that the move cuts is taken but not handed over: that call's own
result says its question was not asked. Bounded (``TIMEOUT``): a queue that shows no form
(its panel hidden) keeps its questions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

__all__ = ["TIMEOUT", "Changes", "hand_over"]

TIMEOUT = 10.0
"""Seconds the queued questions get to end before the side is left all the same (each ends
at once when its form is shown; this bounds a queue that shows none)."""


async def hand_over(local: Any, changes: Changes, waits: Callable[[], int]) -> list[dict[str, Any]]:
    """Steps 1 and 2 of the module docstring on the local side ``local`` (a ``LocalServer``
    whose surface ends every form as not asked now); ``changes`` is noted as each call on the
    side ends, ``waits()`` counts the ``wait_for_answers`` calls running there. Returns the
    turn-boundary messages for the agent."""
    from pi_agent_ask import events as ev

    runtime = local.runtime
    # The queue says when nothing holds the person any more (no form shown, no wait: Herdr's
    # ``herdr:blocked`` false), after the last form's outcome is recorded; its snapshot then
    # decides. A wait that answered is let return (cut between its record and its return,
    # its answers would be lost, marked delivered): a call's end is noted too.
    unsubscribe = runtime.events.on(ev.HERDR_BLOCKED, changes.note)
    try:
        with trio.move_on_after(TIMEOUT):
            while True:
                seen = changes.count
                stats = await runtime.statistics()
                if not stats.pending and not stats.waiting and not waits():
                    break
                await changes.wait_after(seen)
    finally:
        unsubscribe()
    cut = local.tools.awaited_requests
    return [m for m in await runtime.turn_boundary() if _request_id(m) not in cut]


@attrs.define(eq=False)
class Changes:
    """Things that happen on a side, counted, and a wait for the next one that misses none:
    read ``count``, look, then ``await wait_after(count)``."""

    count: int = 0
    _next: trio.Event = attrs.field(factory=trio.Event)

    def note(self, _payload: object = None) -> None:
        self.count += 1
        self._next.set()
        self._next = trio.Event()

    async def wait_after(self, seen: int) -> None:
        if self.count == seen:
            await self._next.wait()


def _request_id(message: Mapping[str, Any]) -> Any:
    details = message.get("details")
    return details.get("requestId") if isinstance(details, Mapping) else None
