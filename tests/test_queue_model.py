"""The queue reducer (``actors/queue_state.py``) against a small model, without Trio.

A ``RuleBasedStateMachine`` drives the pure reducer through a harness that performs its
effects the way the actor does (writes first, ``Continue`` next, commit after success, a failed
write reduced as ``Unrecorded``) and checks it against a model written as plainly as possible:
lists scanned from the front, no indexes, no counters. The model holds the FIFO of background
requests and foreground claims, the wait, deliveries, Herdr owners and epochs.

Checked after every step: pending / completed / delivered / visible / Herdr owners agree with
the model; the surface is never idle while an eligible claimant exists, and goes to the oldest;
every outcome is delivered at most once (boundary, wake, acknowledged wait) and was marked in
the journal, in the same transition, before the message left; a transition's write is its
first effect; ``reduce`` never changes the state it is given; Herdr events follow the owners.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

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
_TYPED = fs.new_form(_PARAMS)  # a "changed" draft (the content is not the point here)


# -- opaque handles ---------------------------------------------------------------------------


class Scope:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Commands:
    def clone(self) -> Commands:
        return self


class FakeJournal:
    async def append(self, type_: str, data: qs.Json) -> None:
        raise AssertionError("the harness performs writes itself")

    async def append_many(self, entries: list[qs.Entry]) -> None:
        raise AssertionError("the harness performs writes itself")


def _rid_of(message: qs.Json) -> str:
    details = message["details"]
    return str(details.get("requestId") or details["followUp"])


# -- the harness: the actor's effect loop, synchronously ------------------------------------------


@attrs.define
class Harness:
    state: qs.QueueState
    journal: list[qs.Entry] = attrs.field(factory=list)
    fail_armed: bool = False
    disk: bool = False
    """An armed failure is the disk's (``OSError``) rather than a revoked branch's."""
    timers: list[float] = attrs.field(factory=list)
    """The wake retry timers set and not fired yet (their delays)."""
    draft_timers: list[float] = attrs.field(factory=list)
    """The draft retry timers set and not fired yet (their delays)."""
    wakes: list[str] = attrs.field(factory=list)
    herdr_events: list[bool] = attrs.field(factory=list)
    started: list[tuple[str, int]] = attrs.field(factory=list)
    cancelled_forms: list[str] = attrs.field(factory=list)
    deliveries: dict[str, int] = attrs.field(factory=dict)
    seen: int = 0
    """Journal entries the model has looked at for drafts."""
    transitions: int = 0

    def send(self, message: qs.QueueMessage) -> None:
        todo: list[qs.QueueMessage] = [message]
        while todo:
            current = todo.pop(0)
            before = self.state.stats()
            candidate, effects = qs.reduce(self.state, current)
            self.transitions += 1
            assert self.state.stats() == before, "reduce changed the state it was given"
            writes = [i for i, e in enumerate(effects) if isinstance(e, qs.WRITES)]
            assert writes in ([], [0]), effects
            if writes and self.fail_armed:
                self.fail_armed = False
                failure = OSError(5, "injected") if self.disk else RuntimeError("refused")
                undo, undo_effects = qs.reduce(self.state, qs.Unrecorded(current, failure))
                for effect in undo_effects:
                    assert not isinstance(effect, (*qs.WRITES, qs.Continue)), effect
                    self._perform(effect, [])
                self.state = undo.commit()
                assert self.state.stats() == before, "a failed write changed the state"
                continue
            marked: list[qs.Entry] = []
            for effect in effects:
                if isinstance(effect, qs.Continue):
                    todo.append(effect.message)
                else:
                    self._perform(effect, marked)
            self.state = candidate.commit()

    def _perform(self, effect: qs.Effect, marked: list[qs.Entry]) -> None:
        match effect:
            case qs.Append(entries=entries):
                self.journal.extend(entries)
                for entry_type, data in entries:
                    if entry_type == "ask:returned":  # a give-back undoes its marks
                        for message in data["messages"]:
                            self.deliveries[_rid_of(message)] -= 1
            case qs.MarkDelivered(entries=entries):
                self.journal.extend(entries)
                marked.extend(entries)
            case qs.Wake(message=message):
                assert any(m == message for _, m in marked), "woken before marked"
                self._delivered(_rid_of(message))
                self.wakes.append(_rid_of(message))
            case qs.Reply(channel=channel, value=value):
                if isinstance(value, list):  # a turn boundary's messages
                    for message in value:
                        assert any(m == message for _, m in marked), "handed out before marked"
                        self._delivered(_rid_of(message))
                channel.send_nowait(value)
            case qs.CloseReply(channel=channel):
                channel.close()
            case qs.ReplyCommands(channel=channel, commands=commands):
                channel.send_nowait(commands)
            case qs.HerdrChanged(active=active):
                assert not self.herdr_events or self.herdr_events[-1] != active
                self.herdr_events.append(active)
            case qs.StartForm(request=request, epoch=epoch):
                self.started.append((request.request_id, epoch))
            case qs.CancelForm(request_id=rid):
                self.cancelled_forms.append(rid)
            case qs.CancelClaim(scope=scope):
                scope.cancel()
            case qs.ScheduleWakeRetry(delay=delay):
                self.timers.append(delay)
            case qs.ScheduleDraftRetry(delay=delay):
                self.draft_timers.append(delay)
            case qs.UseJournal() | qs.ScheduleFlush():
                pass
            case _:
                raise AssertionError(effect)

    def _delivered(self, rid: str) -> None:
        self.deliveries[rid] = self.deliveries.get(rid, 0) + 1
        assert self.deliveries[rid] == 1, f"{rid} delivered twice"


# -- the model ----------------------------------------------------------------------------------


@attrs.define
class MItem:
    rid: str
    seq: int
    outcome: str | None = None  # "answer" | "cancel" | "error"
    delivered: bool = False


@attrs.define
class MClaim:
    claim_id: int
    seq: int
    scope: Scope
    reply: Box


@attrs.define
class MWait:
    wait_id: int
    members: list[str]
    routed: list[str]
    reply: Box
    answered: bool = False
    # A wait blocks on the person (holds Herdr) only when it started with a member unanswered.
    blocking: bool = True


@attrs.define
class MFollowUp:
    key: str
    wake: bool


def _outcome(rid: str, kind: str) -> Outcome:
    if kind == "error":
        return Outcome(rid, error="the surface broke")
    return Outcome(rid, result=AskResult(cancelled=kind == "cancel"))


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(qs.initial_state(tui=True, surface_ready=False))
        self.epoch = 0
        self.items: list[MItem] = []
        self.claims: list[MClaim] = []
        self.active: tuple[str, str | int] | None = None  # ("bg", rid) | ("fg", claim id)
        self.panel = True
        self.ready = False
        self.held = False
        self.idle = True
        self.woken = False
        self.stalled = False  # a wake's write failed: no wake until the next trigger or retry
        self.disk = False  # failures are the disk's: a failed wake is retried by a timer
        self.retry_armed = False
        self.wake_failures = 0
        self.draft_failures = 0
        self.draft_retry_armed = False
        self.wait: MWait | None = None
        self.follow_ups: list[MFollowUp] = []
        self.dirty: set[str] = set()
        self.armed = False
        self.seq = 0
        self.counter = 0
        self.quiesce_boxes: list[Box] = []
        self.stale_waits: list[int] = []
        self.gone: set[str] = set()  # requests of a branch left behind
        self.panel_owner = False

    # -- model helpers ----------------------------------------------------------------------

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _item(self, rid: str) -> MItem:
        return next(i for i in self.items if i.rid == rid)

    def _write(self) -> bool:
        """The model predicts a write here: False when it is the armed failure."""
        if self.armed:
            self.armed = False
            return False
        return True

    def _eligible(self) -> list[tuple[int, str, str | int]]:
        out: list[tuple[int, str, str | int]] = [(c.seq, "fg", c.claim_id) for c in self.claims]
        if self.panel:
            pending = [i for i in self.items if i.outcome is None]
            if pending:
                out.append((pending[0].seq, "bg", pending[0].rid))
        return sorted(out)

    def _schedule(self) -> None:
        if self.active is not None or self.held or not self.ready:
            return
        eligible = self._eligible()
        if eligible:
            _, kind, key = eligible[0]
            self.active = (kind, key)
            self.panel_owner = kind == "bg"

    def _wakeable(self) -> tuple[str, MFollowUp | MItem] | None:
        for f in self.follow_ups:
            if f.wake:
                return ("follow", f)
        routed = self.wait.routed if self.wait else []
        for item in self.items:
            if item.outcome == "answer" and not item.delivered and item.rid not in routed:
                return ("item", item)
        return None

    def _try_wake(self) -> None:
        self.stalled = False
        if not self.idle or self.woken:
            return
        found = self._wakeable()
        if found is None:
            return
        if not self._write():
            self.stalled = True
            if self.disk:
                self.wake_failures += 1
                if not self.retry_armed:
                    self.retry_armed = True
                    assert self.h.timers == [qs.wake_retry_delay(self.wake_failures)]
                assert len(self.h.timers) == 1, "one wake retry timer at a time"
            return
        self.wake_failures = 0
        kind, what = found
        if kind == "follow":
            assert isinstance(what, MFollowUp)
            self.follow_ups.remove(what)
        else:
            assert isinstance(what, MItem)
            what.delivered = True
        self.woken = True

    def _save_drafts(self) -> None:
        live = {rid for rid in self.dirty if self._item(rid).outcome is None}
        drafts = [d["requestId"] for t, d in self.h.journal[self.h.seen :] if t == "ask:draft"]
        self.h.seen = len(self.h.journal)
        assert sorted(drafts) == (sorted(live) if not self.armed else []), (drafts, live)
        if live and not self._write():
            # Unrecorded: nothing was written, the drafts stay dirty. A disk failure is
            # retried: at once while Quiesce callers wait (a few times), else by a timer.
            failures = self.draft_failures + 1 if self.disk else 0
            waiting = (
                self.disk and bool(self.quiesce_boxes) and failures <= qs.DRAFT_QUIESCE_RETRIES
            )
            if self.disk:
                self.draft_failures = failures
                if waiting:
                    assert self.h.draft_timers[-1] == 0.0
                elif not self.draft_retry_armed:
                    self.draft_retry_armed = True
                    assert self.h.draft_timers[-1] == qs.draft_retry_delay(failures)
            if not waiting:
                # The Quiesce callers hear that their drafts were not saved.
                for box in self.quiesce_boxes:
                    assert box.values == [] and box.closed
                self.quiesce_boxes = []
            return
        if live:
            self.draft_failures = 0
        self.dirty = set()
        if self.quiesce_boxes and (self.active is None or self.active[0] != "bg"):
            for box in self.quiesce_boxes:
                assert box.values == [None]
            self.quiesce_boxes = []

    def _finish_wait(self, deferred: str | None = None) -> None:
        wait = self.wait
        if wait is None or wait.answered:
            return
        wait.answered = True
        self.expected_end = qs.WaitEnd(
            "deferred" if deferred else "complete",
            request_ids=tuple(wait.members),
            pending_request_ids=tuple(r for r in wait.members if self._item(r).outcome is None)
            if deferred
            else (),
            results=tuple(
                _outcome(r, self._item(r).outcome or "") for r in wait.members if r in wait.routed
            ),
            reason=deferred,  # type: ignore[arg-type]
        )
        assert wait.reply.values == [self.expected_end]

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: not self.ready)
    @rule()
    def surface_ready(self) -> None:
        self.h.send(qs.SurfaceReady())
        self.ready = True
        self._schedule()

    @rule()
    def enqueue(self) -> None:
        rid = f"r{self._next()}"
        request = AskRequest(rid, _PARAMS, background=True, created_at="t")
        box = Box()
        self.h.send(qs.Enqueue(request, _FORM, box))
        self.items.append(MItem(rid, self.seq))
        self.seq += 1
        if self.wait is not None and not self.wait.answered:
            self.wait.members.append(rid)
        assert box.values == [sum(1 for i in self.items if i.outcome is None)]
        self._schedule()

    @rule(fail=st.booleans())
    def enqueue_recorded(self, fail: bool) -> None:
        """An enqueue that writes the request's entries and its receipt itself."""
        rid = f"r{self._next()}"
        request = AskRequest(rid, _PARAMS, background=True, created_at="t")
        box = Box()
        recording = qs.Recording(
            (("ask:queued", {"requestId": rid}),),
            lambda pending: ("tool-result", {"requestId": rid, "pending": pending}),
            FakeJournal(),
        )
        written = len(self.h.journal)
        self._arm(fail)
        self.h.send(qs.Enqueue(request, _FORM, box, recording))
        if not self._write():
            # Nothing enqueued, nothing written; the caller hears the error.
            expected = OSError if self.disk else RuntimeError
            assert len(box.values) == 1 and isinstance(box.values[0], expected) and box.closed
            assert len(self.h.journal) == written
            assert rid not in self.h.state.items
            return
        self.items.append(MItem(rid, self.seq))
        self.seq += 1
        if self.wait is not None and not self.wait.answered:
            self.wait.members.append(rid)
        pending = sum(1 for i in self.items if i.outcome is None)
        assert box.values == [pending]
        assert self.h.journal[written : written + 2] == [
            ("ask:queued", {"requestId": rid}),
            ("tool-result", {"requestId": rid, "pending": pending}),
        ]
        self._schedule()

    @precondition(lambda self: len(self.claims) < 2)
    @rule()
    def acquire(self) -> None:
        claim = MClaim(self._next(), self.seq, Scope(), Box())
        self.seq += 1
        self.h.send(
            qs.AcquireSurface(
                claim.claim_id, f"fg:{claim.claim_id}", Commands(), claim.scope, claim.reply
            )
        )
        self.claims.append(claim)
        self._schedule()

    @precondition(lambda self: self.claims)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        self._release(data.draw(st.sampled_from(self.claims)))

    def release_oldest(self) -> None:
        self._release(self.claims[0])

    def _release(self, claim: MClaim) -> None:
        self.h.send(qs.ReleaseSurface(claim.claim_id))
        self.claims.remove(claim)
        if self.active == ("fg", claim.claim_id):
            self.active = None
        self._schedule()

    def _visible_bg(self) -> bool:
        return self.active is not None and self.active[0] == "bg"

    @precondition(lambda self: self._visible_bg())
    @rule()
    def answer_visible(self) -> None:
        self.finish_visible("answer")

    @precondition(lambda self: self._visible_bg())
    @rule(kind=st.sampled_from(["cancel", "error"]))
    def finish_visible(self, kind: str) -> None:
        assert self.active is not None
        rid = str(self.active[1])
        self.h.send(qs.FormStopped(rid, self.epoch, _TYPED, _outcome(rid, kind)))
        self.active = None
        self.panel_owner = False
        item = self._item(rid)
        item.outcome = kind
        self.dirty.discard(rid)
        wait = self.wait
        if wait is not None and not wait.answered and rid in wait.members:
            wait.routed.append(rid)
            if all(self._item(r).outcome is not None for r in wait.members):
                self._finish_wait()
        self._schedule()
        self._try_wake()
        self._save_drafts()

    @precondition(lambda self: self._visible_bg())
    @rule()
    def interrupt_visible(self) -> None:
        self._interrupt()

    def _interrupt(self) -> None:
        assert self.active is not None
        rid = str(self.active[1])
        self.h.send(qs.FormStopped(rid, self.epoch, _TYPED, None))
        self.active = None
        self.panel_owner = False
        self.dirty.add(rid)
        self._schedule()
        self._save_drafts()

    @precondition(lambda self: self._visible_bg())
    @rule()
    def type_in_visible(self) -> None:
        assert self.active is not None
        rid = str(self.active[1])
        self.h.send(qs.DraftChanged(rid, self.epoch, _TYPED))
        self.dirty.add(rid)

    @precondition(lambda self: self.dirty)
    @rule()
    def flush_timer(self) -> None:
        self.h.send(qs.FlushDrafts())
        self._save_drafts()

    @precondition(lambda self: any(e < self.epoch for _, e in self.h.started))
    @rule(data=st.data())
    def stale_form_stops(self, data: st.DataObject) -> None:
        rid, epoch = data.draw(st.sampled_from([s for s in self.h.started if s[1] < self.epoch]))
        self.h.send(qs.FormStopped(rid, epoch, _TYPED, _outcome(rid, "answer")))
        self.h.send(qs.DraftChanged(rid, epoch, _TYPED))  # dropped too
        self._save_drafts()

    @precondition(lambda self: self.panel or self.wait is not None)
    @rule(reason=st.sampled_from(["hidden", "user_message"]), fail=st.booleans())
    def defer(self, reason: str, fail: bool) -> None:
        self._arm(fail)
        box = Box()
        cancelled = len(self.h.cancelled_forms)
        self.h.send(qs.Defer(reason, box))  # type: ignore[arg-type]
        if self.panel and not self._write():
            assert len(self.h.cancelled_forms) == cancelled  # nothing happened
            # and the caller hears so, in words (the page's Later tells the person)
            [said] = box.values
            assert isinstance(said, str) and said.startswith("Not saved for later"), said
            return
        assert box.values == [None]
        if self.panel:
            assert self.h.journal[-1] == ("ask:panel", {"visible": False})
        if self._visible_bg():
            assert self.active is not None
            assert self.h.cancelled_forms[cancelled:] == [self.active[1]]
        self.panel = False
        self.panel_owner = False  # the form is being cancelled; the panel no longer blocks
        self._finish_wait(deferred=reason)

    @precondition(lambda self: not self.panel)
    @rule(fail=st.booleans())
    def show(self, fail: bool) -> None:
        self._arm(fail)
        box = Box()
        self.h.send(qs.Show(box))
        assert box.values == [None]
        if not self.panel and not self._write():
            return
        assert self.h.journal[-1] == ("ask:panel", {"visible": True})
        self.panel = True
        self._schedule()

    @rule(fail=st.booleans())
    def turn_boundary(self, fail: bool) -> None:
        self._arm(fail)
        box = Box()
        self.h.send(qs.TurnBoundary(box))
        routed = self.wait.routed if self.wait else []
        ready = [i for i in self.items if i.outcome and not i.delivered and i.rid not in routed]
        expected = [f.key for f in self.follow_ups] + [i.rid for i in ready]
        if expected and not self._write():
            assert box.values == [[]]
            return
        assert [[_rid_of(m) for m in v] for v in box.values] == [expected]
        self.follow_ups = []
        for item in ready:
            item.delivered = True

    @rule(idle=st.booleans(), woken_after=st.booleans(), fail=st.booleans())
    def agent_activity(self, idle: bool, woken_after: bool, fail: bool) -> None:
        # ``woken_after``: a wake went out after the host's call (it reached the queue late);
        # a settle then starts the period that wake belongs to, which may not wake again.
        self._arm(fail)
        self.h.send(qs.AgentActivity(idle, woken_after=woken_after))
        self.idle = idle
        self.woken = idle and woken_after
        self._try_wake()

    @rule(wake=st.booleans(), fail=st.booleans())
    def follow_up(self, wake: bool, fail: bool) -> None:
        self._arm(fail)
        key = f"f{self._next()}"
        message = {"customType": "ask:resume-answer", "content": key, "details": {"followUp": key}}
        self.h.send(qs.FollowUp("ask:resume-answer", message, wake))
        self.follow_ups.append(MFollowUp(key, wake))
        self._try_wake()

    def _given_back(self) -> list[str]:
        """Delivered answers that could be given back (not given back already)."""
        pending = {f.key for f in self.follow_ups}
        return [i.rid for i in self.items if i.delivered and i.rid not in pending]

    @precondition(lambda self: self._given_back())
    @rule(data=st.data(), fail=st.booleans())
    def give_back(self, data: st.DataObject, fail: bool) -> None:
        # The host took the answer (a boundary or a wake) and could not pass it on.
        self._arm(fail)
        rid = data.draw(st.sampled_from(self._given_back()))
        message = {
            "customType": "ask:background-answer",
            "content": rid,
            "details": {"requestId": rid},
        }
        box = Box()
        before = len(self.h.journal)
        self.h.send(qs.GiveBack((qs.FollowUp("ask:background-answer", message, True),), box))
        if not self._write():
            assert len(box.values) == 1 and isinstance(box.values[0], Exception)
            assert box.closed
            return
        assert box.values == [None]
        # First the give-back; a wake it allows may follow at once.
        returned = ("ask:returned", {"version": 1, "messages": [message]})
        assert self.h.journal[before] == returned
        self.follow_ups.insert(0, MFollowUp(rid, True))
        self._try_wake()

    @rule(disk=st.booleans())
    def failures_on_the_disk(self, disk: bool) -> None:
        self.disk = disk
        self.h.disk = disk

    @precondition(lambda self: self.h.timers)
    @rule(fail=st.booleans())
    def wake_retry_timer_fires(self, fail: bool) -> None:
        self._arm(fail)
        self.h.timers.pop()
        self.h.send(qs.RetryWake())
        self.retry_armed = False
        self._try_wake()

    @precondition(lambda self: self.h.draft_timers)
    @rule(fail=st.booleans())
    def draft_retry_timer_fires(self, fail: bool) -> None:
        delay = self.h.draft_timers.pop(0)
        if delay > 0:
            self.draft_retry_armed = False
        self._arm(fail)
        self.h.send(qs.RetryDrafts())
        if self.dirty or self.quiesce_boxes:
            self._save_drafts()

    @precondition(lambda self: self.wait is None)
    @rule()
    def start_wait(self) -> None:
        wait_id = self._next()
        box = Box()
        self.h.send(qs.StartWait(wait_id, box))
        if self.wait is not None:
            assert box.values == [qs.WaitEnd("busy")]
            return
        members = [i.rid for i in self.items if i.outcome is None or not i.delivered]
        routed = [r for r in members if self._item(r).outcome is not None]
        self.wait = MWait(wait_id, members, routed, box, blocking=len(routed) < len(members))
        if all(self._item(r).outcome is not None for r in members):
            self._finish_wait()
        else:
            assert box.values == []

    @precondition(lambda self: self.wait is not None)
    @rule(acknowledged=st.booleans(), fail=st.booleans())
    def end_wait(self, acknowledged: bool, fail: bool) -> None:
        wait = self.wait
        assert wait is not None
        busy = Box()
        self.h.send(qs.StartWait(self._next(), busy))  # a second wait meanwhile
        assert busy.values == [qs.WaitEnd("busy")]
        acknowledged = acknowledged and wait.answered  # the waiter acks only what it got
        if acknowledged:
            # The waiter journaled the result (its delivery mark) before acknowledging.
            end = wait.reply.values[0]
            for outcome in end.results:
                self.h._delivered(outcome.request_id)
        self._arm(fail)
        self.h.send(qs.EndWait(wait.wait_id, acknowledged))
        if acknowledged:
            for rid in wait.routed:
                self._item(rid).delivered = True
        self.wait = None
        self._try_wake()

    @precondition(lambda self: self.stale_waits)
    @rule(data=st.data(), acknowledged=st.booleans())
    def stale_end_wait(self, data: st.DataObject, acknowledged: bool) -> None:
        """The waiter of a wait a session change aborted ends it late: nothing changes."""
        self.h.send(qs.EndWait(data.draw(st.sampled_from(self.stale_waits)), acknowledged))

    @precondition(lambda self: self.wait is not None)
    @rule(background_only=st.booleans())
    def mode_changed(self, background_only: bool) -> None:
        self.h.send(qs.ModeChanged(background_only))
        if background_only:
            self._finish_wait(deferred="mode_changed")

    @rule(panel=st.booleans(), fail=st.booleans(), quiesce=st.booleans(), keep=st.booleans())
    def session_change(self, panel: bool, fail: bool, quiesce: bool, keep: bool) -> None:
        """``Quiesce`` (the visible form closes, drafts are saved; not before a crash), then a
        rebuild onto the same branch from what the journal holds."""
        if quiesce:
            box = Box()
            self.h.send(qs.Quiesce(box))
            self.held = True
            self.quiesce_boxes.append(box)
            if self._visible_bg():
                self._interrupt()  # the cancelled form reports its last state
            else:
                self._save_drafts()
        marked = {
            _rid_of(m)
            for t, m in self.h.journal
            if t in ("ask:background-answer", "ask:resume-answer")
        }
        marked |= set(self.h.deliveries)
        for item in self.items:
            assert item.delivered == (item.rid in marked), item
        restored = tuple(
            qs.RestoredItem(
                AskRequest(i.rid, _PARAMS, background=True, created_at="t"),
                _FORM,
                _outcome(i.rid, i.outcome) if i.outcome else None,
                i.delivered,
            )
            for i in self.items
        )
        follow_ups = tuple(
            qs.FollowUp(
                "ask:resume-answer",
                {
                    "customType": "ask:resume-answer",
                    "content": f.key,
                    "details": {"followUp": f.key},
                },
                f.wake,
            )
            for f in self.follow_ups
        )
        if not keep:
            # Onto another branch ("new"): nothing of this one comes along.
            restored = ()
            follow_ups = ()
            self.gone |= {i.rid for i in self.items} | {f.key for f in self.follow_ups}
            self.items = []
            self.follow_ups = []
        waiting = [c for c in self.claims if self.active != ("fg", c.claim_id)]
        granted = [c for c in self.claims if self.active == ("fg", c.claim_id)]
        old_wait = self.wait
        if old_wait is not None:
            self.stale_waits.append(old_wait.wait_id)
        visible = self.active[1] if self._visible_bg() and self.active is not None else None
        cancelled = len(self.h.cancelled_forms)
        self.epoch += 1
        self._arm(fail)
        box = Box()
        self.h.send(qs.Restore(self.epoch, restored, panel, FakeJournal(), box, follow_ups))
        for claim in self.claims:
            assert claim.scope.cancelled
        if visible is not None:
            assert self.h.cancelled_forms[cancelled:] == [visible]
        for claim in waiting:
            assert claim.reply.values == [qs.Grant(claim.claim_id, self.epoch - 1)]
        for claim in granted:  # granted once, when it got the surface; never again
            assert len(claim.reply.values) == 1
        if old_wait is not None and not old_wait.answered:
            assert old_wait.reply.values == [qs.WaitEnd("aborted")]
        self.claims = []
        self.active = None
        self.panel_owner = False
        self.wait = None
        self.held = False
        self.panel = panel
        self.woken = False
        self.dirty = set()
        for i, item in enumerate(self.items):
            item.seq = self.seq + i
        self.seq += len(self.items)
        self._schedule()
        self._try_wake()
        assert box.values == ([] if self.stalled else [None])
        assert box.closed == self.stalled

    def _arm(self, fail: bool) -> None:
        if fail:
            self.armed = True
            self.h.fail_armed = True
        else:
            # An armed failure no write consumed is disarmed: each rule decides afresh.
            self.armed = False
            self.h.fail_armed = False

    def teardown(self) -> None:
        # The queue ends (disposal): whoever holds Herdr is released with one event.
        expected = [qs.HerdrChanged(False)] if self.h.state.herdr else []
        assert qs.release_all_herdr(self.h.state) == expected

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        stats = self.h.state.stats()
        assert stats.epoch == self.epoch
        assert stats.pending == tuple(i.rid for i in self.items if i.outcome is None)
        completed = tuple(i.rid for i in self.items if i.outcome is not None)
        delivered = tuple(i.rid for i in self.items if i.delivered)
        # The counts the queue keeps as it goes, and the requests they count.
        assert (stats.completed, stats.delivered) == (len(completed), len(delivered))
        assert completed_ids(self.h.state) == completed
        assert delivered_ids(self.h.state) == delivered
        assert stats.panel_visible == self.panel
        assert stats.waiting == (self.wait is not None)
        if self.active is None:
            assert stats.visible is None
        elif self.active[0] == "bg":
            assert stats.visible == f"tool:{self.active[1]}"
        else:
            assert stats.visible == f"fg:{self.active[1]}"

    @invariant()
    def the_surface_is_never_idle_with_an_eligible_claimant(self) -> None:
        if self.active is None and not self.held and self.ready:
            assert self._eligible() == []

    @invariant()
    def herdr_follows_its_owners(self) -> None:
        owners: set[str] = set()
        if self.active is not None and self.active[0] == "fg":
            owners.add(f"foreground:{self.active[1]}")
        if self.panel_owner:
            owners.add("panel")
        if self.wait is not None and self.wait.blocking:
            owners.add(f"wait:{self.wait.wait_id}")
        assert self.h.state.herdr == owners
        assert bool(owners) == bool(self.h.herdr_events and self.h.herdr_events[-1])

    @invariant()
    def deliveries_match(self) -> None:
        given_back = {f.key for f in self.follow_ups}
        for item in self.items:
            # A given-back answer waiting to go out again counts as delivered once.
            net = self.h.deliveries.get(item.rid, 0) + (item.rid in given_back)
            assert item.delivered == (net == 1), item
        assert set(self.h.deliveries) <= self.gone | {i.rid for i in self.items} | {
            _rid_of(m) for t, m in self.h.journal if t == "ask:resume-answer"
        }

    @invariant()
    def a_wake_failed_on_the_disk_has_its_retry_timer(self) -> None:
        assert self.h.state.wake_retry_armed == self.retry_armed
        assert len(self.h.timers) == int(self.retry_armed)
        assert all(0 < delay <= qs.WAKE_RETRY_MAX for delay in self.h.timers)

    @invariant()
    def quiesce_replies_once_nothing_is_open(self) -> None:
        for box in self.quiesce_boxes:
            assert box.values == [] and not box.closed
        assert len(self.h.state.quiesce_replies) == len(self.quiesce_boxes)

    @invariant()
    def only_the_visible_form_is_open(self) -> None:
        # Each start is followed by its end before the next start (of this epoch).
        current = [rid for rid, e in self.h.started if e == self.epoch]
        if self._visible_bg():
            assert self.active is not None
            assert current and current[-1] == self.active[1]


