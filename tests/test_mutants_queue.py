"""Reducer tests (``actors/queue_state.py``, ``actors/wait_state.py``) that kill mutants the
model and the shell suites let live (docs/mutation-queue.md). Each drives ``reduce`` as the
shell does: a message, then the transitions it continues into, each committed."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Any

import pytest

from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors import wait_state as ws
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import AskResult, build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params

from .queue_support import completed_ids, delivered_ids
from .runtime_support import Box, payload

_PARAMS = validate_ask_params(payload("a", background=True)).params
assert _PARAMS is not None
_FORM = fs.new_form(_PARAMS)


class FakeJournal:
    async def append(self, type_: str, data: qs.Json) -> None:
        raise AssertionError("not written here")

    async def append_many(self, entries: Sequence[qs.Entry]) -> None:
        raise AssertionError("not written here")


def _failure(disk: bool) -> Exception:
    """A write's error: the disk's (``OSError``, retried) or a revoked branch's."""
    return OSError(errno.EIO, "disk") if disk else StaleBranch("ask:draft")


def _reduce(state: qs.QueueState, message: Any) -> tuple[qs.QueueState, list[Any]]:
    """One message and the ``Continue`` transitions it asks for, each committed, as the shell
    runs them (replies are sent, reply channels closed); all their effects."""
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


def _answer(rid: str) -> Outcome:
    return Outcome(rid, result=AskResult(cancelled=False))


def _enqueue(state: qs.QueueState, rid: str) -> qs.QueueState:
    state, _ = _reduce(state, qs.Enqueue(_request(rid), _FORM, Box()))
    return state


def _answered_ids(messages: list[qs.Json]) -> list[str]:
    return [str(m["details"]["requestId"]) for m in messages]


# -- Quiesce ----------------------------------------------------------------------------------


def test_a_draft_flush_while_the_closing_form_is_open_does_not_answer_quiesce() -> None:
    # Quiesce cancels the visible form; a flush that comes before the form's FormStopped
    # writes the drafts but must not tell the Quiesce caller that all is saved: the closing
    # form's last draft is still to come.
    state = _enqueue(qs.initial_state(), "r1")
    assert state.stats().visible is not None
    state, effects = _reduce(state, qs.DraftChanged("r1", state.epoch, _FORM))
    assert qs.ScheduleFlush() in effects
    box = Box()
    state, effects = _reduce(state, qs.Quiesce(box))
    assert effects == [qs.CancelForm("r1")]
    state, effects = _reduce(state, qs.FlushDrafts())
    assert any(isinstance(e, qs.Append) for e in effects)
    assert box.values == [] and len(state.quiesce_replies) == 1
    state, effects = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, None))
    assert qs.Reply(box, None) in effects
    assert state.quiesce_replies == ()


def test_a_failed_draft_write_closes_every_quiesce_reply_and_forgets_them() -> None:
    state = _enqueue(qs.initial_state(), "r1")
    state, _ = _reduce(state, qs.DraftChanged("r1", state.epoch, _FORM))
    first, second = Box(), Box()
    state, _ = _reduce(state, qs.Quiesce(first))
    # The form stops; its draft save is the write that fails.
    state, effects = qs.reduce(state, qs.FormStopped("r1", state.epoch, _FORM, None))
    state = state.commit()
    assert qs.Continue(qs.SaveDrafts()) in effects
    state, _ = qs.reduce(state, qs.Quiesce(second))
    state = state.commit()
    _, effects = qs.reduce(state, qs.SaveDrafts())
    assert isinstance(effects[0], qs.Append)  # the write, which fails: the shell drops it
    state, effects = _reduce(state, qs.Unrecorded(qs.SaveDrafts()))
    assert effects == [qs.CloseReply(first), qs.CloseReply(second)]
    assert state.quiesce_replies == ()


# -- Restore: the undelivered index ------------------------------------------------------------


def _restored(rid: str, outcome: Outcome | None, delivered: bool) -> qs.RestoredItem:
    return qs.RestoredItem(_request(rid), _FORM, outcome, delivered)


