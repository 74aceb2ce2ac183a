"""The host hooks: what an agent loop and its UI tell the runtime (``API.md``, host hooks).

Plain hooks (``agent_started``, ``agent_settled``) never block: each is numbered and noted in
``queue.HookCalls``, which the queue reads before every transition (so a message sent right
after a hook call cannot overtake it), and goes through an unbounded channel that one task
forwards to the queue, which wakes it. The numbers let the queue tell a
settle made before a wake went out from one made after it. The others are conversations with
the queue (``core.RuntimeCore``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import trio

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.core import RuntimeCore
from pi_agent_ask.actors.form import FailedSurface, SurfaceFailed, UserCommand
from pi_agent_ask.actors.persistence import PersistenceClosedError
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import untrusted
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence import journal as jr


def agent_started(rt: RuntimeCore) -> None:
    rt._model_requested = True
    call = rt._hook_calls.next(idle=False)
    rt._activity_tx.send_nowait(q.AgentActivity(idle=False, call=call))


def agent_settled(rt: RuntimeCore) -> None:
    call = rt._hook_calls.next(idle=True)
    rt._activity_tx.send_nowait(q.AgentActivity(idle=True, call=call))


async def turn_boundary(rt: RuntimeCore, *, text_only: bool = False) -> list[dict[str, Any]]:
    """The background-answer messages to add to the context now; the reply is taken even if
    the caller is cancelled once the request is with the queue (``Runtime.turn_boundary``)."""
    send, receive = trio.open_memory_channel[list[dict[str, Any]]](1)
    await rt._queue_tx.send(q.TurnBoundary(send, text_only))
    with receive, trio.CancelScope(shield=True):
        return await receive.receive()
    # A cancel scope's exit swallows only its own cancellation, and nothing cancels this one.
    raise AssertionError("unreachable")


async def give_back(rt: RuntimeCore, messages: Sequence[Mapping[str, Any]]) -> None:
    """Journal ``messages`` (from ``turn_boundary``) as given back and queue them to go out
    again first (``Runtime.give_back``). ``ValueError`` names a message that is not one a
    boundary hands out; the write's error (the disk, a revoked branch, the runtime closing)
    propagates, and then nothing was given back. Once the request is with the queue, its
    reply is taken even if the caller is cancelled, like ``turn_boundary``."""
    follow_ups = tuple(_follow_up(n, message) for n, message in enumerate(messages))
    if not follow_ups:
        return
    send, receive = trio.open_memory_channel[Exception | None](1)
    await rt._queue_tx.send(q.GiveBack(follow_ups, send))
    with receive, trio.CancelScope(shield=True):
        try:
            error = await receive.receive()
        except trio.EndOfChannel:
            error = PersistenceClosedError("the runtime is closing")
    if error is not None:
        raise error


def _follow_up(n: int, message: Mapping[str, Any]) -> q.FollowUp:
    mark = je.delivery_mark(message) if isinstance(message, Mapping) else None
    if mark is None:
        raise ValueError(
            f"give_back: message {n} is not one a turn boundary hands out (a mapping with "
            f"customType {' or '.join(je.MARK_TYPES)} and details.requestId)"
        )
    return q.FollowUp(mark[0], jr.thaw(message), wake=True)


async def user_message(rt: RuntimeCore, text: str) -> None:
    await rt._writer.append(jr.USER_MESSAGE, {"text": untrusted.scrub_text(text)})
    await rt._put_back("user_message")


async def show_queue(rt: RuntimeCore) -> None:
    await rt._ask_queue_done(lambda reply: q.Show(reply))


async def send_command(rt: RuntimeCore, flow_id: str, command: fs.Command) -> bool:
    target = await rt._find_flow(flow_id)
    if target is None:
        return False
    with target:
        try:
            await target.send(UserCommand(command))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The form ended between the lookup and the send: its owner closed its inbox.
            return False
    return True


async def surface_failed(rt: RuntimeCore, message: str) -> None:
    """The surface breaks: the visible form and every later one end with an error."""
    rt._surface = FailedSurface(message)
    rt.notice(f"The question form could not be shown: {message}")
    await rt._tell_visible(SurfaceFailed(message))
