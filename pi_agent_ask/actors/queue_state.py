"""The queue's rules as a pure reducer: ``reduce(QueueState, message) -> (QueueState, effects)``.

No awaits, no Trio, no I/O: the actor in ``queue.py`` performs the effects in order and commits
the new state only once they all succeeded. Channels, cancel scopes and the journal appear here
only as opaque handles (the protocols below) that effects carry back to the shell.

The queue owns:

- the FIFO of background requests of the current epoch, each with its latest draft and, once
  finished, its outcome until it is delivered (``Item.outcome``);
- the surface: which claimant (a background form, or a foreground form waiting in its tool
  call) is visible now;
- panel visibility (defer / reopen), persisted so it follows the branch;
- delivery bookkeeping: which outcomes and follow-ups reached the agent;
- the active wait, if any;
- the Herdr owners: the visible panel, each active wait, each active foreground form.

Rules stated once:

1. **Recorded before delivered.** An outcome is journaled before the queue hears of it (the
   form task journals before ``FormStopped``); a delivery mark (``MarkDelivered``) is the first
   effect of the transition that hands the message out (``Wake``, or the reply to a turn
   boundary), so the message leaves only once its mark is on the branch.
2. **One write, first.** A transition has at most one journal write, and it is its first
   effect; everything after it depends on it. If the write fails, none of the transition
   happened: the shell keeps the old state. Work that must not depend on a write goes before
   it, as a transition of its own (``Continue``).
3. **FIFO surface.** Claimants get the surface strictly in arrival order (one sequence number
   for background requests and foreground claims); a background request is eligible only
   while the panel is visible, the surface is ready and nothing holds the queue (``Quiesce``),
   and never in a runtime that shows no background form (``background_shown``: ``ask``).
   A withdrawn claim never lets a later one overtake the active one.
4. **Routing.** A completed outcome in the active wait's set is routed to it and nowhere else;
   the wait answers once every member has an outcome (or is deferred first). A wait that ends
   without acknowledging gives its routed outcomes back; an acknowledged, answered wait marks
   them delivered. Membership is kept on the item (``member_of``) and the wait counts its
   outstanding members, so routing a completion is O(1).
5. **Waking.** An idle wake sends at most one message per idle period: a waking follow-up, else
   the first ready, non-cancelled outcome in FIFO order. Cancellations and errors never wake;
   they go out at the next boundary. A wake whose delivery mark failed on the disk is retried
   by a timer (``ScheduleWakeRetry``, backoff doubling from ``WAKE_RETRY_FIRST`` up to
   ``WAKE_RETRY_MAX``), one timer at a time, so it is not left for the next event.
   Drafts whose write failed on the disk stay dirty and are written again by a timer of their
   own (``ScheduleDraftRetry``, backoff from ``DRAFT_RETRY_FIRST``); while ``Quiesce`` callers
   wait, a failure is retried at once, up to ``DRAFT_QUIESCE_RETRIES`` failures in a row, after
   which they hear that their drafts were not saved (the timed retries go on).
6. **Epochs.** Messages from a form of an older epoch are dropped. ``Restore`` ends everything
   of the old epoch before the new one starts: the visible form, every foreground claim (a
   claim still waiting is granted its cancelled scope), the wait (aborted unless answered).
7. **Herdr** is blocked while any owner exists; ``HerdrChanged(False)`` when the last one ends.
"""

from __future__ import annotations

from typing import Literal

import attrs