def test_a_restore_delivers_exactly_its_undelivered_outcomes_once_in_order() -> None:
    # The old epoch has an undelivered outcome of its own, which the new branch must not see.
    state = _reduce(qs.initial_state(idle=False), qs.SurfaceReady())[0]
    state = _enqueue(state, "old")
    state, _ = _reduce(state, qs.FormStopped("old", state.epoch, _FORM, _answer("old")))
    assert state.undelivered.get(0) == "old"
    items = (
        _restored("u1", _answer("u1"), delivered=False),
        _restored("d1", _answer("d1"), delivered=True),
        _restored("p1", None, delivered=False),
        _restored("u2", _answer("u2"), delivered=False),
    )
    box = Box()
    state, _ = _reduce(state, qs.Restore(1, items, True, FakeJournal(), box))
    assert box.values == [None]
    assert completed_ids(state) == ("u1", "d1", "u2")
    assert delivered_ids(state) == ("d1",)
    boundary = Box()
    state, effects = _reduce(state, qs.TurnBoundary(boundary))
    [messages] = boundary.values
    assert _answered_ids(messages) == ["u1", "u2"]
    assert [e for e in effects if isinstance(e, qs.MarkDelivered)] == [
        qs.MarkDelivered(tuple(("ask:background-answer", m) for m in messages))
    ]
    assert delivered_ids(state) == ("u1", "d1", "u2")
    again = Box()
    state, _ = _reduce(state, qs.TurnBoundary(again))
    assert again.values == [[]]


def test_an_idle_agent_is_woken_by_the_first_undelivered_outcome_a_restore_brings() -> None:
    items = (
        _restored("d1", _answer("d1"), delivered=True),
        _restored("u1", _answer("u1"), delivered=False),
    )
    _, effects = _reduce(qs.initial_state(), qs.Restore(1, items, True, FakeJournal(), Box()))
    [wake] = [e for e in effects if isinstance(e, qs.Wake)]
    assert _answered_ids([wake.message]) == ["u1"]


# -- waits: a late joiner ---------------------------------------------------------------------


def test_a_request_enqueued_during_a_wait_joins_it_and_its_answer_completes_it() -> None:
    state = _enqueue(qs.initial_state(idle=False), "r1")
    box = Box()
    state, _ = _reduce(state, qs.StartWait(7, box))
    state = _enqueue(state, "r2")  # joins the running wait
    assert state.wait is not None and state.wait.late == ("r2",)
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    assert box.values == []  # r2 is still outstanding
    state, _ = _reduce(state, qs.FormStopped("r2", state.epoch, _FORM, _answer("r2")))
    [end] = box.values
    assert end.status == "complete"
    assert end.request_ids == ("r1", "r2")
    assert end.results == (_answer("r1"), _answer("r2"))
    # Routed to the wait, so not handed to a boundary while it runs.
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary))
    assert boundary.values == [[]]
    state, _ = _reduce(state, qs.EndWait(7, acknowledged=True))
    assert delivered_ids(state) == ("r1", "r2")


# -- the retry of a wake whose delivery mark failed on the disk --------------------------------


def _ready_to_wake() -> qs.QueueState:
    """An answer ready and the agent idle (its wake not tried yet)."""
    state = _enqueue(qs.initial_state(idle=False), "r1")
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    state, _ = qs.reduce(state, qs.AgentActivity(True))
    return state.commit()


def _failed_wake(state: qs.QueueState, *, disk: bool = True) -> tuple[qs.QueueState, list[Any]]:
    """Try the wake; its mark write fails: the shell drops the candidate, reduces Unrecorded."""
    _, effects = qs.reduce(state, qs.TryWake())
    assert isinstance(effects[0], qs.MarkDelivered)
    return _reduce(state, qs.Unrecorded(qs.TryWake(), _failure(disk)))


