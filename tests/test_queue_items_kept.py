"""What a queue item keeps (``queue_state.Item``), and that what it leaves out is never missed.

A queued form that was never shown keeps the settings of its fresh form instead of a form
state (``Item.form``): it is shown with a fresh form made with them, the settings it was
queued with. A delivered background answer keeps no outcome (``Item.outcome``: ``DELIVERED`` in
its place), whether a turn boundary, an idle wake or an acknowledged wait delivered it; what
the queue tells about it (``stats``), and what later waits, wakes and boundaries do, stay as
they were. Driven through ``reduce`` as the shell drives it."""

from __future__ import annotations

import weakref
from typing import Any

from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.validate import validate_ask_params

from .queue_support import completed_ids, delivered_ids
from .runtime_support import Box, payload

_PARAMS = validate_ask_params(payload("a", background=True)).params
assert _PARAMS is not None
_FORM = fs.new_form(_PARAMS)


def _reduce(state: qs.QueueState, message: Any) -> tuple[qs.QueueState, list[Any]]:
    """One message and the ``Continue`` transitions it asks for, each committed (replies
    sent, reply channels closed); all their effects."""
    state, effects = qs.reduce(state, message)
    state = state.commit()
    done: list[Any] = []
    for effect in effects:
        done.append(effect)
        if isinstance(effect, qs.Reply):
            effect.channel.send_nowait(effect.value)
        elif isinstance(effect, qs.CloseReply):
            effect.channel.close()
        elif isinstance(effect, qs.Continue):
            state, more = _reduce(state, effect.message)
            done += more
    return state, done


def _request(rid: str) -> AskRequest:
    assert _PARAMS is not None
    return AskRequest(rid, _PARAMS, background=True, created_at="t")


def _answer(state: qs.QueueState, rid: str) -> tuple[qs.QueueState, weakref.ref[Outcome]]:
    """``rid``'s form stops with an answer; a weak reference to the outcome."""
    outcome = Outcome(rid, result=AskResult(cancelled=False))
    kept = weakref.ref(outcome)
    state, _ = _reduce(state, qs.FormStopped(rid, state.epoch, _FORM, outcome))
    return state, kept


def _queued(*rids: str, idle: bool = False) -> qs.QueueState:
    state = qs.initial_state(idle=idle)
    for rid in rids:
        state, _ = _reduce(state, qs.Enqueue(_request(rid), _FORM, Box()))
    return state


def _delivered_ids(effects: list[Any]) -> list[str]:
    return [
        str(data["details"]["requestId"])
        for effect in effects
        if isinstance(effect, qs.MarkDelivered)
        for _type, data in effect.entries
    ]


def _item(state: qs.QueueState, rid: str) -> qs.Item:
    item = state.items.get(rid)
    assert item is not None
    return item


def _started(effects: list[Any]) -> list[qs.StartForm]:
    return [e for e in effects if isinstance(e, qs.StartForm)]


def test_a_queued_form_is_made_when_first_shown_with_the_settings_it_was_queued_with() -> None:
    queued_with = fs.FormSettings(auto_submit_when_answered_without_notes=True)
    later = fs.FormSettings(confirm_dismiss_when_dirty=False)
    state = qs.initial_state(idle=False)
    state, effects = _reduce(state, qs.Enqueue(_request("r1"), later, Box()))
    [shown] = _started(effects)  # shown at once: made now
    assert shown.form == fs.new_form(_PARAMS, later, background=True)
    state, effects = _reduce(state, qs.Enqueue(_request("r2"), queued_with, Box()))
    assert not _started(effects)
    assert _item(state, "r2").form is queued_with  # no form state while it waits
    state, effects = _reduce(
        state, qs.FormStopped("r1", state.epoch, shown.form, Outcome("r1", error="x"))
    )
    [shown] = _started(effects)
    assert shown.request.request_id == "r2"
    assert shown.form == fs.new_form(_PARAMS, queued_with, background=True)
    assert shown.form.settings is queued_with and shown.form.background
    # Hidden before any change: its form is its draft now, saved and shown again as it is.
    state, effects = _reduce(state, qs.Defer("hidden", Box()))
    assert qs.CancelForm("r2") in effects
    state, effects = _reduce(state, qs.FormStopped("r2", state.epoch, shown.form, None))
    assert _item(state, "r2").form is shown.form
    drafts = [e for e in effects if isinstance(e, qs.Append)]
    assert drafts[-1].entries == (
        ("ask:draft", {"requestId": "r2", "form": fs.state_to_json(shown.form)}),
    )
    state, effects = _reduce(state, qs.Show(Box()))
    [again] = _started(effects)
    assert again.form is shown.form