from pi_agent_ask.actors.queue_data import (
    DELIVERED,
    Active,
    Claim,
    Item,
    QueueState,
    Table,
    Wait,
    active_flow,
    initial_state,
)
from pi_agent_ask.actors.queue_effects import (
    DEFER_NOT_RECORDED_TEXT,
    DRAFT_NOT_SAVED_TEXT,
    DRAFT_QUIESCE_RETRIES,
    DRAFT_RETRY_FIRST,
    WAKE_RETRY_FIRST,
    WAKE_RETRY_MAX,
    WRITES,
    Append,
    CancelClaim,
    CancelForm,
    CloseReply,
    Continue,
    Effect,
    HerdrChanged,
    MarkDelivered,
    Reply,
    ReplyCommands,
    ScheduleDraftRetry,
    ScheduleFlush,
    ScheduleWakeRetry,
    StartForm,
    UseJournal,
    Wake,
    draft_retry_delay,
    wake_retry_delay,
)
from pi_agent_ask.actors.queue_messages import (
    AcquireSurface,
    AgentActivity,
    CommandSink,
    Defer,
    DraftChanged,
    EndWait,
    Enqueue,
    Entry,
    FindFlow,
    FlushDrafts,
    FollowUp,
    FormStopped,
    GiveBack,
    Grant,
    Inspect,
    JournalHandle,
    Json,
    ModeChanged,
    QueueMessage,
    QueueStats,
    Quiesce,
    Recording,
    ReleaseSurface,
    ReplyTo,
    Restore,
    RestoredItem,
    RetryDrafts,
    RetryWake,
    SaveDrafts,
    Show,
    StartWait,
    SurfaceReady,
    TryWake,
    TurnBoundary,
    Unrecorded,
    WaitEnd,
    WaitReason,
    reply_of,
)
from pi_agent_ask.actors.queue_step import (
    Step,
)
from pi_agent_ask.actors.records import Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts

__all__ = [
    "DEFER_NOT_RECORDED_TEXT",
    "DELIVERED",
    "DRAFT_QUIESCE_RETRIES",
    "DRAFT_RETRY_FIRST",
    "WAKE_RETRY_FIRST",
    "WAKE_RETRY_MAX",
    "WRITES",
    "AcquireSurface",
    "AgentActivity",
    "Append",
    "CancelClaim",
    "CancelForm",
    "CloseReply",
    "CommandSink",
    "Continue",
    "Defer",
    "DraftChanged",
    "Effect",
    "EndWait",
    "Enqueue",
    "Entry",
    "FindFlow",
    "FlushDrafts",
    "FollowUp",
    "FormStopped",
    "GiveBack",
    "Grant",
    "HerdrChanged",
    "Inspect",
    "Item",
    "JournalHandle",
    "Json",
    "MarkDelivered",
    "ModeChanged",
    "QueueMessage",
    "QueueState",
    "QueueStats",
    "Quiesce",
    "Recording",
    "ReleaseSurface",
    "Reply",
    "ReplyCommands",
    "ReplyTo",
    "Restore",
    "RestoredItem",
    "RetryDrafts",
    "RetryWake",
    "SaveDrafts",
    "ScheduleDraftRetry",
    "ScheduleFlush",
    "ScheduleWakeRetry",
    "Show",
    "StartForm",
    "StartWait",
    "SurfaceReady",
    "Table",
    "TryWake",
    "TurnBoundary",
    "Unrecorded",
    "UseJournal",
    "WaitEnd",
    "WaitReason",
    "Wake",
    "active_flow",
    "draft_retry_delay",
    "initial_state",
    "reduce",
    "release_all_herdr",
    "reply_of",
    "wake_retry_delay",
]


# ------------------------------------------------------------------------------------------
# The reducer
# ------------------------------------------------------------------------------------------