def test_a_wake_that_fails_on_the_disk_is_retried_with_a_doubling_bounded_wait() -> None:
    state = _ready_to_wake()
    delays = []
    for _ in range(7):
        state, effects = _failed_wake(state)
        [timer] = effects
        assert isinstance(timer, qs.ScheduleWakeRetry)
        delays.append(timer.delay)
        # The timer runs out: the wake is tried again (and fails again, next round).
        state, effects = qs.reduce(state, qs.RetryWake())
        assert effects == [qs.Continue(qs.TryWake())]
        state = state.commit()
        assert state.wake_retry_armed is False
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert qs.WAKE_RETRY_MAX == 8.0 and qs.WAKE_RETRY_FIRST == 0.5
    # The disk is back: the wake goes out, marked, and the backoff starts over.
    state, effects = _reduce(state, qs.TryWake())
    assert [type(e) for e in effects] == [qs.MarkDelivered, qs.Wake]
    assert state.wake_failures == 0 and delivered_ids(state) == ("r1",)


def test_one_wake_retry_timer_runs_at_a_time() -> None:
    state, effects = _failed_wake(_ready_to_wake())
    assert effects == [qs.ScheduleWakeRetry(qs.WAKE_RETRY_FIRST)]
    # Another event tries the wake before the timer runs out, and fails too: no second timer.
    state, effects = _failed_wake(state)
    assert effects == []
    assert state.wake_retry_armed and state.wake_failures == 2
    # The timer's retry fails: the next wait counts all three failures.
    state = qs.reduce(state, qs.RetryWake())[0].commit()
    state, effects = _failed_wake(state)
    assert effects == [qs.ScheduleWakeRetry(qs.wake_retry_delay(3))] == [qs.ScheduleWakeRetry(2.0)]


def test_a_wake_that_fails_other_than_on_the_disk_is_not_retried() -> None:
    # A revoked branch (a Restore follows and tries the wake itself), a refused entry (it
    # would be refused again), a closed journal (disposal): no timer.
    state, effects = _failed_wake(_ready_to_wake(), disk=False)
    assert effects == []
    assert not state.wake_retry_armed and state.wake_failures == 0


def test_a_failed_restore_wake_closes_the_restore_reply_and_is_retried() -> None:
    state = _ready_to_wake()
    box = Box()
    _, effects = qs.reduce(state, qs.TryWake(box))
    assert isinstance(effects[0], qs.MarkDelivered)
    state, effects = _reduce(state, qs.Unrecorded(qs.TryWake(box), _failure(True)))
    assert effects == [qs.CloseReply(box), qs.ScheduleWakeRetry(qs.WAKE_RETRY_FIRST)]
    assert box.closed and box.values == []


def test_a_retry_that_finds_the_agent_busy_does_nothing() -> None:
    state, _ = _failed_wake(_ready_to_wake())
    state, _ = _reduce(state, qs.AgentActivity(False))
    state, effects = _reduce(state, qs.RetryWake())
    assert effects == []
    assert not state.wake_retry_armed
    # The answer is not lost: the next boundary hands it out.
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary))
    assert _answered_ids(boundary.values[0]) == ["r1"]


def test_the_retry_wait_stays_bounded_after_any_number_of_failures() -> None:
    assert qs.wake_retry_delay(1) == qs.WAKE_RETRY_FIRST
    assert qs.wake_retry_delay(10**6) == qs.WAKE_RETRY_MAX


# -- the waiter reducer (actors/wait_state.py) ------------------------------------------------


def _waiting() -> ws.Waiter:
    waiter, _ = ws.start(7, "call-1", tui=True, background_only=False)
    waiter, _ = ws.reduce(waiter, ws.Sent())
    return waiter


def test_each_end_of_a_waiter_is_recorded_and_named_by_a_later_message() -> None:
    refused, _ = ws.start(7, "call-1", tui=True, background_only=True)
    busy, _ = ws.reduce(_waiting(), ws.Ended(qs.WaitEnd("busy")))
    aborted, _ = ws.reduce(_waiting(), ws.Ended(qs.WaitEnd("aborted")))
    writing, _ = ws.reduce(_waiting(), ws.Ended(qs.WaitEnd("complete")))
    writing, _ = ws.reduce(writing, ws.ParamsFound({}))
    stale, _ = ws.reduce(writing, ws.WriteStale())
    assert (refused.phase, refused.end) == ("refused", None)
    assert (busy.phase, busy.end) == ("failed", qs.WaitEnd("busy"))
    assert (aborted.phase, aborted.end) == ("failed", qs.WaitEnd("aborted"))
    assert (stale.phase, stale.end) == ("failed", qs.WaitEnd("complete"))
    for waiter in (refused, busy, aborted, stale):
        with pytest.raises(ws.WaiterError) as error:
            ws.reduce(waiter, ws.Written())
        assert str(error.value) == f"Written in phase {waiter.phase}"