QueueMachine.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("QUEUE_MODEL_EXAMPLES", "200")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestQueueModel = QueueMachine.TestCase


@pytest.mark.parametrize("kind", ["answer", "cancel", "error"])
def test_an_uncommitted_transition_leaves_the_state_usable(kind: str) -> None:
    # The shell drops a candidate whose write failed; the state it came from must be intact.
    state = qs.initial_state()
    request = AskRequest("r1", _PARAMS, background=True, created_at="t")
    state, _ = qs.reduce(state, qs.Enqueue(request, _FORM, Box()))
    state = state.commit()
    state, _ = qs.reduce(state, qs.FormStopped("r1", 0, _FORM, _outcome("r1", kind)))
    state = state.commit()
    box = Box()
    dropped, effects = qs.reduce(state, qs.TurnBoundary(box))
    assert isinstance(effects[0], qs.MarkDelivered)
    assert delivered_ids(dropped) == ("r1",)
    assert delivered_ids(state) == ()  # never committed: the old state stands
    again, _ = qs.reduce(state, qs.TurnBoundary(Box()))
    assert delivered_ids(again.commit()) == ("r1",)


_INVARIANTS = (
    "agrees_with_the_model",
    "the_surface_is_never_idle_with_an_eligible_claimant",
    "herdr_follows_its_owners",
    "deliveries_match",
    "quiesce_replies_once_nothing_is_open",
    "only_the_visible_form_is_open",
    "a_wake_failed_on_the_disk_has_its_retry_timer",
)


