"""The waiter reducer (``actors/wait_state.py``), without Trio.

Unit tests walk each path of one ``wait_for_answers`` call; a driver runs the reducer the way
the shell (``actors/wait.py``) does, in every world (288) of how each effect turns out (the
gates, the queue's reply, the write) and where the call is cut off (a cancellation or an
exception of the journal before any awaiting effect), and checks the reducer's invariants:
exactly one ``EndWait`` once ``StartWait`` was sent and none before; acknowledged only when the
tool result was written, and then the call returns exactly that entry's result; failures by
type; a message out of turn is refused (every phase against every message). The worlds are
few enough to check all of them, so there is no sampling (and no Hypothesis) here.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest

from pi_agent_ask.actors import wait_state as ws
from pi_agent_ask.actors.queue_state import WaitEnd
from pi_agent_ask.actors.records import Outcome
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AskResult

ANSWER = Outcome("r1", result=AskResult(cancelled=False))
COMPLETE = WaitEnd("complete", request_ids=("r1",), results=(ANSWER,))
DEFERRED = WaitEnd(
    "deferred",
    request_ids=("r1", "r2"),
    pending_request_ids=("r2",),
    results=(ANSWER,),
    reason="user_message",
)
BUSY = WaitEnd("busy")
ABORTED = WaitEnd("aborted")


def _started(wait_id: int = 7) -> ws.Waiter:
    waiter, effect = ws.start(wait_id, "call-1", tui=True, background_only=False)
    assert effect == ws.StartWait(wait_id)
    assert ws.finish(waiter) is None  # not sent yet: the queue does not know the wait
    waiter, effect = ws.reduce(waiter, ws.Sent())
    assert effect == ws.ReceiveEnd()
    return waiter


def test_gates_refuse_before_anything_reaches_the_queue() -> None:
    waiter, effect = ws.start(1, "c", tui=False, background_only=False)
    assert effect == ws.Fail(ws.WAIT_NON_TUI_TEXT, interrupted=False)
    assert ws.finish(waiter) is None
    waiter, effect = ws.start(1, "c", tui=True, background_only=True)
    assert effect == ws.Fail(ws.WAIT_HIDDEN_TEXT, interrupted=False)
    assert ws.finish(waiter) is None
    with pytest.raises(ws.WaiterError):
        ws.reduce(waiter, ws.Sent())


@pytest.mark.parametrize("end", [COMPLETE, DEFERRED], ids=["complete", "deferred"])
def test_an_answered_wait_writes_its_result_then_acknowledges(end: WaitEnd) -> None:
    waiter, effect = ws.reduce(_started(), ws.Ended(end))
    assert effect == ws.LookupParams(end.request_ids)  # the wait's requests, each once
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=False)
    waiter, effect = ws.reduce(waiter, ws.ParamsFound({}))
    assert isinstance(effect, ws.WriteResult)
    if end.status == "complete":
        expected = texts.wait_complete_result(end.request_ids, end.results, params={})
    else:
        assert end.reason is not None
        expected = texts.wait_deferred_result(
            end.reason, end.request_ids, end.pending_request_ids, end.results, params={}
        )
    assert effect.entry == {"toolCallId": "call-1", "name": "wait_for_answers", "result": expected}
    # Written is not yet acknowledged: a cut here (the write raised) gives the answers back.
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=False)
    waiter, done = ws.reduce(waiter, ws.Written())
    assert done == ws.Return(expected)
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=True)


def test_busy_is_a_plain_error_and_aborted_is_interrupted() -> None:
    waiter, effect = ws.reduce(_started(), ws.Ended(BUSY))
    assert effect == ws.Fail(ws.WAIT_BUSY_TEXT, interrupted=False)
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=False)
    waiter, effect = ws.reduce(_started(), ws.Ended(ABORTED))
    assert effect == ws.Fail(ws.WAIT_INTERRUPTED_TEXT, interrupted=True)
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=False)


def test_a_stale_write_is_interrupted_and_gives_the_answers_back() -> None:
    waiter, _ = ws.reduce(_started(), ws.Ended(COMPLETE))
    waiter, _ = ws.reduce(waiter, ws.ParamsFound({}))
    waiter, effect = ws.reduce(waiter, ws.WriteStale())
    assert effect == ws.Fail(ws.WAIT_INTERRUPTED_TEXT, interrupted=True)
    assert ws.finish(waiter) == ws.EndWait(7, acknowledged=False)


MESSAGES: list[ws.Message] = [
    ws.Sent(),
    ws.Ended(COMPLETE),
    ws.Ended(BUSY),
    ws.ParamsFound({}),
    ws.Written(),
    ws.WriteStale(),
]
ACCEPTS = {
    "starting": (ws.Sent,),
    "waiting": (ws.Ended,),
    "looking_up": (ws.ParamsFound,),
    "writing": (ws.Written, ws.WriteStale),
}


def _reachable() -> list[ws.Waiter]:
    """A waiter in every phase."""
    refused, _ = ws.start(1, "c", tui=False, background_only=False)
    waiter, _ = ws.start(1, "c", tui=True, background_only=False)
    found = [refused, waiter]
    for message in [ws.Sent(), ws.Ended(COMPLETE), ws.ParamsFound({}), ws.Written()]:
        waiter, _ = ws.reduce(waiter, message)
        found.append(waiter)
    found.append(ws.reduce(_started(), ws.Ended(BUSY))[0])
    assert {w.phase for w in found} == {
        "refused",
        "starting",
        "waiting",
        "looking_up",
        "writing",
        "returned",
        "failed",
    }
    return found


def test_a_message_out_of_turn_is_refused() -> None:
    for waiter, message in itertools.product(_reachable(), MESSAGES):
        accepted = ACCEPTS.get(waiter.phase, ())
        if isinstance(message, accepted):
            after, _ = ws.reduce(waiter, message)
            assert after != waiter
        else:
            with pytest.raises(ws.WaiterError):
                ws.reduce(waiter, message)


@attrs.frozen
class World:
    """How each effect turns out, and after how many effects the call is cut off."""

    tui: bool
    background_only: bool
    end: WaitEnd
    write: str  # "ok", "stale", or "raises" (another journal error)
    cut_after: int | None  # cancelled (or an exception) before the n-th awaiting effect


WORLDS = [
    World(tui, background_only, end, write, cut_after)
    for tui, background_only, end, write, cut_after in itertools.product(
        (True, False),
        (False, True),
        (COMPLETE, DEFERRED, BUSY, ABORTED),
        ("ok", "stale", "raises"),
        (None, 0, 1, 2, 3, 4),
    )
]
"""Every world (288): small enough to check them all, which beats sampling."""


def _run(world: World) -> tuple[str, Any, list[ws.EndWait], list[Any]]:
    """Drive the reducer as ``wait.py`` does; returns (how it ended, value, ends told, writes)."""
    waiter, effect = ws.start(3, "call", tui=world.tui, background_only=world.background_only)
    sent: list[int] = []
    writes: list[Any] = []
    ended: tuple[str, Any] = ("cut", None)
    steps = 0
    while True:
        # Only effects that await can be cut off (``Fail`` and ``Return`` follow a reduce with
        # no checkpoint between, and the write is shielded: a cut lands before it or after).
        awaits = not isinstance(effect, ws.Fail | ws.Return)
        if awaits and world.cut_after is not None and steps == world.cut_after:
            break
        steps += awaits
        message: ws.Message
        if isinstance(effect, ws.StartWait):
            sent.append(effect.wait_id)
            message = ws.Sent()
        elif isinstance(effect, ws.ReceiveEnd):
            message = ws.Ended(world.end)
        elif isinstance(effect, ws.LookupParams):
            message = ws.ParamsFound({})
        elif isinstance(effect, ws.WriteResult):
            if world.write == "raises":
                ended = ("raised", None)
                break
            if world.write == "stale":
                message = ws.WriteStale()
            else:
                writes.append(effect.entry)
                message = ws.Written()
        elif isinstance(effect, ws.Fail):
            ended = ("interrupted" if effect.interrupted else "error", effect.text)
            break
        else:
            assert isinstance(effect, ws.Return)
            ended = ("returned", effect.result)
            break
        before = waiter
        waiter, effect = ws.reduce(waiter, message)
        assert before is not waiter
    end = ws.finish(waiter)
    ends = [end] if end is not None else []
    assert len(sent) <= 1
    return ended[0], ended[1], ends, [sent, writes]


def test_the_waiter_holds_its_invariants_wherever_it_stops() -> None:
    outcomes = set()
    for world in WORLDS:
        how, value, ends, (sent, writes) = _run(world)
        _check(world, how, value, ends, sent, writes)
        outcomes.add(how)
    assert outcomes == {"returned", "error", "interrupted", "cut", "raised"}


def _check(
    world: World, how: str, value: Any, ends: list[ws.EndWait], sent: list[int], writes: list[Any]
) -> None:
    # One end per start, none without one, always for the wait that was started.
    assert len(ends) == len(sent)
    assert all(end.wait_id == 3 for end in ends)
    # Gates first: refused calls never reach the queue.
    if not world.tui or world.background_only:
        assert sent == [] and how in ("error", "cut")
        if how == "error":
            assert value in (ws.WAIT_NON_TUI_TEXT, ws.WAIT_HIDDEN_TEXT)
        return
    # Acknowledged exactly when the result was written, and then that result is returned.
    acknowledged = bool(ends) and ends[0].acknowledged
    assert acknowledged == (how == "returned")
    assert acknowledged == (writes != [] and how == "returned")
    if how == "returned":
        assert world.end.status in ("complete", "deferred") and world.write == "ok"
        assert value == writes[0]["result"]
        assert writes[0]["toolCallId"] == "call" and writes[0]["name"] == "wait_for_answers"
    # Failures by type.
    if how == "error":
        assert world.end.status == "busy" and value == ws.WAIT_BUSY_TEXT
    if how == "interrupted":
        assert world.end.status == "aborted" or world.write == "stale"
        assert value == ws.WAIT_INTERRUPTED_TEXT
    if world.end.status in ("busy", "aborted"):
        assert writes == []