def _labelled() -> tuple[Outcome, dict[str, Any]]:
    """An answer whose text needs its request's parameters (a note on an option not chosen)."""
    assert _PARAMS is not None
    draft = Draft(selected=(0,), option_notes={"a2": "not this"})
    outcome = Outcome("r1", result=build_result(_PARAMS, [draft], request_id="r1"))
    return outcome, {"r1": _PARAMS}


@pytest.mark.parametrize("status", ["complete", "deferred"])
def test_a_wait_result_names_options_through_the_request_parameters(status: str) -> None:
    outcome, params = _labelled()
    if status == "complete":
        end = qs.WaitEnd("complete", request_ids=("r1",), results=(outcome,))
        expected = texts.wait_complete_result(end.request_ids, end.results, params=params)
        bare = texts.wait_complete_result(end.request_ids, end.results, params={})
    else:
        end = qs.WaitEnd(
            "deferred",
            request_ids=("r1", "r2"),
            pending_request_ids=("r2",),
            results=(outcome,),
            reason="hidden",
        )
        expected = texts.wait_deferred_result(
            "hidden", end.request_ids, end.pending_request_ids, end.results, params=params
        )
        bare = texts.wait_deferred_result(
            "hidden", end.request_ids, end.pending_request_ids, end.results, params={}
        )
    assert expected != bare
    waiter, _ = ws.reduce(_waiting(), ws.Ended(end))
    _, effect = ws.reduce(waiter, ws.ParamsFound(params))
    assert isinstance(effect, ws.WriteResult)
    assert effect.entry["result"] == expected


# -- more of the queue reducer -------------------------------------------------------------------


class Scope:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Commands:
    def clone(self) -> Commands:
        return self


def test_a_candidate_state_can_be_reduced_further_before_it_is_committed() -> None:
    # Each derived state copies its parent's layer: the first Enqueue, never committed, is
    # still there when the second one is committed.
    first, _ = qs.reduce(qs.initial_state(idle=False), qs.Enqueue(_request("r1"), _FORM, Box()))
    second, _ = qs.reduce(first, qs.Enqueue(_request("r2"), _FORM, Box()))
    assert second.commit().stats().pending == ("r1", "r2")


def test_a_transition_writes_its_own_layer_and_leaves_its_parent_as_it_was() -> None:
    # The tables are shared until a transition writes one: the answer below writes ``items``
    # and ``undelivered`` into layers of its own; the parent, never committed since, still
    # sees the request pending, and a transition that writes no table shares them all.
    state = _enqueue(_enqueue(qs.initial_state(idle=False), "r1"), "r2")
    answered, _ = qs.reduce(state, qs.FormStopped("r1", 0, _FORM, _answer("r1")))
    assert answered.items is not state.items and answered.undelivered is not state.undelivered
    assert answered.by_seq is state.by_seq
    assert state.stats().pending == ("r1", "r2") and state.stats().visible == "tool:r1"
    assert answered.stats().pending == ("r2",) and answered.stats().visible == "tool:r2"
    same, _ = qs.reduce(state, qs.ModeChanged(background_only=False))
    assert (same.items, same.by_seq, same.undelivered) == (
        state.items,
        state.by_seq,
        state.undelivered,
    )
    assert same.items is state.items
    committed = answered.commit()
    assert completed_ids(committed) == ("r1",)
    assert committed.pending_head == 1  # past the answered head at once