def reduce(state: QueueState, message: QueueMessage) -> tuple[QueueState, list[Effect]]:
    """The queue's next state and the effects that make it true, in order. ``state`` is left
    as it was; ``commit()`` the result once the effects succeeded."""
    step = Step(state)
    match message:
        case Enqueue():
            _enqueue(step, message)
        case AcquireSurface():
            s = step.s
            claim = Claim(
                message.claim_id,
                s.next_seq,
                message.flow_id,
                message.commands,
                message.scope,
                message.reply,
            )
            step.set(claims=(*s.claims, claim), next_seq=s.next_seq + 1)
            _schedule(step)
        case ReleaseSurface(claim_id=claim_id):
            _release(step, claim_id)
        case DraftChanged(request_id=rid, epoch=epoch, form=form, saved=saved):
            _draft_changed(step, rid, epoch, form, saved)
        case FormStopped():
            _form_stopped(step, message)
        case Defer(reason=reason, reply=reply):
            _defer(step, reason)
            step.emit(Reply(reply, None))
        case Show(reply=reply):
            if not step.s.panel_visible:
                step.emit(Append((("ask:panel", {"visible": True}),)))
                step.set(panel_visible=True)
            _schedule(step)
            step.emit(Reply(reply, None))
        case TurnBoundary(reply=reply, text_only=text_only):
            messages: list[Json] = []
            if step.s.tui and text_only:
                follow_ups: list[FollowUp] = []
                kept: list[FollowUp] = []
                for follow_up in step.s.follow_ups:
                    pictured = texts.has_image_blocks(follow_up.message)
                    (kept if pictured else follow_ups).append(follow_up)
                # Each answer's message made once: the ones without image blocks go out as made.
                items: list[Item] = []
                answers: list[Json] = []
                for item in _ready(step.s):
                    answer = _answer_message(item)
                    if not texts.has_image_blocks(answer):
                        items.append(item)
                        answers.append(answer)
                messages = _deliver(step, tuple(follow_ups), items, tuple(kept), answers)
            elif step.s.tui:
                messages = _deliver(step, step.s.follow_ups, _ready(step.s))
            step.emit(Reply(reply, messages))
        case AgentActivity(idle=idle, woken_after=woken_after):
            step.set(idle=idle, woken=idle and woken_after)
            step.later(TryWake())
        case StartWait():
            _start_wait(step, message)
        case EndWait(wait_id=wait_id, acknowledged=acknowledged):
            _end_wait(step, wait_id, acknowledged)
        case FindFlow(flow_id=flow_id, reply=reply):
            active = active_flow(step.s, flow_id)
            if active is None:
                step.emit(Reply(reply, None))
            else:
                commands = active.claim.commands if active.claim is not None else None
                step.emit(ReplyCommands(reply, commands, active.request_id))
        case ModeChanged(background_only=background_only):
            if background_only:
                _finish_wait(step, deferred="mode_changed")
        case FlushDrafts():
            step.set(flush_scheduled=False)
            step.later(SaveDrafts())
        case SaveDrafts():
            _save_drafts(step)
        case RetryWake():
            step.set(wake_retry_armed=False)
            step.later(TryWake())
        case RetryDrafts():
            step.set(draft_retry_armed=False)
            step.later(SaveDrafts())
        case Restore():
            _restore(step, message)
        case Inspect(reply=reply, params_of=params_of):
            step.emit(Reply(reply, step.s.stats(params_of)))
        case FollowUp():
            step.set(follow_ups=(*step.s.follow_ups, message))
            step.later(TryWake())
        case GiveBack(follow_ups=given, reply=reply):
            if given:
                returned = {"version": 1, "messages": [f.message for f in given]}
                step.emit(Append((("ask:returned", returned),)))
                step.set(follow_ups=(*given, *step.s.follow_ups))
                step.later(TryWake())
            step.emit(Reply(reply, None))
        case TryWake(reply=reply):
            _try_wake(step)
            if reply is not None:
                step.emit(Reply(reply, None))
        case SurfaceReady():
            step.set(surface_ready=True)
            _schedule(step)
        case Unrecorded(message=failed, error=error):
            _unrecorded(step, failed, error)
        case Quiesce(reply=reply):
            step.set(held=True, quiesce_replies=(*step.s.quiesce_replies, reply))
            active = step.s.active
            if active is not None and active.request_id is not None:
                # Its FormStopped saves the draft, then the Quiesce callers hear back.
                step.emit(CancelForm(active.request_id))
            else:
                step.later(SaveDrafts())
    return step.result()


# -- herdr ----------------------------------------------------------------------------------


def _herdr_add(step: Step, owner: str) -> None:
    if not step.field("tui"):
        return
    herdr = step.field("herdr")
    if not herdr:
        step.emit(HerdrChanged(True))
    step.set(herdr=herdr | {owner})


def _herdr_remove(step: Step, owner: str) -> None:
    herdr = step.field("herdr")
    if owner not in herdr:
        return
    step.set(herdr=herdr - {owner})
    if herdr == {owner}:
        step.emit(HerdrChanged(False))


def release_all_herdr(state: QueueState) -> list[Effect]:
    """The effects of the queue ending: the Herdr owners go."""
    return [HerdrChanged(False)] if state.herdr else []


# -- requests and the surface ----------------------------------------------------------------


