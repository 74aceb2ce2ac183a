"""``wait_for_answers``: the waiter, the tool call's task talking to the queue.

The shell of the waiter reducer (``wait_state.py``): it performs the effect each step gives
and reduces what came of it; in its ``finally``, whatever ends the call, it tells the queue
the wait ended as ``wait_state.finish`` says. The queue decides when the wait ends (its side
of the wait is ``queue_state.py``); the waiter writes the tool result, which is the delivery
mark of the answers it returns, and only then acknowledges. An unacknowledged end (cancelled,
the session changed, the write failed) gives the answers back to boundary and wake delivery.
"""

from __future__ import annotations

from typing import Any

import trio

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors import wait_state as ws
from pi_agent_ask.actors.core import BranchWriter, RuntimeCore
from pi_agent_ask.actors.errors import ToolError, ToolInterrupted
from pi_agent_ask.actors.records import StaleBranch
from pi_agent_ask.persistence import journal as jr

__all__ = ["wait_for_answers"]


async def wait_for_answers(
    rt: RuntimeCore, writer: BranchWriter, tool_call_id: str | None
) -> dict[str, Any]:
    """Wait as the queue decides; write the result (the delivery mark), then acknowledge.

    Acknowledging marks the results delivered; it happens only once the tool-result entry
    is on the branch, so a session change in between cannot lose the mark.
    """
    waiter, effect = ws.start(
        next(rt._ids),
        tool_call_id,
        tui=rt.mode == "tui",
        background_only=rt.config.background_only,
    )
    replies, reply = trio.open_memory_channel[q.WaitEnd](1)
    try:
        while True:
            message: ws.Message
            match effect:
                case ws.StartWait(wait_id=wait_id):
                    await rt._queue_tx.send(q.StartWait(wait_id, replies))
                    message = ws.Sent()
                case ws.ReceiveEnd():
                    message = ws.Ended(await reply.receive())
                case ws.LookupParams(request_ids=named):
                    stats = await rt.statistics(params_of=named)
                    message = ws.ParamsFound(dict(stats.params))
                case ws.WriteResult(entry=entry):
                    try:
                        with trio.CancelScope(shield=True):
                            await writer.append(jr.TOOL_RESULT, entry)
                    except StaleBranch:
                        message = ws.WriteStale()
                    else:
                        message = ws.Written()
                case ws.Fail(text=text, interrupted=interrupted):
                    raise (ToolInterrupted if interrupted else ToolError)(text)
                case ws.Return(result=result):
                    return dict(result)
            waiter, effect = ws.reduce(waiter, message)
    finally:
        # Always tell the queue the wait ended; unacknowledged results go back to delivery.
        end = ws.finish(waiter)
        if end is not None:
            await rt.tell_queue(q.EndWait(end.wait_id, end.acknowledged))
