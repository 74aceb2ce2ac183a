"""The queue actor: the one input surface, the background FIFO, deliveries, waits and Herdr.

The queue owns, and is the only task that changes:

- the FIFO of background requests, each with its latest draft and, once finished, its outcome;
- the surface: which claimant (a background form, or a foreground form waiting in its tool
  call) is visible now. Claimants are served strictly in arrival order; a background request is
  eligible only while the panel is visible. A foreground claim that is withdrawn (its call was
  cancelled) never lets a later claimant overtake the one that is active;
- panel visibility (defer / reopen), persisted so it follows the branch. Nothing is shown
  before the host's surface is ready (``SurfaceReady``);
- delivery bookkeeping: each outcome reaches the agent exactly once, through a turn boundary, an
  idle wake, or a ``wait_for_answers`` result, and only after it was journaled;
- the active wait, if any;
- the Herdr blocked owners: the visible panel, each active wait, each active foreground form.

Rules stated once:

1. An outcome is journaled before anything can see it (the form task journals before it
   reports ``FormStopped``; the queue journals the delivery mark before handing a message out).
2. A completed outcome is *routed* to the active wait when it is in the wait's set; routed
   outcomes never go to boundaries or wakes. A wait that ends without acknowledging (aborted)
   gives its routed outcomes back.
3. An idle wake sends at most one message per idle period: the first ready, non-cancelled
   outcome in FIFO order. Cancellations and errors never wake; they go out at the next boundary.
4. Messages from a form of an older epoch (before a session change) are dropped.
5. A session change (``Restore``) ends everything of the old epoch before the new one starts:
   the visible form, every foreground claim (a claim still waiting is granted its cancelled
   scope, so its call ends as interrupted instead of waiting forever), and the wait (aborted,
   unless it was already answered: its waiter keeps that answer). The follow-ups it carries
   (recorded on the new branch, not yet delivered) replace the old ones.

The queue never sends into a form's inbox and never blocks on the host: replies go through
one-shot channels with a buffer of one, and wakeups through the runtime's wake channel whose
buffer is unbounded (the host may be busy for a long time; a wake must never stall the queue).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Literal, TypeVar

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.records import AskRequest, Outcome, StaleBranch
from pi_agent_ask.form import state as fs

WaitReason = Literal["hidden", "user_message", "mode_changed"]

# ------------------------------------------------------------------------------------------
# Messages (a closed set; each reply channel is one-shot with a buffer of one)
# ------------------------------------------------------------------------------------------


@attrs.frozen
class Enqueue:
    request: AskRequest
    form: fs.FormState
    reply: trio.MemorySendChannel[int]


@attrs.frozen
class Grant:
    claim_id: int
    epoch: int


@attrs.frozen
class AcquireSurface:
    """A foreground form asks for the surface; the reply is its grant, in FIFO order."""

    claim_id: int
    flow_id: str
    commands: trio.MemorySendChannel[Any]
    scope: trio.CancelScope
    reply: trio.MemorySendChannel[Grant]


@attrs.frozen
class ReleaseSurface:
    claim_id: int


@attrs.frozen
class DraftChanged:
    request_id: str
    epoch: int
    form: fs.FormState


@attrs.frozen
class FormStopped:
    """A background form task ended: with an outcome (journaled already) or interrupted."""

    request_id: str
    epoch: int
    form: fs.FormState
    outcome: Outcome | None


@attrs.frozen
class Defer:
    reason: Literal["hidden", "user_message"]
    reply: trio.MemorySendChannel[None]


@attrs.frozen
class Show:
    reply: trio.MemorySendChannel[None]


@attrs.frozen
class TurnBoundary:
    reply: trio.MemorySendChannel[list[dict[str, Any]]]


@attrs.frozen
class AgentActivity:
    idle: bool


@attrs.frozen
class StartWait:
    wait_id: int
    reply: trio.MemorySendChannel[WaitEnd]


@attrs.frozen
class EndWait:
    """The waiter is done: ``acknowledged`` when its result was journaled and returned."""

    wait_id: int
    acknowledged: bool


@attrs.frozen
class FindFlow:
    flow_id: str
    reply: trio.MemorySendChannel[trio.MemorySendChannel[Any] | None]


@attrs.frozen
class ModeChanged:
    background_only: bool


@attrs.frozen
class FlushDrafts:
    pass


@attrs.frozen
class Restore:
    """Replace everything with the state rebuilt from a new branch (session change).

    ``follow_ups`` are the branch's recorded but undelivered follow-up messages (a recovered
    form answered before the session changed); they go out as if just sent.
    """

    epoch: int
    items: tuple[RestoredItem, ...]
    panel_visible: bool
    journal: Any
    reply: trio.MemorySendChannel[None]
    follow_ups: tuple[FollowUp, ...] = ()


@attrs.frozen
class RestoredItem:
    request: AskRequest
    form: fs.FormState
    outcome: Outcome | None
    delivered: bool


@attrs.frozen
class Inspect:
    reply: trio.MemorySendChannel[QueueStats]


@attrs.frozen
class Quiesce:
    """Close the visible background form and save every draft; reply once all is saved.

    Sent before a session change (so the old branch keeps what the person typed) and at
    disposal. Nothing new is shown until the next ``Restore``.
    """

    reply: trio.MemorySendChannel[None]


@attrs.frozen
class SurfaceReady:
    """The host's input surface is up: forms, recovered ones first, may be shown now.

    A queue started with ``surface_ready=False`` shows nothing, and so emits no Herdr event,
    until this arrives; the runtime sends it once the ``async with`` body runs, so handlers
    registered at the top of the body see every event.
    """


@attrs.frozen
class FollowUp:
    """A message for the agent that is not a background answer (a recovered form's answer).

    It wakes an idle agent at once, or goes out at the next turn boundary; journaled as
    ``entry_type`` before either, exactly once.
    """

    entry_type: str
    message: dict[str, Any]
    wake: bool


QueueMessage = (
    Enqueue
    | AcquireSurface
    | ReleaseSurface
    | DraftChanged
    | FormStopped
    | Defer
    | Show
    | TurnBoundary
    | AgentActivity
    | StartWait
    | EndWait
    | FindFlow
    | ModeChanged
    | FlushDrafts
    | Restore
    | Inspect
    | FollowUp
    | Quiesce
    | SurfaceReady
)


# ------------------------------------------------------------------------------------------
# Replies and snapshots
# ------------------------------------------------------------------------------------------


@attrs.frozen
class WaitEnd:
    """How a wait ended. ``status`` is ``complete``, ``deferred``, ``busy`` or ``aborted``."""

    status: Literal["complete", "deferred", "busy", "aborted"]
    request_ids: tuple[str, ...] = ()
    pending_request_ids: tuple[str, ...] = ()
    results: tuple[Outcome, ...] = ()
    reason: WaitReason | None = None


@attrs.frozen
class QueueStats:
    """A snapshot for tests and the status line."""

    epoch: int
    pending: tuple[str, ...]
    completed: tuple[str, ...]
    delivered: tuple[str, ...]
    visible: str | None
    panel_visible: bool
    herdr_owners: frozenset[str]
    waiting: bool
    params: tuple[tuple[str, Any], ...] = ()


# ------------------------------------------------------------------------------------------
# The actor
# ------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Item:
    request: AskRequest
    seq: int
    form: fs.FormState
    outcome: Outcome | None = None
    delivered: bool = False
    routed_to: int | None = None
    draft_dirty: bool = False


@attrs.define(eq=False)
class _Claim:
    claim_id: int
    seq: int
    flow_id: str
    commands: trio.MemorySendChannel[Any]
    scope: trio.CancelScope
    reply: trio.MemorySendChannel[Grant]


@attrs.define(eq=False)
class _Active:
    kind: Literal["background", "foreground"]
    key: str | int  # request id (background) or claim id (foreground)
    flow_id: str
    commands: trio.MemorySendChannel[Any] | None
    scope: trio.CancelScope


@attrs.define(eq=False)
class _Wait:
    wait_id: int
    members: list[str]
    reply: trio.MemorySendChannel[WaitEnd]
    answered: bool = False


BackgroundRunner = Callable[
    [
        AskRequest,
        fs.FormState,
        int,
        trio.CancelScope,
        trio.MemorySendChannel[Any],
        trio.MemoryReceiveChannel[Any],
    ],
    Awaitable[None],
]
Journal = Any  # the persistence handle: ``append``, ``append_many``, ``branch``
Messenger = Callable[[Outcome, Any], dict[str, Any]]


@attrs.define(eq=False)
class QueueActor:
    """State of the queue; only ``run`` (its one task) touches it."""

    journal: Journal
    events: ev.EventBus
    wakeups: trio.MemorySendChannel[dict[str, Any]]
    run_background_form: BackgroundRunner
    background_message: Messenger
    draft_to_json: Callable[[fs.FormState], dict[str, Any]]
    tui: bool = True
    draft_delay: float = 0.25
    epoch: int = 0
    items: dict[str, _Item] = attrs.field(factory=dict)
    claims: list[_Claim] = attrs.field(factory=list)
    active: _Active | None = None
    panel_visible: bool = True
    surface_ready: bool = True
    idle: bool = True
    woken: bool = False
    wait: _Wait | None = None
    herdr: set[str] = attrs.field(factory=set)
    follow_ups: list[FollowUp] = attrs.field(factory=list)
    _pending: dict[str, _Item] = attrs.field(factory=dict)
    """Requests without an outcome, FIFO."""
    _undelivered: dict[str, _Item] = attrs.field(factory=dict)
    """Outcomes not delivered yet (routed to a wait or not)."""
    held: bool = False
    """Set by ``Quiesce``: nothing new is shown until the next ``Restore``."""
    _quiesce_replies: list[trio.MemorySendChannel[None]] = attrs.field(factory=list)
    _seq: itertools.count[int] = attrs.field(factory=itertools.count)
    _flush_scheduled: bool = False
    _nursery: trio.Nursery | None = None
    _self_tx: trio.MemorySendChannel[QueueMessage] | None = None

    async def run(
        self,
        rx: trio.MemoryReceiveChannel[QueueMessage],
        tx: trio.MemorySendChannel[QueueMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._self_tx = tx
            task_status.started()
            try:
                async with rx:
                    async for message in rx:
                        try:
                            await self._handle(message)
                        except (StaleBranch, PersistenceClosedError, WriteRefused):
                            # The write was refused (an entry that cannot be stored), or it
                            # belonged to a revoked branch (a session change is under
                            # way: the coming Restore rebuilds everything from the new branch)
                            # or the journal has ended (disposal). Nothing of this message can
                            # be recorded, so none of it happened; its caller hears so.
                            _answer_unrecorded(message)
                        except BaseException:
                            # The queue is ending (a bug, or cancellation): a caller waiting
                            # for this message's reply (shielded, for TurnBoundary) must not
                            # wait forever.
                            _close_reply(message)
                            raise
            finally:
                self._release_all_herdr()
                nursery.cancel_scope.cancel()

    # -- dispatch -----------------------------------------------------------------------

    async def _handle(self, message: QueueMessage) -> None:
        match message:
            case Enqueue():
                await self._enqueue(message)
            case AcquireSurface():
                self._acquire(message)
            case ReleaseSurface(claim_id=claim_id):
                self._release(claim_id)
            case DraftChanged(request_id=rid, epoch=epoch, form=form):
                self._draft_changed(rid, epoch, form)
            case FormStopped():
                await self._form_stopped(message)
            case Defer(reason=reason, reply=reply):
                await self._defer(reason)
                _reply(reply, None)
            case Show(reply=reply):
                await self._show()
                _reply(reply, None)
            case TurnBoundary(reply=reply):
                _reply(reply, await self._turn_boundary())
            case AgentActivity(idle=idle):
                self.idle = idle
                self.woken = False
                await self._try_wake()
            case StartWait():
                await self._start_wait(message)
            case EndWait(wait_id=wait_id, acknowledged=acknowledged):
                await self._end_wait(wait_id, acknowledged)
            case FindFlow(flow_id=flow_id, reply=reply):
                found = (
                    self.active
                    if self.active is not None and self.active.flow_id == flow_id
                    else None
                )
                _reply(reply, found.commands.clone() if found and found.commands else None)
            case ModeChanged(background_only=background_only):
                if background_only and self.wait is not None:
                    self._finish_wait(deferred="mode_changed")
            case FlushDrafts():
                self._flush_scheduled = False
                await self._flush_drafts()
            case Restore():
                await self._restore(message)
                _reply(message.reply, None)
            case Inspect(reply=reply):
                _reply(reply, self.stats())
            case FollowUp():
                self.follow_ups.append(message)
                await self._try_wake()
            case SurfaceReady():
                self.surface_ready = True
                self._schedule()
            case Quiesce(reply=reply):
                self.held = True
                self._quiesce_replies.append(reply)
                if self.active is not None and self.active.kind == "background":
                    self.active.scope.cancel()  # its FormStopped saves the draft, then replies
                else:
                    await self._finish_quiesce()

    # -- herdr --------------------------------------------------------------------------

    def _herdr_add(self, owner: str) -> None:
        if not self.tui:
            return
        before = bool(self.herdr)
        self.herdr.add(owner)
        if not before:
            self.events.emit(
                ev.HERDR_BLOCKED, {"active": True, "label": "Waiting for user response"}
            )

    def _herdr_remove(self, owner: str) -> None:
        if owner not in self.herdr:
            return
        self.herdr.discard(owner)
        if not self.herdr:
            self.events.emit(ev.HERDR_BLOCKED, {"active": False})

    def _release_all_herdr(self) -> None:
        if self.herdr:
            self.herdr.clear()
            self.events.emit(ev.HERDR_BLOCKED, {"active": False})

    # -- requests and the surface ---------------------------------------------------------

    def pending_count(self) -> int:
        return len(self._pending)

    def _reindex(self, item: _Item) -> None:
        """Keep the two indexes true for ``item``: unanswered requests, and outcomes not yet
        delivered. Both keep FIFO order (items are created in ``seq`` order), so scheduling and
        delivery never scan the whole history (10,000 queued forms stay fast)."""
        rid = item.request.request_id
        self._pending.pop(rid, None)
        self._undelivered.pop(rid, None)
        if item.outcome is None:
            self._pending[rid] = item
        elif not item.delivered:
            self._undelivered[rid] = item

    async def _enqueue(self, message: Enqueue) -> None:
        request = message.request
        if request.request_id not in self.items:
            item = _Item(request, next(self._seq), message.form)
            self.items[request.request_id] = item
            self._reindex(item)
            if self.wait is not None and not self.wait.answered:
                self.wait.members.append(request.request_id)
        _reply(message.reply, self.pending_count())
        self._schedule()

    def _acquire(self, message: AcquireSurface) -> None:
        claim = _Claim(
            message.claim_id,
            next(self._seq),
            message.flow_id,
            message.commands,
            message.scope,
            message.reply,
        )
        self.claims.append(claim)
        self._schedule()

    def _release(self, claim_id: int) -> None:
        self.claims = [claim for claim in self.claims if claim.claim_id != claim_id]
        if (
            self.active is not None
            and self.active.kind == "foreground"
            and self.active.key == claim_id
        ):
            self.active = None
            self._herdr_remove(f"foreground:{claim_id}")
        self._schedule()

    def _next_claimant(self) -> _Claim | _Item | None:
        best: _Claim | _Item | None = None
        for claim in self.claims:
            if best is None or claim.seq < best.seq:
                best = claim
        if self.tui and self.panel_visible and self.surface_ready:
            first = next(iter(self._pending.values()), None)
            if first is not None and (best is None or first.seq < best.seq):
                best = first
        return best

    def _schedule(self) -> None:
        """Give the surface to the next claimant when nobody holds it."""
        if self.active is not None or self._nursery is None or self.held or not self.surface_ready:
            return
        nxt = self._next_claimant()
        if nxt is None:
            return
        if isinstance(nxt, _Claim):
            self.active = _Active("foreground", nxt.claim_id, nxt.flow_id, nxt.commands, nxt.scope)
            self._herdr_add(f"foreground:{nxt.claim_id}")
            _reply(nxt.reply, Grant(nxt.claim_id, self.epoch))
            return
        scope = trio.CancelScope()
        send, receive = trio.open_memory_channel[Any](64)  # 64: key handlers send without awaiting
        self.active = _Active(
            "background", nxt.request.request_id, nxt.request.flow_id, send, scope
        )
        self._herdr_add("panel")
        self._nursery.start_soon(
            self.run_background_form, nxt.request, nxt.form, self.epoch, scope, send, receive
        )

    def _draft_changed(self, request_id: str, epoch: int, form: fs.FormState) -> None:
        item = self.items.get(request_id)
        if epoch != self.epoch or item is None or item.outcome is not None:
            return
        item.form = form
        item.draft_dirty = True
        if not self._flush_scheduled and self._nursery is not None:
            self._flush_scheduled = True
            self._nursery.start_soon(self._flush_later)

    async def _flush_later(self) -> None:
        # Coalesce draft writes: one journal entry per form per `draft_delay`, not per key.
        await trio.sleep(self.draft_delay)
        assert self._self_tx is not None
        await self._self_tx.send(FlushDrafts())

    async def _flush_drafts(self) -> None:
        entries = []
        for item in self.items.values():
            if item.draft_dirty and item.outcome is None:
                entries.append(
                    (
                        "ask:draft",
                        {
                            "requestId": item.request.request_id,
                            "form": self.draft_to_json(item.form),
                        },
                    )
                )
            item.draft_dirty = False
        if entries:
            await self.journal.append_many(entries)

    async def _finish_quiesce(self) -> None:
        """Reply to ``Quiesce`` once no background form is open and its draft is saved."""
        if not self._quiesce_replies:
            return
        if self.active is not None and self.active.kind == "background":
            return
        await self._flush_drafts()
        for reply in self._quiesce_replies:
            _reply(reply, None)  # a caller that gave up waiting is fine
        self._quiesce_replies = []

    async def _form_stopped(self, message: FormStopped) -> None:
        try:
            await self._record_stopped(message)
        finally:
            await self._finish_quiesce()

    async def _record_stopped(self, message: FormStopped) -> None:
        item = self.items.get(message.request_id)
        if message.epoch != self.epoch or item is None:
            return
        if (
            self.active is not None
            and self.active.kind == "background"
            and self.active.key == message.request_id
        ):
            self.active = None
            self._herdr_remove("panel")
        if item.outcome is not None:
            self._schedule()
            return
        item.form = message.form
        if message.outcome is None:
            # Interrupted (hidden, deferred): keep the draft on the branch right away.
            item.draft_dirty = True
            await self._flush_drafts()
        else:
            item.outcome = message.outcome
            item.draft_dirty = False
            self._reindex(item)
            self._route_completion(item)
            await self._try_wake()
        self._schedule()

    # -- panel ----------------------------------------------------------------------------

    async def _defer(self, reason: Literal["hidden", "user_message"]) -> None:
        if self.panel_visible:
            self.panel_visible = False
            await self.journal.append("ask:panel", {"visible": False})
        if self.active is not None and self.active.kind == "background":
            self.active.scope.cancel()
        self._herdr_remove("panel")
        if self.wait is not None:
            self._finish_wait(deferred=reason)

    async def _show(self) -> None:
        if not self.panel_visible:
            self.panel_visible = True
            await self.journal.append("ask:panel", {"visible": True})
        self._schedule()

    # -- delivery ---------------------------------------------------------------------------

    def _ready(self) -> list[_Item]:
        ready = [item for item in self._undelivered.values() if item.routed_to is None]
        return sorted(ready, key=lambda i: i.seq)

    async def _deliver(
        self, follow_ups: list[FollowUp], items: list[_Item]
    ) -> list[dict[str, Any]]:
        """Hand out ``follow_ups`` then the answers of ``items``, all marked in one write:
        either every message is recorded as delivered and goes out, or none is."""
        answers = []
        for item in items:
            assert item.outcome is not None
            answers.append(self.background_message(item.outcome, item.request.params))
        entries = [(f.entry_type, f.message) for f in follow_ups]
        entries += [("ask:background-answer", message) for message in answers]
        if entries:
            await self._mark_delivered(entries)
        for follow_up in follow_ups:
            self.follow_ups.remove(follow_up)
        for item in items:
            item.delivered = True
            self._reindex(item)
        return [f.message for f in follow_ups] + answers

    async def _turn_boundary(self) -> list[dict[str, Any]]:
        """Follow-ups first, then ready answers in FIFO order."""
        if not self.tui:
            return []
        return await self._deliver(list(self.follow_ups), self._ready())

    async def _mark_delivered(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        """Journal delivery marks, shielded: once a mark may be on the branch, the message must
        go out. A cancellation during the write (disposal, say) would otherwise leave a mark
        for a message nobody received, and the rebuild trusts the mark: the answer would be
        lost. Not bounded: the persistence actor replies to every request it takes or closes
        the reply channel when it ends. The callers hand the messages out right after, with
        no checkpoint in between (``send_nowait``, or the reply to ``TurnBoundary``)."""
        with trio.CancelScope(shield=True):
            await self.journal.append_many(entries)

    async def _try_wake(self) -> None:
        if not (self.tui and self.idle) or self.woken:
            return
        waking = [f for f in self.follow_ups if f.wake][:1]
        if waking:
            [message] = await self._deliver(waking, [])
            self.woken = True
            self.wakeups.send_nowait(message)
            return
        for item in self._ready():
            if (
                item.outcome is not None
                and item.outcome.result is not None
                and not item.outcome.result.cancelled
            ):
                [message] = await self._deliver([], [item])
                self.woken = True
                self.wakeups.send_nowait(message)
                return

    # -- waits ------------------------------------------------------------------------------

    def _route_completion(self, item: _Item) -> None:
        wait = self.wait
        if wait is not None and not wait.answered and item.request.request_id in wait.members:
            item.routed_to = wait.wait_id
            if all(self.items[rid].outcome is not None for rid in wait.members):
                self._finish_wait()

    async def _start_wait(self, message: StartWait) -> None:
        if self.wait is not None:
            _reply(message.reply, WaitEnd("busy"))
            return
        members = [
            item.request.request_id
            for item in sorted(self.items.values(), key=lambda i: i.seq)
            if item.outcome is None or (not item.delivered and item.routed_to is None)
        ]
        self.wait = _Wait(message.wait_id, members, message.reply)
        for rid in members:
            if self.items[rid].outcome is not None:
                self.items[rid].routed_to = message.wait_id
        if all(self.items[rid].outcome is not None for rid in members):
            # Nothing left to wait for (no member, or all answered): it returns at once and
            # never blocks on the person, so Herdr hears nothing.
            self._finish_wait()
        else:
            self._herdr_add(f"wait:{message.wait_id}")

    def _finish_wait(self, deferred: WaitReason | None = None) -> None:
        wait = self.wait
        if wait is None or wait.answered:
            return
        results = tuple(
            self.items[rid].outcome  # type: ignore[misc]
            for rid in wait.members
            if self.items[rid].outcome is not None and self.items[rid].routed_to == wait.wait_id
        )
        pending = tuple(rid for rid in wait.members if self.items[rid].outcome is None)
        end = WaitEnd(
            "deferred" if deferred else "complete",
            request_ids=tuple(wait.members),
            pending_request_ids=pending if deferred else (),
            results=results,  # type: ignore[arg-type]
            reason=deferred,
        )
        wait.answered = True
        _reply(wait.reply, end)

    async def _end_wait(self, wait_id: int, acknowledged: bool) -> None:
        wait = self.wait
        if wait is None or wait.wait_id != wait_id:
            return
        self.wait = None
        self._herdr_remove(f"wait:{wait_id}")
        for item in self.items.values():
            if item.routed_to == wait_id:
                item.routed_to = None
                if acknowledged and wait.answered:
                    item.delivered = True
                    self._reindex(item)
        await self._try_wake()

    # -- session change ------------------------------------------------------------------

    async def _restore(self, message: Restore) -> None:
        # Everything of the old epoch ends first: the visible form, every foreground claim,
        # the wait.
        granted = (
            self.active.key
            if self.active is not None and self.active.kind == "foreground"
            else None
        )
        if self.active is not None:
            self.active.scope.cancel()
            self.active = None
        for claim in self.claims:
            claim.scope.cancel()
            if claim.claim_id != granted:
                # A claim still waiting for the surface is granted its cancelled scope, so
                # its call ends as interrupted instead of waiting for a grant forever.
                _reply(claim.reply, Grant(claim.claim_id, self.epoch))
        self.claims = []
        if self.wait is not None:
            if not self.wait.answered:
                # An answered wait already holds its result (the reply's one slot is full).
                _reply(self.wait.reply, WaitEnd("aborted"))
            self.wait = None
        self.held = False
        self.epoch = message.epoch
        self.journal = message.journal
        self._release_all_herdr()
        self.follow_ups = list(message.follow_ups)
        self.items = {}
        self._pending = {}
        self._undelivered = {}
        for restored in message.items:
            item = _Item(
                restored.request,
                next(self._seq),
                restored.form,
                outcome=restored.outcome,
                delivered=restored.delivered,
            )
            self.items[restored.request.request_id] = item
            self._reindex(item)
        self.panel_visible = message.panel_visible
        self.woken = False
        self._schedule()
        await self._try_wake()

    def stats(self) -> QueueStats:
        ordered = sorted(self.items.values(), key=lambda i: i.seq)
        return QueueStats(
            epoch=self.epoch,
            pending=tuple(i.request.request_id for i in ordered if i.outcome is None),
            completed=tuple(i.request.request_id for i in ordered if i.outcome is not None),
            delivered=tuple(i.request.request_id for i in ordered if i.delivered),
            visible=self.active.flow_id if self.active is not None else None,
            panel_visible=self.panel_visible,
            herdr_owners=frozenset(self.herdr),
            waiting=self.wait is not None,
            params=tuple((i.request.request_id, i.request.params) for i in ordered),
        )


T = TypeVar("T")


def _reply(channel: trio.MemorySendChannel[T], value: T) -> None:
    """Answer a one-shot reply channel (buffer one: never blocks). A caller cancelled meanwhile
    has closed its end; the queue's state already holds what the answer would have told it (a
    grant it no longer wants is released by its ReleaseSurface, a wait it abandoned gives its
    results back with EndWait), so the queue goes on."""
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        channel.send_nowait(value)


_UNRECORDED_ANSWERS: dict[type, Any] = {Defer: None, Show: None, TurnBoundary: []}


def _answer_unrecorded(message: QueueMessage) -> None:
    """The reply to a message whose journal write failed: nothing was shown, hidden or
    delivered. Callers of other messages see their reply channel closed."""
    reply = getattr(message, "reply", None)
    if isinstance(reply, trio.MemorySendChannel) and type(message) in _UNRECORDED_ANSWERS:
        _reply(reply, _UNRECORDED_ANSWERS[type(message)])
    _close_reply(message)


def _close_reply(message: QueueMessage) -> None:
    reply = getattr(message, "reply", None)
    if isinstance(reply, trio.MemorySendChannel):
        reply.close()