def _enqueue(step: Step, message: Enqueue) -> None:
    request = message.request
    s = step.s
    rid = request.request_id
    recording = message.recording
    joining = s.items.get(rid) is None
    if recording is not None:
        # The count this transition ends with: the request below joins unless already queued.
        # The transition's first effect, its one write.
        pending = s.pending_count + joining
        entries = (*recording.entries, recording.result_entry(pending))
        step.emit(Append(entries, recording.writer))
    if joining:
        seq = s.next_seq
        wait = s.wait
        if wait is not None and not wait.answered:
            item = Item(request, seq, message.form, member_of=wait.wait_id)
            late = attrs.evolve(wait, late=(*wait.late, rid), outstanding=wait.outstanding + 1)
            step.set(wait=late)
        else:
            item = Item(request, seq, message.form)
        step.put(item)
    step.emit(Reply(message.reply, step.field("pending_count")))
    _schedule(step)


def _release(step: Step, claim_id: int) -> None:
    step.set(claims=tuple(c for c in step.s.claims if c.claim_id != claim_id))
    active = step.s.active
    if active is not None and active.claim is not None and active.claim.claim_id == claim_id:
        step.set(active=None)
        _herdr_remove(step, f"foreground:{claim_id}")
    _schedule(step)


def _first_pending(step: Step) -> Item | None:
    """The oldest request without an outcome; advances ``pending_head`` past answered ones."""
    start: int = step.field("pending_head")
    end: int = step.field("next_seq")
    by_seq, items = step.field("by_seq"), step.field("items")
    head = start
    found: Item | None = None
    while head < end:
        rid = by_seq.get(head)
        if rid is not None:
            item = items.get(rid)
            if item is not None and item.outcome is None:
                found = item
                break
        head += 1
    if head != start:
        step.set(pending_head=head)
    return found


def _schedule(step: Step) -> None:
    """Give the surface to the next claimant when nobody holds it."""
    # Read through ``field``: the transition's changes so far, without building a state.
    if step.field("active") is not None or step.field("held") or not step.field("surface_ready"):
        return
    shown = step.field("tui") and step.field("panel_visible") and step.field("background_shown")
    first = _first_pending(step) if shown else None
    claims: tuple[Claim, ...] = step.field("claims")
    if claims:
        best_claim = min(claims, key=lambda c: c.seq)
        if first is None or best_claim.seq < first.seq:
            step.set(active=Active(best_claim.flow_id, claim=best_claim))
            _herdr_add(step, f"foreground:{best_claim.claim_id}")
            step.emit(Reply(best_claim.reply, Grant(best_claim.claim_id, step.field("epoch"))))
            return
    if first is not None:
        request = first.request
        step.set(active=Active(request.flow_id, request.request_id))
        _herdr_add(step, "panel")
        form = first.form
        if not isinstance(form, fs.FormState):  # shown for the first time, without a draft
            assert form is not None  # pending (``Item.form``)
            form = fs.new_form(request.params, form, background=True)
        step.emit(StartForm(request, form, step.field("epoch")))


def _draft_changed(
    step: Step, request_id: str, epoch: int, form: fs.FormState, saved: ReplyTo[str | None] | None
) -> None:
    item = step.s.items.get(request_id)
    if epoch != step.s.epoch or item is None or item.outcome is not None:
        if saved is not None:
            step.emit(CloseReply(saved))  # no draft of this form is written any more
        return
    step.put(attrs.evolve(item, form=form))
    step.set(dirty=step.s.dirty | {request_id})
    if saved is not None:
        # Its sender waits for the write: it goes now, not after the draft delay.
        step.set(draft_waiters=(*step.s.draft_waiters, saved))
        step.later(SaveDrafts())
    elif not step.s.flush_scheduled:
        step.set(flush_scheduled=True)
        step.emit(ScheduleFlush())