def test_an_answer_at_the_pending_head_moves_it_even_with_the_panel_hidden() -> None:
    # ``pending_head`` is advanced by the completion of the head itself, not only by
    # ``_first_pending`` (which a hidden panel never calls): nothing below it is pending.
    state = _enqueue(_enqueue(qs.initial_state(idle=False), "r1"), "r2")
    state, _ = _reduce(state, qs.Defer("hidden", Box()))
    state, _ = _reduce(state, qs.FormStopped("r1", 0, _FORM, None))
    assert state.pending_head == 0
    state, _ = _reduce(state, qs.FormStopped("r1", 0, _FORM, _answer("r1")))
    assert state.pending_head == 1
    state, _ = _reduce(state, qs.FormStopped("r2", 0, _FORM, _answer("r2")))
    assert state.pending_head == 2
    state, effects = _reduce(state, qs.Show(Box()))
    assert not any(isinstance(e, qs.StartForm) for e in effects)
    assert state.stats().visible is None and completed_ids(state) == ("r1", "r2")


def test_a_table_shows_what_it_holds() -> None:
    table: qs.Table[str, int] = qs.Table({"a": 1})
    table.set("b", 2)
    table.delete("a")
    assert repr(table) == "Table({'b': 2})"


def test_a_queue_starts_with_the_surface_ready_unless_told_otherwise() -> None:
    state = _enqueue(qs.initial_state(), "r1")
    assert state.stats().visible == "tool:r1"
    waiting = _enqueue(qs.initial_state(surface_ready=False), "r1")
    assert waiting.stats().visible is None


def test_each_pending_form_is_shown_in_turn_past_every_answered_one() -> None:
    state = qs.initial_state(idle=False)
    for rid in ("r1", "r2", "r3", "r4"):
        state = _enqueue(state, rid)
    for rid, following in (("r1", "r2"), ("r2", "r3"), ("r3", "r4")):
        state, effects = _reduce(state, qs.FormStopped(rid, state.epoch, _FORM, _answer(rid)))
        [start] = [e for e in effects if isinstance(e, qs.StartForm)]
        assert start.request.request_id == following
        assert state.stats().visible == f"tool:{following}"


def test_a_foreground_claim_is_granted_with_its_id_and_the_epoch() -> None:
    items = (_restored("u1", _answer("u1"), delivered=True),)
    state, _ = _reduce(qs.initial_state(), qs.Restore(3, items, True, FakeJournal(), Box()))
    box = Box()
    state, _ = _reduce(state, qs.AcquireSurface(11, "fg:11", Commands(), Scope(), box))
    assert box.values == [qs.Grant(11, 3)]
    assert state.stats().visible == "fg:11"


def test_a_restore_cancels_the_granted_foreground_claim() -> None:
    scope, box = Scope(), Box()
    state, _ = _reduce(qs.initial_state(), qs.AcquireSurface(11, "fg:11", Commands(), scope, box))
    assert box.values == [qs.Grant(11, 0)]
    state, effects = _reduce(state, qs.Restore(1, (), True, FakeJournal(), Box()))
    assert qs.CancelClaim(scope) in effects
    assert box.values == [qs.Grant(11, 0)]  # granted once: no second grant
    assert state.stats().visible is None and state.claims == ()


def test_a_restore_forgets_the_old_branchs_unsaved_drafts() -> None:
    # The draft write before the session change failed: the old branch's drafts stay
    # unsaved. The new branch (with a request of the same id) must not get a draft write for
    # a change that was never made on it.
    state = _enqueue(qs.initial_state(), "r1")
    state, _ = _reduce(state, qs.DraftChanged("r1", state.epoch, _FORM))
    assert state.dirty == frozenset({"r1"})
    items = (_restored("r1", None, delivered=False),)
    state, _ = _reduce(state, qs.Restore(1, items, True, FakeJournal(), Box()))
    state, effects = _reduce(state, qs.FlushDrafts())
    assert not any(isinstance(e, qs.Append) for e in effects)