def test_an_answer_delivered_at_a_turn_boundary_keeps_no_outcome() -> None:
    state = _queued("r1", "r2")
    state, r1 = _answer(state, "r1")
    assert r1() is not None  # kept until delivered
    box = Box()
    state, effects = _reduce(state, qs.TurnBoundary(box))
    assert _delivered_ids(effects) == ["r1"]
    assert [m["details"]["requestId"] for m in box.values[0]] == ["r1"]
    assert r1() is None
    assert _item(state, "r1").outcome is qs.DELIVERED
    stats = state.stats()
    assert (stats.pending, stats.completed, stats.delivered) == (("r2",), 1, 1)
    assert (completed_ids(state), delivered_ids(state)) == (("r1",), ("r1",))
    assert stats.params == (("r2", _PARAMS),)  # the pending requests'
    assert state.stats(params_of=("r1",)).params == (("r2", _PARAMS), ("r1", _PARAMS))
    # A second boundary has nothing to hand out; a wait waits for r2 alone.
    box = Box()
    state, effects = _reduce(state, qs.TurnBoundary(box))
    assert box.values == [[]] and not _delivered_ids(effects)
    wait = Box()
    state, _ = _reduce(state, qs.StartWait(1, wait))
    assert wait.values == []
    state, r2 = _answer(state, "r2")
    [end] = wait.values
    assert (end.status, end.request_ids, [o.request_id for o in end.results]) == (
        "complete",
        ("r2",),
        ["r2"],
    )
    del end, wait
    state, _ = _reduce(state, qs.EndWait(1, acknowledged=True))
    assert r2() is None
    assert _item(state, "r2").outcome is qs.DELIVERED
    stats = state.stats()
    assert (stats.pending, stats.completed, stats.delivered) == ((), 2, 2)
    assert completed_ids(state) == delivered_ids(state) == ("r1", "r2")


def test_an_answer_delivered_by_an_idle_wake_keeps_no_outcome() -> None:
    state = _queued("r1", idle=True)
    state, r1 = _answer(state, "r1")
    assert r1() is None  # woken with it: delivered at once
    assert _item(state, "r1").outcome is qs.DELIVERED
    assert state.woken
    # The next idle period wakes with nothing: the delivered answer is not ready again.
    state, _ = _reduce(state, qs.AgentActivity(idle=False))
    state, effects = _reduce(state, qs.AgentActivity(idle=True))
    assert not [e for e in effects if isinstance(e, qs.Wake | qs.MarkDelivered)]
    assert completed_ids(state) == delivered_ids(state) == ("r1",)


def test_a_wait_after_deliveries_returns_at_once_without_them() -> None:
    state = _queued("r1", "r2")
    state, _ = _answer(state, "r1")
    state, _ = _answer(state, "r2")
    state, _ = _reduce(state, qs.TurnBoundary(Box()))
    wait = Box()
    state, _ = _reduce(state, qs.StartWait(7, wait))
    [end] = wait.values
    assert (end.status, end.request_ids, end.results) == ("complete", (), ())
    state, _ = _reduce(state, qs.EndWait(7, acknowledged=True))
    assert delivered_ids(state) == ("r1", "r2")


def test_a_wait_that_is_not_acknowledged_keeps_its_outcomes_for_the_next_boundary() -> None:
    state = _queued("r1")
    wait = Box()
    state, _ = _reduce(state, qs.StartWait(3, wait))
    state, r1 = _answer(state, "r1")
    assert len(wait.values) == 1
    del wait
    state, _ = _reduce(state, qs.EndWait(3, acknowledged=False))
    assert r1() is not None and _item(state, "r1").outcome is r1()
    box = Box()
    state, effects = _reduce(state, qs.TurnBoundary(box))
    assert _delivered_ids(effects) == ["r1"]
    assert r1() is None and _item(state, "r1").outcome is qs.DELIVERED


def test_a_late_form_stop_of_a_delivered_answer_changes_nothing() -> None:
    state = _queued("r1", "r2")
    state, _ = _answer(state, "r1")
    state, _ = _reduce(state, qs.TurnBoundary(Box()))
    before = state.stats()
    late = Outcome("r1", result=AskResult(cancelled=False))
    state, effects = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, late))
    assert _item(state, "r1").outcome is qs.DELIVERED
    assert state.stats() == before and state.pending_count == 1
    assert not [e for e in effects if isinstance(e, qs.Wake | qs.MarkDelivered | qs.Append)]