def _save_drafts(step: Step) -> None:
    """Write the dirty drafts (one write); answer ``Quiesce`` once nothing is open."""
    s = step.s
    entries = []
    for rid in sorted(s.dirty):  # sorted: the journal's order never depends on hashing
        item = s.items.get(rid)
        if item is not None and isinstance(item.form, fs.FormState):  # a draft (``Item.form``)
            entries.append(("ask:draft", {"requestId": rid, "form": fs.state_to_json(item.form)}))
    if entries:
        step.emit(Append(tuple(entries)))
        step.set(draft_failures=0)  # committed only once the write succeeded
    step.set(dirty=frozenset())
    for saved in s.draft_waiters:  # written (the write failed: ``_unrecorded`` says so)
        step.emit(Reply(saved, None))
        step.emit(CloseReply(saved))
    step.set(draft_waiters=())
    active = step.s.active
    if step.s.quiesce_replies and (active is None or active.request_id is None):
        for reply in step.s.quiesce_replies:
            step.emit(Reply(reply, None))
        step.set(quiesce_replies=())


def _form_stopped(step: Step, message: FormStopped) -> None:
    rid = message.request_id
    s = step.s  # as the transition began: the changes below leave what it reads as it was
    item = s.items.get(rid)
    if message.epoch == s.epoch and item is not None:
        active = s.active
        if active is not None and active.request_id == rid:
            step.set(active=None)
            _herdr_remove(step, "panel")
        if item.outcome is None:
            if message.outcome is None:
                # Interrupted (hidden, deferred): keep the draft on the branch right away.
                step.put(attrs.evolve(item, form=message.form))
                step.set(dirty=s.dirty | {rid})
            else:
                # Answered: the form is done with (``Item.form``).
                step.put(attrs.evolve(item, form=None, outcome=message.outcome))
                if item.seq == s.pending_head:
                    # Nothing below it is pending now (``_first_pending`` starts past it).
                    step.set(pending_head=item.seq + 1)
                step.set(dirty=s.dirty - {rid})
                _route_completion(step, rid)
                step.later(TryWake())
        _schedule(step)
    # The draft write (and the Quiesce replies waiting for this form) come last, on their own.
    step.later(SaveDrafts())


# -- panel --------------------------------------------------------------------------------------


def _defer(step: Step, reason: Literal["hidden", "user_message"]) -> None:
    if step.s.panel_visible:
        step.emit(Append((("ask:panel", {"visible": False}),)))
        step.set(panel_visible=False)
    active = step.s.active
    if active is not None and active.request_id is not None:
        step.emit(CancelForm(active.request_id))
    _herdr_remove(step, "panel")
    _finish_wait(step, deferred=reason)


# -- delivery -----------------------------------------------------------------------------------


def _ready(state: QueueState) -> list[Item]:
    """Outcomes not delivered and not routed to a wait, in FIFO order."""
    ready = []
    for seq in sorted(state.undelivered.keys()):
        rid = state.undelivered.get(seq)
        item = state.items.get(rid) if rid is not None else None
        if item is not None and item.routed_to is None:
            ready.append(item)
    return ready


def _deliver(
    step: Step,
    follow_ups: tuple[FollowUp, ...],
    items: list[Item],
    remaining: tuple[FollowUp, ...] = (),
    answers: list[Json] | None = None,
) -> list[Json]:
    """Hand out ``follow_ups`` then the answers of ``items``, all marked in one write: either
    every message is recorded as delivered and goes out, or none is. ``remaining`` are the
    follow-ups left for later; ``answers`` the items' messages, when made already."""
    if answers is None:
        answers = [_answer_message(item) for item in items]
    entries = [(f.entry_type, f.message) for f in follow_ups]
    entries += [("ask:background-answer", message) for message in answers]
    if entries:
        step.emit(MarkDelivered(tuple(entries)))
    step.set(follow_ups=remaining)
    for item in items:
        step.put(attrs.evolve(item, outcome=DELIVERED, delivered=True))
    return [f.message for f in follow_ups] + answers


def _answer_message(item: Item) -> Json:
    """The message that delivers a completed item's outcome (not delivered yet: it has it)."""
    assert isinstance(item.outcome, Outcome)
    return texts.background_answer_message(item.outcome, params=item.request.params)