def test_a_wake_by_an_answer_keeps_the_follow_ups_that_do_not_wake() -> None:
    state = _enqueue(qs.initial_state(idle=False), "r1")
    note = {"customType": "ask:resume-answer", "content": "f1", "details": {"followUp": "f1"}}
    state, _ = _reduce(state, qs.FollowUp("ask:resume-answer", note, wake=False))
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    state, effects = _reduce(state, qs.AgentActivity(True))
    [wake] = [e for e in effects if isinstance(e, qs.Wake)]
    assert _answered_ids([wake.message]) == ["r1"]
    state, _ = _reduce(state, qs.AgentActivity(False))
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary))
    assert boundary.values == [[note]]


def test_a_wait_over_two_pending_requests_answers_once_both_are_answered() -> None:
    state = qs.initial_state(idle=False)
    for rid in ("r1", "r2"):
        state = _enqueue(state, rid)
    box = Box()
    state, _ = _reduce(state, qs.StartWait(5, box))
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    assert box.values == []
    state, _ = _reduce(state, qs.FormStopped("r2", state.epoch, _FORM, _answer("r2")))
    [end] = box.values
    assert end.status == "complete" and end.request_ids == ("r1", "r2")


def test_each_idle_period_may_wake_the_agent_once() -> None:
    state = _enqueue(qs.initial_state(idle=False), "r1")
    state = _enqueue(state, "r2")
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    state, _ = _reduce(state, qs.FormStopped("r2", state.epoch, _FORM, _answer("r2")))
    woken = []
    for _ in range(2):
        state, effects = _reduce(state, qs.AgentActivity(True))
        woken += [e for e in effects if isinstance(e, qs.Wake)]
        state, _ = _reduce(state, qs.AgentActivity(False))
    assert _answered_ids([w.message for w in woken]) == ["r1", "r2"]


def test_find_flow_names_the_visible_forms_commands_and_nothing_else() -> None:
    box = Box()
    _, effects = _reduce(qs.initial_state(), qs.FindFlow("tool:r1", box))
    assert effects == [qs.Reply(box, None)] and box.values == [None]
    state = _enqueue(qs.initial_state(), "r1")
    box = Box()
    _, effects = _reduce(state, qs.FindFlow("tool:r1", box))
    assert effects == [qs.ReplyCommands(box, None, "r1")]
    box = Box()
    _, effects = _reduce(state, qs.FindFlow("tool:r2", box))
    assert effects == [qs.Reply(box, None)]
    commands = Commands()
    state, _ = _reduce(qs.initial_state(), qs.AcquireSurface(4, "fg:4", commands, Scope(), Box()))
    box = Box()
    _, effects = _reduce(state, qs.FindFlow("fg:4", box))
    assert effects == [qs.ReplyCommands(box, commands, None)]


def test_every_run_of_draft_changes_schedules_one_flush() -> None:
    state = _enqueue(qs.initial_state(), "r1")
    for _ in range(2):
        state, effects = _reduce(state, qs.DraftChanged("r1", state.epoch, _FORM))
        assert qs.ScheduleFlush() in effects
        state, effects = _reduce(state, qs.FlushDrafts())
        assert any(isinstance(e, qs.Append) for e in effects)


def test_reduce_leaves_the_tables_of_the_state_it_is_given_untouched() -> None:
    state = _enqueue(qs.initial_state(idle=False), "r1")
    qs.reduce(state, qs.Enqueue(_request("r2"), _FORM, Box()))
    qs.reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    assert sorted(state.items.keys()) == ["r1"]
    assert sorted(state.by_seq.keys()) == [0]
    assert list(state.undelivered.keys()) == []


def test_a_transition_continues_only_into_work_that_does_something() -> None:
    # A busy agent: no wake to try. Nothing dirty and no Quiesce caller: no draft save.
    state = _enqueue(qs.initial_state(), "r1")
    _, effects = qs.reduce(state, qs.AgentActivity(False))
    assert effects == []
    _, effects = qs.reduce(state, qs.FlushDrafts())
    assert effects == []
    # A Quiesce caller waits, but the closing form is still open: its FormStopped saves.
    state, _ = _reduce(state, qs.Quiesce(Box()))
    _, effects = qs.reduce(state, qs.FlushDrafts())
    assert effects == []