def _run(*steps: tuple[str, dict[str, Any]]) -> QueueMachine:
    """Run the machine through ``steps`` (rule name, arguments), checking every invariant."""
    machine = QueueMachine()
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        for check in _INVARIANTS:
            getattr(machine, check)()
    return machine


def test_an_outcome_after_a_deferred_wait_goes_to_the_boundary() -> None:
    # The wait answered (deferred) before its member finished: the outcome is not routed to
    # it (it would be neither in its result nor ever at a boundary).
    _run(
        ("surface_ready", {}),
        ("enqueue", {}),
        ("start_wait", {}),
        ("defer", {"reason": "hidden", "fail": False}),
        ("show", {"fail": False}),
        ("answer_visible", {}),
        ("turn_boundary", {"fail": False}),
        ("end_wait", {"acknowledged": True, "fail": False}),
    )


def test_foreground_claims_are_served_oldest_first() -> None:
    _run(
        ("surface_ready", {}),
        ("acquire", {}),
        ("acquire", {}),
        ("enqueue", {}),
        ("release_oldest", {}),
    )


def test_reply_of_finds_the_reply_channel_or_none() -> None:
    box = Box()
    assert qs.reply_of(qs.Show(box)) is box
    assert qs.reply_of(qs.SurfaceReady()) is None
    assert qs.reply_of(qs.TryWake()) is None


def test_a_queue_that_shows_no_background_forms_gives_the_surface_to_the_claim_only() -> None:
    # ``open_runtime(background_forms=False)`` (the ``ask`` command): a pending background
    # request stays pending, without a form started for it, before and after the claim.
    state = qs.initial_state(background_shown=False)
    request = AskRequest("r1", _PARAMS, background=True, created_at="t")
    state, effects = qs.reduce(state, qs.Enqueue(request, _FORM, Box()))
    state = state.commit()
    assert not any(isinstance(effect, qs.StartForm) for effect in effects)
    reply = Box()
    state, effects = qs.reduce(state, qs.AcquireSurface("c1", "fg:c1", Commands(), Scope(), reply))
    state = state.commit()
    assert state.active is not None and state.active.claim is not None
    state, effects = qs.reduce(state, qs.ReleaseSurface("c1"))
    state = state.commit()
    assert state.active is None
    assert not any(isinstance(effect, qs.StartForm) for effect in effects)
    assert state.stats().pending == ("r1",)