def _try_wake(step: Step) -> None:
    s = step.s
    if not (s.tui and s.idle) or s.woken:
        return
    waking = next((i for i, f in enumerate(s.follow_ups) if f.wake), None)
    if waking is not None:
        rest = s.follow_ups[:waking] + s.follow_ups[waking + 1 :]
        [message] = _deliver(step, (s.follow_ups[waking],), [], rest)
        step.set(woken=True, wake_failures=0)
        step.emit(Wake(message))
        return
    for item in _ready(s):
        outcome = item.outcome  # ready: not delivered, so an ``Outcome``
        if (
            isinstance(outcome, Outcome)
            and outcome.result is not None
            and not outcome.result.cancelled
        ):
            [message] = _deliver(step, (), [item], s.follow_ups)
            step.set(woken=True, wake_failures=0)
            step.emit(Wake(message))
            return


# -- waits -------------------------------------------------------------------------------------


def _route_completion(step: Step, rid: str) -> None:
    wait: Wait | None = step.field("wait")
    if wait is None or wait.answered:
        return
    item = step.field("items").get(rid)
    assert item is not None
    if item.member_of != wait.wait_id:
        return
    step.put(attrs.evolve(item, routed_to=wait.wait_id))
    wait = attrs.evolve(wait, outstanding=wait.outstanding - 1)
    step.set(wait=wait)
    if wait.outstanding == 0:
        _finish_wait(step)


def _start_wait(step: Step, message: StartWait) -> None:
    s = step.s
    if s.wait is not None:
        step.emit(Reply(message.reply, WaitEnd("busy")))
        return
    members = []
    outstanding = 0
    for item in list(s.ordered()):
        if item.outcome is None:
            outstanding += 1
        elif item.delivered or item.routed_to is not None:
            continue
        members.append(item.request.request_id)
        routed = message.wait_id if item.outcome is not None else None
        step.put(attrs.evolve(item, member_of=message.wait_id, routed_to=routed))
    step.set(wait=Wait(message.wait_id, tuple(members), message.reply, outstanding))
    if outstanding == 0:
        # Nothing left to wait for (no member, or all answered): it returns at once and never
        # blocks on the person, so Herdr hears nothing.
        _finish_wait(step)
    else:
        _herdr_add(step, f"wait:{message.wait_id}")


def _finish_wait(step: Step, deferred: WaitReason | None = None) -> None:
    wait = step.s.wait
    if wait is None or wait.answered:
        return
    results = []
    pending = []
    for rid in wait.all_members():
        item = step.s.items.get(rid)
        assert item is not None
        outcome = item.outcome
        if outcome is None:
            pending.append(rid)
        elif item.routed_to == wait.wait_id:
            assert isinstance(outcome, Outcome)  # routed: not delivered (``Item.outcome``)
            results.append(outcome)
    end = WaitEnd(
        "deferred" if deferred else "complete",
        request_ids=tuple(wait.all_members()),
        pending_request_ids=tuple(pending) if deferred else (),
        results=tuple(results),
        reason=deferred,
    )
    step.set(wait=attrs.evolve(wait, answered=True))
    step.emit(Reply(wait.reply, end))


def _end_wait(step: Step, wait_id: int, acknowledged: bool) -> None:
    wait = step.s.wait
    if wait is None or wait.wait_id != wait_id:
        return
    step.set(wait=None)
    _herdr_remove(step, f"wait:{wait_id}")
    for rid in wait.all_members():
        item = step.s.items.get(rid)
        if item is None:
            continue
        if item.routed_to == wait_id and acknowledged and wait.answered:
            # Delivered by the wait's result: its outcome goes (``Item.outcome``).
            left = attrs.evolve(
                item, outcome=DELIVERED, delivered=True, member_of=None, routed_to=None
            )
        else:
            left = attrs.evolve(item, member_of=None, routed_to=None)
        step.put(left)
    step.later(TryWake())


# -- session change ---------------------------------------------------------------------------