# -- drafts whose write failed on the disk ------------------------------------------------------


def _dirty(rid: str = "r1") -> qs.QueueState:
    state = _enqueue(qs.initial_state(surface_ready=False), rid)
    state, _ = _reduce(state, qs.DraftChanged(rid, state.epoch, _FORM))
    return state


def _failed_save(state: qs.QueueState, *, disk: bool = True) -> tuple[qs.QueueState, list[Any]]:
    """A ``SaveDrafts`` whose write failed: the shell keeps the old state, reduces Unrecorded."""
    _, effects = qs.reduce(state, qs.SaveDrafts())
    assert isinstance(effects[0], qs.Append)
    return _reduce(state, qs.Unrecorded(qs.SaveDrafts(), _failure(disk)))


def test_a_draft_write_failed_on_the_disk_stays_dirty_and_is_retried_with_backoff() -> None:
    state = _dirty()
    state, effects = _failed_save(state)
    assert effects == [qs.ScheduleDraftRetry(qs.DRAFT_RETRY_FIRST)]
    assert state.dirty == frozenset({"r1"}) and state.draft_retry_armed
    # Another failure while the timer runs sets no second timer.
    state, effects = _failed_save(state)
    assert effects == [] and state.draft_failures == 2
    # The timer runs out: the drafts are written again; a success forgets the failures.
    state, effects = _reduce(state, qs.RetryDrafts())
    assert not state.draft_retry_armed
    write = next(e for e in effects if isinstance(e, qs.Append))
    assert [t for t, _ in write.entries] == ["ask:draft"]
    assert state.draft_failures == 0 and state.dirty == frozenset()


def test_the_draft_retry_backoff_doubles_up_to_its_bound() -> None:
    delays = [qs.draft_retry_delay(n) for n in range(1, 10)]
    assert delays[:4] == [qs.DRAFT_RETRY_FIRST * 2**k for k in range(4)]
    assert max(delays) == qs.WAKE_RETRY_MAX == delays[-1]


def test_quiesce_callers_wait_through_a_few_immediate_retries_then_hear_the_failure() -> None:
    state = _dirty()
    box = Box()
    state, _ = qs.reduce(state, qs.Quiesce(box))  # its SaveDrafts is the failing write
    state = state.commit()
    for failure in range(1, qs.DRAFT_QUIESCE_RETRIES + 1):
        state, effects = _failed_save(state)
        # Retried at once (no timer to wait for); the caller still waits.
        assert effects == [qs.ScheduleDraftRetry(0.0)], failure
        assert not box.closed and state.quiesce_replies == (box,)
    state, effects = _failed_save(state)
    assert box.closed and box.values == [] and state.quiesce_replies == ()
    # The drafts are still dirty, and the timed retries go on.
    assert qs.ScheduleDraftRetry(qs.draft_retry_delay(qs.DRAFT_QUIESCE_RETRIES + 1)) in effects
    assert state.dirty == frozenset({"r1"})


def test_a_draft_write_refused_or_stale_is_not_retried() -> None:
    state = _dirty()
    box = Box()
    state, _ = qs.reduce(state, qs.Quiesce(box))
    state = state.commit()
    state, effects = _failed_save(state, disk=False)
    assert effects == [qs.CloseReply(box)]
    assert not state.draft_retry_armed and state.draft_failures == 0


def test_given_back_messages_go_out_before_follow_ups_waiting_already() -> None:
    state = qs.initial_state(idle=False)
    note = {"customType": "ask:resume-answer", "content": "f1", "details": {"followUp": "f1"}}
    state, _ = _reduce(state, qs.FollowUp("ask:resume-answer", note, wake=False))
    back = {"customType": "ask:background-answer", "content": "r0", "details": {"requestId": "r0"}}
    reply = Box()
    state, effects = _reduce(
        state, qs.GiveBack((qs.FollowUp("ask:background-answer", back, True),), reply)
    )
    assert effects[0] == qs.Append((("ask:returned", {"version": 1, "messages": [back]}),))
    assert reply.values == [None]
    boundary = Box()
    state, effects = _reduce(state, qs.TurnBoundary(boundary))
    assert boundary.values == [[back, note]]
    marks = [e for e in effects if isinstance(e, qs.MarkDelivered)]
    assert marks == [
        qs.MarkDelivered((("ask:background-answer", back), ("ask:resume-answer", note)))
    ]


def test_an_empty_give_back_writes_nothing() -> None:
    reply = Box()
    state, effects = _reduce(qs.initial_state(idle=False), qs.GiveBack((), reply))
    assert [e for e in effects if isinstance(e, qs.Append)] == []
    assert reply.values == [None]
    assert state.follow_ups == ()


def test_a_text_only_boundary_keeps_messages_with_images_in_order() -> None:
    state = qs.initial_state(idle=False)
    image = {"type": "image", "mimeType": "image/png", "data": "aGk="}
    pictured = {
        "customType": "ask:resume-answer",
        "content": [{"type": "text", "text": "f1"}, image],
        "details": {"followUp": "f1"},
    }
    plain = {"customType": "ask:resume-answer", "content": "f2", "details": {"followUp": "f2"}}
    blocks = {
        "customType": "ask:resume-answer",
        "content": [{"type": "text", "text": "f3"}, "not a block"],
        "details": {"followUp": "f3"},
    }
    for message in (pictured, plain, blocks):
        state, _ = _reduce(state, qs.FollowUp("ask:resume-answer", message, wake=False))
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary, text_only=True))
    assert boundary.values == [[plain, blocks]]  # text blocks only: text
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary))
    assert boundary.values == [[pictured]]


def test_a_text_only_boundary_hands_out_a_ready_text_answer() -> None:
    state = _enqueue(qs.initial_state(idle=False), "r1")
    state, _ = _reduce(state, qs.FormStopped("r1", state.epoch, _FORM, _answer("r1")))
    boundary = Box()
    state, _ = _reduce(state, qs.TurnBoundary(boundary, text_only=True))
    assert _answered_ids(boundary.values[0]) == ["r1"]


def test_a_follow_up_wake_that_goes_out_starts_the_backoff_over() -> None:
    note = {"customType": "ask:resume-answer", "content": "f1", "details": {"followUp": "f1"}}
    state, effects = qs.reduce(qs.initial_state(), qs.FollowUp("ask:resume-answer", note, True))
    assert effects == [qs.Continue(qs.TryWake())]
    state, _ = _failed_wake(state.commit())
    assert state.wake_failures == 1
    state, effects = _reduce(state, qs.TryWake())
    assert [type(e) for e in effects] == [qs.MarkDelivered, qs.Wake]
    assert state.wake_failures == 0


def test_a_restore_starts_a_period_that_may_wake_the_idle_agent_again() -> None:
    """Another branch (a session change): its ready answer wakes the agent, even though the
    old branch's answer woke it in this idle period."""
    state = _ready_to_wake()
    state, effects = _reduce(state, qs.TryWake())
    assert [type(e) for e in effects] == [qs.MarkDelivered, qs.Wake] and state.woken
    items = (_restored("r2", _answer("r2"), delivered=False),)
    state, effects = _reduce(state, qs.Restore(state.epoch + 1, items, True, FakeJournal(), Box()))
    [wake] = [e for e in effects if isinstance(e, qs.Wake)]
    assert _answered_ids([wake.message]) == ["r2"]


def test_a_request_shown_for_the_first_time_gets_a_fresh_background_form_with_its_settings() -> (
    None
):
    """A queued request keeps only the settings of its form until it is shown; the form the
    queue starts is a fresh one of its own parameters, with those settings, as a background
    form."""
    settings = fs.FormSettings(auto_submit_when_answered_without_notes=True)
    request = _request("r1")
    _, effects = _reduce(qs.initial_state(), qs.Enqueue(request, settings, Box()))
    [started] = [effect for effect in effects if isinstance(effect, qs.StartForm)]
    assert started.request is request
    assert started.form == fs.new_form(_PARAMS, settings, background=True)
    assert started.form.background is True