def _restore(step: Step, message: Restore) -> None:
    s = step.s
    # Everything of the old epoch ends first: the visible form, every foreground claim, the
    # wait.
    active = s.active
    granted = active.claim.claim_id if active is not None and active.claim is not None else None
    if active is not None:
        if active.request_id is not None:
            step.emit(CancelForm(active.request_id))
        else:
            assert active.claim is not None
            step.emit(CancelClaim(active.claim.scope))
    for claim in s.claims:
        if claim.claim_id != granted:
            step.emit(CancelClaim(claim.scope))
            # A claim still waiting for the surface is granted its cancelled scope, so its
            # call ends as interrupted instead of waiting for a grant forever.
            step.emit(Reply(claim.reply, Grant(claim.claim_id, s.epoch)))
    if s.wait is not None and not s.wait.answered:
        # An answered wait already holds its result (the reply's one slot is full).
        step.emit(Reply(s.wait.reply, WaitEnd("aborted")))
    step.emit(UseJournal(message.journal))
    if s.herdr:
        step.emit(HerdrChanged(False))
    step.own_tables()
    for seq, restored in enumerate(message.items, start=s.next_seq):
        form = restored.form if restored.outcome is None else None
        outcome, delivered = restored.outcome, restored.delivered
        step.put(Item(restored.request, seq, form, outcome=outcome, delivered=delivered))
    step.set(
        epoch=message.epoch,
        first_seq=s.next_seq,
        pending_head=s.next_seq,
        dirty=frozenset(),
        claims=(),
        active=None,
        wait=None,
        herdr=frozenset(),
        follow_ups=tuple(message.follow_ups),
        held=False,
        panel_visible=message.panel_visible,
        woken=False,
    )
    _schedule(step)
    # The reply goes after the wake: the caller sees the new epoch with its wake sent.
    step.later(TryWake(message.reply))


def _unrecorded(step: Step, message: QueueMessage, error: Exception | None) -> None:
    """The reply to a message whose journal write failed: nothing was shown, hidden,
    delivered or enqueued. Other callers see their reply channel closed. A wake that failed on
    the disk is tried again later (``_retry_wake``)."""
    disk = isinstance(error, OSError)
    match message:
        case Enqueue(recording=Recording(), reply=reply) if error is not None:
            step.emit(Reply(reply, error))
            step.emit(CloseReply(reply))
        case GiveBack(reply=reply) if error is not None:
            step.emit(Reply(reply, error))
            step.emit(CloseReply(reply))
        case Defer(reply=reply) | Show(reply=reply):  # a Defer hears why nothing was put back
            said = DEFER_NOT_RECORDED_TEXT.format(error=error) if type(message) is Defer else None
            step.emit(Reply(reply, said))
            step.emit(CloseReply(reply))
        case TurnBoundary(reply=reply):
            step.emit(Reply(reply, []))
            step.emit(CloseReply(reply))
        case SaveDrafts():
            # The drafts stay dirty (none of the transition happened). A disk failure may pass:
            # the write is tried again by a timer, and Quiesce callers wait for a few retries;
            # a sender waiting for its draft hears now that it is not written yet.
            for saved in step.s.draft_waiters:
                step.emit(Reply(saved, DRAFT_NOT_SAVED_TEXT.format(error=error)))
                step.emit(CloseReply(saved))
            step.set(draft_waiters=())
            failures = step.s.draft_failures + 1 if disk else 0
            waiting = disk and bool(step.s.quiesce_replies) and failures <= DRAFT_QUIESCE_RETRIES
            if disk:
                step.set(draft_failures=failures)
                if waiting:
                    # Someone is closing or leaving the branch: try again at once (a pass
                    # through the scheduler, no timer), a few times.
                    step.emit(ScheduleDraftRetry(0.0))
                elif not step.s.draft_retry_armed:
                    step.set(draft_retry_armed=True)
                    step.emit(ScheduleDraftRetry(draft_retry_delay(failures)))
            if not waiting:
                for quiesced in step.s.quiesce_replies:
                    step.emit(CloseReply(quiesced))
                step.set(quiesce_replies=())
        case TryWake(reply=reply):
            if reply is not None:
                step.emit(CloseReply(reply))
            if disk:
                _retry_wake(step)
        case _:
            other = reply_of(message)
            if other is not None:
                step.emit(CloseReply(other))


def _retry_wake(step: Step) -> None:
    """Arm the wake retry timer after a disk failure of a wake's mark, unless it runs already
    (its ``RetryWake`` tries the wake then). Each failure in a row doubles the wait."""
    failures = step.s.wake_failures + 1
    step.set(wake_failures=failures)
    if not step.s.wake_retry_armed:
        step.set(wake_retry_armed=True)
        step.emit(ScheduleWakeRetry(wake_retry_delay(failures)))
