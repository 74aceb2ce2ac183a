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
   while the panel is visible, the surface is ready and nothing holds the queue (``Quiesce``).
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

State and commits: the per-request records live in tables shared between a state and the
states derived from it. ``reduce`` never changes the state it is given (its writes go to the
new state's own layer, made at a table's first write; a table it does not write is shared with
the state it was given); ``QueueState.commit()`` folds that layer into the shared tables and
returns the committed state. Committing makes every state older than the committed one stale:
the shell only ever keeps its current state and one candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

import attrs

from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts

Json = dict[str, Any]
WaitReason = Literal["hidden", "user_message", "mode_changed"]
Entry = tuple[str, Mapping[str, Any]]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
K = TypeVar("K")
V = TypeVar("V")


# ------------------------------------------------------------------------------------------
# Opaque handles (the shell's live objects, as the reducer sees them)
# ------------------------------------------------------------------------------------------


class ReplyTo(Protocol[T_contra]):
    """A one-shot reply channel (a ``trio.MemorySendChannel`` with a buffer of one)."""

    def send_nowait(self, value: T_contra, /) -> None: ...

    def close(self) -> None: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class CommandSink(Protocol):
    """A form's command channel; ``FindFlow`` hands out a clone of it."""

    def clone(self) -> CommandSink: ...


class JournalHandle(Protocol):
    """The branch writer the shell writes through (swapped by ``Restore``)."""

    async def append(self, type_: str, data: Json) -> object: ...

    async def append_many(self, entries: Sequence[Entry]) -> object: ...


# ------------------------------------------------------------------------------------------
# Messages (a closed set; each reply channel is one-shot with a buffer of one)
# ------------------------------------------------------------------------------------------


@attrs.frozen
class Recording:
    """A request's entries that the queue writes itself, in the transition that enqueues it,
    followed by the call's tool result: the receipt, which names the pending count that only
    this transition knows. One write instead of two, and no window in which the request is on
    the branch without its result. ``writer`` is the calling branch's (revoked when the session
    changes: then nothing is written or enqueued)."""

    entries: tuple[Entry, ...]
    result_entry: Callable[[int], Entry]
    """The call's tool-result entry for a pending count (pure: the caller returns the result
    it holds for the count it is told)."""
    writer: JournalHandle


@attrs.frozen
class Enqueue:
    """Queue a background request. The reply is the pending count after it; with a
    ``recording`` whose write failed, the error instead (nothing was enqueued)."""

    request: AskRequest
    form: fs.FormState | fs.FormSettings
    """Its form, or the settings of the fresh form it is shown with (``Item.form``)."""
    reply: ReplyTo[int | Exception]
    recording: Recording | None = None


@attrs.frozen
class Grant:
    claim_id: int
    epoch: int


@attrs.frozen
class AcquireSurface:
    """A foreground form asks for the surface; the reply is its grant, in FIFO order."""

    claim_id: int
    flow_id: str
    commands: CommandSink
    scope: Cancellable
    reply: ReplyTo[Grant]


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
    reply: ReplyTo[None]


@attrs.frozen
class Show:
    reply: ReplyTo[None]


@attrs.frozen
class TurnBoundary:
    reply: ReplyTo[list[Json]]
    text_only: bool = False
    """Hand out only messages without image blocks; the others stay for a later boundary
    (a caller that can pass on text only, such as a hook)."""


@attrs.frozen
class AgentActivity:
    """The host called ``agent_started`` (``idle=False``) or ``agent_settled``."""

    idle: bool
    call: int = 0
    """The call's number among the host's hook calls (``queue.HookCalls``)."""
    woken_after: bool = False
    """A wake went out after the host made this call (the shell knows, ``queue.HookCalls``): a
    settle that reached the queue late, while a wake's delivery mark was being written, starts
    the idle period that wake belongs to, so the period has had its one wake."""


@attrs.frozen
class StartWait:
    wait_id: int
    reply: ReplyTo[WaitEnd]


@attrs.frozen
class EndWait:
    """The waiter is done: ``acknowledged`` when its result was journaled and returned."""

    wait_id: int
    acknowledged: bool


@attrs.frozen
class FindFlow:
    flow_id: str
    reply: ReplyTo[CommandSink | None]


@attrs.frozen
class ModeChanged:
    background_only: bool


@attrs.frozen
class FlushDrafts:
    """The draft debounce elapsed: write the drafts changed since the last write."""


@attrs.frozen
class RestoredItem:
    request: AskRequest
    form: fs.FormState
    outcome: Outcome | None
    delivered: bool


@attrs.frozen
class FollowUp:
    """A message for the agent that is not a background answer (a recovered form's answer).

    It wakes an idle agent at once, or goes out at the next turn boundary; journaled as
    ``entry_type`` before either, exactly once.
    """

    entry_type: str
    message: Json
    wake: bool


@attrs.frozen
class GiveBack:
    """Messages a turn boundary handed out that never reached the agent (the call that took
    them was cut): journaled as given back (``ask:returned``), then they go out again first,
    each marked again when it does. ``reply`` hears ``None``, or the write's error (nothing
    was given back)."""

    follow_ups: tuple[FollowUp, ...]
    reply: ReplyTo[Exception | None]


@attrs.frozen
class Restore:
    """Replace everything with the state rebuilt from a new branch (session change).

    ``follow_ups`` are the branch's recorded but undelivered follow-up messages (a recovered
    form answered before the session changed); they go out as if just sent.
    """

    epoch: int
    items: tuple[RestoredItem, ...]
    panel_visible: bool
    journal: JournalHandle
    reply: ReplyTo[None]
    follow_ups: tuple[FollowUp, ...] = ()


@attrs.frozen
class Inspect:
    reply: ReplyTo[QueueStats]


@attrs.frozen
class Quiesce:
    """Close the visible background form and save every draft; reply once all is saved.

    Sent before a session change (so the old branch keeps what the person typed) and at
    disposal. Nothing new is shown until the next ``Restore``.
    """

    reply: ReplyTo[None]


@attrs.frozen
class SurfaceReady:
    """The host's input surface is up: forms, recovered ones first, may be shown now."""


# Internal messages: the second half of a transition that must not depend on the first
# half's write, or whose first half must be committed even if the second half's write fails.


@attrs.frozen
class TryWake:
    """Wake an idle agent if something is ready; then answer ``reply`` (a ``Restore``'s)."""

    reply: ReplyTo[None] | None = None


@attrs.frozen
class SaveDrafts:
    """Write the dirty drafts; then answer the ``Quiesce`` callers if nothing is open."""


@attrs.frozen
class RetryWake:
    """The wake retry timer (``ScheduleWakeRetry``) ran out: try the idle wake again."""


@attrs.frozen
class RetryDrafts:
    """The draft retry timer (``ScheduleDraftRetry``) ran out: write the dirty drafts again."""


@attrs.frozen
class Unrecorded:
    """The write of ``message``'s transition failed (the branch was revoked, the journal
    ended, the entry was refused, or the disk failed): none of it happened. Its caller hears
    so (``Enqueue`` with a recording: ``error`` itself). A disk failure (``OSError``) may pass,
    so a failed wake or draft write is retried; the other failures are final for this branch."""

    message: QueueMessage
    error: Exception | None = None


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
    | GiveBack
    | Quiesce
    | SurfaceReady
    | TryWake
    | SaveDrafts
    | RetryWake
    | RetryDrafts
    | Unrecorded
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
# Effects (a closed set; the shell performs them in order)
# ------------------------------------------------------------------------------------------


@attrs.frozen
class Append:
    """Journal ``entries`` (one write). Fails with the journal's errors: the transition is void.
    ``through`` a caller's branch writer when given, else the queue's own."""

    entries: tuple[Entry, ...]
    through: JournalHandle | None = None


@attrs.frozen
class MarkDelivered:
    """Journal delivery marks, shielded: once a mark may be on the branch its messages leave."""

    entries: tuple[Entry, ...]


@attrs.frozen
class Reply(Generic[T]):
    channel: ReplyTo[T]
    value: T


@attrs.frozen
class CloseReply:
    """Close a reply channel unanswered: its caller hears that nothing happened."""

    channel: ReplyTo[Any]


@attrs.frozen
class ReplyCommands:
    """Answer ``FindFlow`` with a clone of a command channel: a foreground claim's
    ``commands``, or the visible background form's (``request_id``), whose channel the shell
    holds."""

    channel: ReplyTo[CommandSink | None]
    commands: CommandSink | None = None
    request_id: str | None = None


@attrs.frozen
class Wake:
    message: Json


@attrs.frozen
class HerdrChanged:
    active: bool


@attrs.frozen
class StartForm:
    """Open ``request`` as the visible background form (a task in the shell's nursery)."""

    request: AskRequest
    form: fs.FormState
    epoch: int


@attrs.frozen
class CancelForm:
    """Cancel the visible background form of ``request_id``."""

    request_id: str


@attrs.frozen
class CancelClaim:
    """Cancel a foreground claim's scope."""

    scope: Cancellable


@attrs.frozen
class UseJournal:
    journal: JournalHandle


@attrs.frozen
class ScheduleFlush:
    """Send ``FlushDrafts`` after the draft delay."""


@attrs.frozen
class ScheduleWakeRetry:
    """Send ``RetryWake`` after ``delay`` seconds."""

    delay: float


@attrs.frozen
class ScheduleDraftRetry:
    """Send ``RetryDrafts`` after ``delay`` seconds."""

    delay: float


@attrs.frozen
class Continue:
    """Reduce ``message`` next, as a transition of its own, before any other message."""

    message: QueueMessage


Effect = (
    Append
    | MarkDelivered
    | Reply[Any]
    | ReplyCommands
    | Wake
    | HerdrChanged
    | StartForm
    | CancelForm
    | CancelClaim
    | CloseReply
    | UseJournal
    | ScheduleFlush
    | ScheduleWakeRetry
    | ScheduleDraftRetry
    | Continue
)
WRITES = (Append, MarkDelivered)

WAKE_RETRY_FIRST = 0.5
"""Seconds before the first retry of a wake whose delivery mark failed on the disk."""
WAKE_RETRY_MAX = 8.0
"""The longest wait between two retries: the backoff doubles up to this and stays there."""


def _backoff(first: float, failures: int) -> float:
    """``first`` doubled for each failure in a row after the first, at most ``WAKE_RETRY_MAX``."""
    return min(first * 2.0 ** min(failures - 1, 16), WAKE_RETRY_MAX)


def wake_retry_delay(failures: int) -> float:
    """The wait before the retry that follows the ``failures``-th failure in a row."""
    return _backoff(WAKE_RETRY_FIRST, failures)


DRAFT_RETRY_FIRST = 0.1
"""Seconds before the first retry of drafts whose write failed on the disk."""
DRAFT_QUIESCE_RETRIES = 4
"""Disk failures in a row of the draft write that ``Quiesce`` callers wait through: while they
wait, each failure is retried at once (the teardown that waits is bounded and a person may be
waiting for it); after that they hear that their drafts were not saved."""


def draft_retry_delay(failures: int) -> float:
    """The wait before the draft retry that follows the ``failures``-th failure in a row."""
    return _backoff(DRAFT_RETRY_FIRST, failures)


# ------------------------------------------------------------------------------------------
# State
# ------------------------------------------------------------------------------------------


class _Gone:
    """A deleted key in a table's layer."""


_GONE = _Gone()


class Table(Generic[K, V]):
    """A map shared by a state and the states derived from it: a committed base plus the layer
    of one transition's changes. ``with_layer`` gives a state its own layer to write into; the
    base changes only in ``commit``."""

    __slots__ = ("_base", "_layer")

    def __init__(
        self, base: dict[K, V] | None = None, layer: dict[K, V | _Gone] | None = None
    ) -> None:
        self._base: dict[K, V] = {} if base is None else base
        self._layer: dict[K, V | _Gone] = {} if layer is None else layer

    def get(self, key: K) -> V | None:
        # One lookup in the layer: it never holds ``None`` (a deletion is ``_GONE``).
        value = self._layer.get(key)
        if value is None:
            return self._base.get(key)
        return None if value is _GONE else value  # type: ignore[return-value]

    def __contains__(self, key: K) -> bool:
        return self.get(key) is not None

    def keys(self) -> Iterator[K]:
        for key in self._base:
            if key not in self._layer:
                yield key
        for key, value in self._layer.items():
            if not isinstance(value, _Gone):
                yield key

    def with_layer(self) -> Table[K, V]:
        table: Table[K, V] = object.__new__(Table)  # three per transition: no ``__init__``
        table._base = self._base
        table._layer = self._layer.copy()
        return table

    def set(self, key: K, value: V) -> None:
        """Only on a table of the state being built by ``reduce`` (``with_layer``)."""
        self._layer[key] = value

    def delete(self, key: K) -> None:
        self._layer[key] = _GONE

    def commit(self) -> None:
        """Fold the layer into the base: every other table on this base sees it now."""
        layer = self._layer
        if not layer:
            return  # a table the transition did not write (shared with the state before it)
        base = self._base
        for key, value in layer.items():
            if isinstance(value, _Gone):
                base.pop(key, None)
            else:
                base[key] = value
        layer.clear()

    def __repr__(self) -> str:
        shown = {key: self.get(key) for key in self.keys()}
        return f"Table({shown!r})"


@attrs.frozen
class Delivered:
    """What a delivered item keeps of its outcome: that it had one (``DELIVERED``, the only
    instance). The outcome is on the branch, and so is the message that delivered it; the
    queue reads a delivered item's outcome never again (``_start_wait`` passes over delivered
    items, ``_ready`` and the wait's routing see undelivered ones only), while its objects would
    be so many more for the cyclic collector to walk, for every answer delivered in the epoch."""


DELIVERED: Final = Delivered()


@attrs.frozen
class Item:
    """One background request of this epoch. ``member_of`` names the active wait it belongs
    to; ``routed_to`` is set once its outcome is routed to that wait."""

    request: AskRequest
    seq: int
    form: fs.FormState | fs.FormSettings | None
    """The latest draft while the request is pending, or, until it has one, the settings of
    the fresh form it is shown with (made by ``_schedule``: a queued form never shown costs no
    form state); ``None`` once it has an outcome (only a pending request's form is shown or
    saved). An answered request waits for its delivery holding its outcome alone: its form's
    objects would be so many more for the collector to walk, for every answer not delivered
    yet, as a fresh form's would be for every form still queued."""
    outcome: Outcome | Delivered | None = None
    """``None`` while pending; ``DELIVERED`` once delivered (``_deliver``, ``_end_wait``), in
    place of the outcome: a request with either has an outcome (``QueueStats.completed``). An
    item routed to a wait is not delivered: ``_end_wait`` marks it after it leaves the wait."""
    delivered: bool = False
    member_of: int | None = None
    routed_to: int | None = None


@attrs.frozen
class Claim:
    claim_id: int
    seq: int
    flow_id: str
    commands: CommandSink
    scope: Cancellable
    reply: ReplyTo[Grant]


@attrs.frozen
class Active:
    """The visible form: a background request (``request_id``) or a foreground ``claim``."""

    flow_id: str
    request_id: str | None = None
    claim: Claim | None = None


@attrs.frozen
class Wait:
    """The active wait. ``members`` in FIFO order (``late`` joined while it ran);
    ``outstanding`` counts members without an outcome."""

    wait_id: int
    members: tuple[str, ...]
    reply: ReplyTo[WaitEnd]
    outstanding: int
    late: tuple[str, ...] = ()
    answered: bool = False

    def all_members(self) -> Iterable[str]:
        yield from self.members
        yield from self.late


@attrs.frozen(slots=False)
class QueueState:
    """Everything the queue knows. Build the first one with ``initial_state``.

    Not slotted: every message makes a shallow copy (``_Step``), which is one ``__dict__``
    copy this way instead of a ``getattr``/``setattr`` pair per field."""

    tui: bool = True
    epoch: int = 0
    items: Table[str, Item] = attrs.field(factory=Table)
    by_seq: Table[int, str] = attrs.field(factory=Table)
    """Request id by sequence number (claims use the numbers in between)."""
    undelivered: Table[int, str] = attrs.field(factory=Table)
    """Outcomes not delivered yet (routed to a wait or not), by sequence number."""
    first_seq: int = 0
    """The first sequence number of this epoch."""
    pending_head: int = 0
    """No request below this sequence number is pending (advanced lazily: amortised O(1))."""
    pending_count: int = 0
    next_seq: int = 0
    dirty: frozenset[str] = frozenset()
    """Requests whose draft changed since it was last written."""
    claims: tuple[Claim, ...] = ()
    active: Active | None = None
    panel_visible: bool = True
    surface_ready: bool = True
    idle: bool = True
    woken: bool = False
    wait: Wait | None = None
    herdr: frozenset[str] = frozenset()
    follow_ups: tuple[FollowUp, ...] = ()
    held: bool = False
    """Set by ``Quiesce``: nothing new is shown until the next ``Restore``."""
    quiesce_replies: tuple[ReplyTo[None], ...] = ()
    flush_scheduled: bool = False
    wake_failures: int = 0
    """Disk failures of an idle wake's delivery mark since the last wake went out."""
    wake_retry_armed: bool = False
    """A ``RetryWake`` timer runs (at most one at a time)."""
    draft_failures: int = 0
    """Disk failures in a row of the draft write (reset when drafts are written)."""
    draft_retry_armed: bool = False
    """A ``RetryDrafts`` timer runs (at most one at a time)."""

    def commit(self) -> QueueState:
        """Fold this state's layer into the shared tables (older states become stale)."""
        self.items.commit()
        self.by_seq.commit()
        self.undelivered.commit()
        return self

    def ordered(self) -> Iterator[Item]:
        for seq in range(self.first_seq, self.next_seq):
            rid = self.by_seq.get(seq)
            if rid is not None:
                item = self.items.get(rid)
                assert item is not None
                yield item

    def stats(self) -> QueueStats:
        ordered = list(self.ordered())
        return QueueStats(
            epoch=self.epoch,
            pending=tuple(i.request.request_id for i in ordered if i.outcome is None),
            completed=tuple(i.request.request_id for i in ordered if i.outcome is not None),
            delivered=tuple(i.request.request_id for i in ordered if i.delivered),
            visible=self.active.flow_id if self.active is not None else None,
            panel_visible=self.panel_visible,
            herdr_owners=self.herdr,
            waiting=self.wait is not None,
            params=tuple((i.request.request_id, i.request.params) for i in ordered),
        )


def initial_state(*, tui: bool = True, surface_ready: bool = True, idle: bool = True) -> QueueState:
    return QueueState(tui=tui, surface_ready=surface_ready, idle=idle)


# ------------------------------------------------------------------------------------------
# The reducer
# ------------------------------------------------------------------------------------------


class _Step:
    """One transition being built: the new state's fields (``d``, its ``__dict__``) and the
    effects so far."""

    __slots__ = ("_by_seq", "_items", "_undelivered", "continuations", "d", "effects", "s")

    def __init__(self, state: QueueState) -> None:
        # A shallow copy (``evolve`` would run the validators of all fields again: too slow
        # for the one thing every message does), made as one copy of the fields' dict
        # (filling the new object's own dict key by key takes twice as long). The tables are
        # shared with ``state`` until the transition first writes one (``items``, ``by_seq``,
        # ``undelivered``): then the new state gets that table with a layer of its own.
        self.s = s = object.__new__(QueueState)
        self.d = fields = state.__dict__.copy()
        object.__setattr__(s, "__dict__", fields)
        self.effects: list[Effect] = []
        self.continuations: list[TryWake | SaveDrafts] = []
        self._items: Table[str, Item] | None = None
        self._by_seq: Table[int, str] | None = None
        self._undelivered: Table[int, str] | None = None

    def set(self, **changes: Any) -> None:
        # The new state is private to this transition until ``result`` hands it out, so its
        # fields are filled in place (an ``evolve`` per change would dominate the queue's cost).
        self.d.update(changes)

    def items(self) -> Table[str, Item]:
        """The new state's ``items``, to write into (a layer of its own)."""
        table = self._items
        if table is None:
            table = self._items = self.d["items"] = self.s.items.with_layer()
        return table

    def by_seq(self) -> Table[int, str]:
        """The new state's ``by_seq``, to write into (a layer of its own)."""
        table = self._by_seq
        if table is None:
            table = self._by_seq = self.d["by_seq"] = self.s.by_seq.with_layer()
        return table

    def undelivered(self) -> Table[int, str]:
        """The new state's ``undelivered``, to write into (a layer of its own)."""
        table = self._undelivered
        if table is None:
            table = self._undelivered = self.d["undelivered"] = self.s.undelivered.with_layer()
        return table

    def own_tables(
        self, items: Table[str, Item], by_seq: Table[int, str], undelivered: Table[int, str]
    ) -> None:
        """Give the new state tables of its own (``Restore``)."""
        self._items = self.d["items"] = items
        self._by_seq = self.d["by_seq"] = by_seq
        self._undelivered = self.d["undelivered"] = undelivered

    def put(self, item: Item) -> None:
        """Store ``item`` and keep the counters and the undelivered index true for it."""
        rid = item.request.request_id
        old = self.s.items.get(rid)
        if old is not None and old.outcome is None and item.outcome is not None:
            self.d["pending_count"] = self.s.pending_count - 1
        self.items().set(rid, item)
        if item.outcome is not None and not item.delivered:
            self.undelivered().set(item.seq, rid)
        elif old is not None and old.outcome is not None:
            self.undelivered().delete(item.seq)

    def emit(self, effect: Effect) -> None:
        if isinstance(effect, WRITES):
            assert not self.effects, "a transition's write is its first effect"
        self.effects.append(effect)

    def later(self, message: TryWake | SaveDrafts) -> None:
        """Continue with ``message`` once this transition is committed, unless it would do
        nothing in the state this transition ends with."""
        self.continuations.append(message)

    def result(self) -> tuple[QueueState, list[Effect]]:
        s = self.s
        for message in self.continuations:
            if type(message) is TryWake:
                useful = message.reply is not None or (s.tui and s.idle and not s.woken)
            else:
                open_form = s.active is not None and s.active.request_id is not None
                useful = bool(s.dirty) or (bool(s.quiesce_replies) and not open_form)
            if useful:
                self.effects.append(Continue(message))
        return s, self.effects


def reduce(state: QueueState, message: QueueMessage) -> tuple[QueueState, list[Effect]]:
    """The queue's next state and the effects that make it true, in order. ``state`` is left
    as it was; ``commit()`` the result once the effects succeeded."""
    step = _Step(state)
    # The two messages of every form first (the ``match`` below tries the cases in order).
    if type(message) is FormStopped:
        _form_stopped(step, message)
        return step.result()
    if type(message) is Enqueue:
        _enqueue(step, message)
        return step.result()
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
        case DraftChanged(request_id=rid, epoch=epoch, form=form):
            _draft_changed(step, rid, epoch, form)
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
        case Inspect(reply=reply):
            step.emit(Reply(reply, step.s.stats()))
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


def active_flow(state: QueueState, flow_id: str) -> Active | None:
    """The flow holding the surface when it is ``flow_id`` (``FindFlow``'s rule; the shell's
    ``QueueActor.flow_commands`` reads it from the committed state)."""
    active = state.active
    return active if active is not None and active.flow_id == flow_id else None


# -- herdr ----------------------------------------------------------------------------------


def _herdr_add(step: _Step, owner: str) -> None:
    if not step.s.tui:
        return
    if not step.s.herdr:
        step.emit(_HERDR_ON)
    step.set(herdr=step.s.herdr | {owner})


def _herdr_remove(step: _Step, owner: str) -> None:
    if owner not in step.s.herdr:
        return
    step.set(herdr=step.s.herdr - {owner})
    if not step.s.herdr:
        step.emit(_HERDR_OFF)


def release_all_herdr(state: QueueState) -> list[Effect]:
    """The effects of the queue ending: the Herdr owners go."""
    return [_HERDR_OFF] if state.herdr else []


_HERDR_ON = HerdrChanged(True)
_HERDR_OFF = HerdrChanged(False)
"""Frozen: one of each serves every transition."""
_PANEL = frozenset({"panel"})
"""The visible panel's Herdr owner, as the set that adds or removes it."""


# -- requests and the surface ----------------------------------------------------------------


def _enqueue(step: _Step, message: Enqueue) -> None:
    request = message.request
    s = step.s
    d = step.d
    rid = request.request_id
    recording = message.recording
    joining = s.items.get(rid) is None
    if recording is not None:
        # The count this transition ends with: the request below joins unless already queued.
        # The transition's first effect, its one write.
        pending = s.pending_count + joining
        entries = (*recording.entries, recording.result_entry(pending))
        step.effects.append(Append(entries, recording.writer))
    if joining:
        seq = s.next_seq
        wait = s.wait
        if wait is not None and not wait.answered:
            item = Item(request, seq, message.form, None, False, wait.wait_id)
            d["wait"] = attrs.evolve(wait, late=(*wait.late, rid), outstanding=wait.outstanding + 1)
        else:
            item = Item(request, seq, message.form)
        step.items().set(rid, item)
        step.by_seq().set(seq, rid)
        d["next_seq"] = seq + 1
        d["pending_count"] = s.pending_count + 1
    step.effects.append(Reply(message.reply, s.pending_count))
    if s.active is None:  # else ``_schedule`` does nothing
        _schedule(step)


def _release(step: _Step, claim_id: int) -> None:
    step.set(claims=tuple(c for c in step.s.claims if c.claim_id != claim_id))
    active = step.s.active
    if active is not None and active.claim is not None and active.claim.claim_id == claim_id:
        step.set(active=None)
        _herdr_remove(step, f"foreground:{claim_id}")
    _schedule(step)


def _first_pending(step: _Step) -> Item | None:
    """The oldest request without an outcome; advances ``pending_head`` past answered ones."""
    s = step.s
    head = s.pending_head
    found: Item | None = None
    while head < s.next_seq:
        rid = s.by_seq.get(head)
        if rid is not None:
            item = s.items.get(rid)
            if item is not None and item.outcome is None:
                found = item
                break
        head += 1
    if head != s.pending_head:
        step.d["pending_head"] = head
    return found


def _schedule(step: _Step) -> None:
    """Give the surface to the next claimant when nobody holds it."""
    s = step.s
    if s.active is not None or s.held or not s.surface_ready:
        return
    first = _first_pending(step) if s.tui and s.panel_visible else None
    if s.claims:
        best_claim = min(s.claims, key=lambda c: c.seq)
        if first is None or best_claim.seq < first.seq:
            step.d["active"] = Active(best_claim.flow_id, claim=best_claim)
            _herdr_add(step, f"foreground:{best_claim.claim_id}")
            step.emit(Reply(best_claim.reply, Grant(best_claim.claim_id, s.epoch)))
            return
    if first is not None:
        request = first.request
        step.d["active"] = Active(request.flow_id, request.request_id)
        if s.tui:  # ``_herdr_add(step, "panel")``, inline: every form's
            if not s.herdr:
                step.effects.append(_HERDR_ON)
            step.d["herdr"] = s.herdr | _PANEL
        form = first.form
        if not isinstance(form, fs.FormState):  # shown for the first time, without a draft
            assert form is not None  # pending (``Item.form``)
            form = fs.new_form(request.params, form, background=True)
        step.effects.append(StartForm(request, form, s.epoch))


def _draft_changed(step: _Step, request_id: str, epoch: int, form: fs.FormState) -> None:
    item = step.s.items.get(request_id)
    if epoch != step.s.epoch or item is None or item.outcome is not None:
        return
    step.put(attrs.evolve(item, form=form))
    step.set(dirty=step.s.dirty | {request_id})
    if not step.s.flush_scheduled:
        step.set(flush_scheduled=True)
        step.emit(ScheduleFlush())


def _save_drafts(step: _Step) -> None:
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
    active = step.s.active
    if step.s.quiesce_replies and (active is None or active.request_id is None):
        for reply in step.s.quiesce_replies:
            step.emit(Reply(reply, None))
        step.set(quiesce_replies=())


def _form_stopped(step: _Step, message: FormStopped) -> None:
    s = step.s
    d = step.d
    rid = message.request_id
    item = s.items.get(rid)
    if message.epoch == s.epoch and item is not None:
        active = s.active
        if active is not None and active.request_id == rid:
            d["active"] = None
            herdr = s.herdr
            if "panel" in herdr:  # ``_herdr_remove(step, "panel")``, inline: every form's
                herdr = d["herdr"] = herdr - _PANEL
                if not herdr:
                    step.effects.append(_HERDR_OFF)
        if item.outcome is None:
            outcome = message.outcome
            if outcome is None:
                # Interrupted (hidden, deferred): keep the draft on the branch right away.
                step.put(attrs.evolve(item, form=message.form))
                d["dirty"] = s.dirty | {rid}
            else:
                # ``Item(...)``, not ``evolve``: the one item every completion stores; and
                # what ``put`` does for a pending item that gets its outcome.
                seq = item.seq
                answered = Item(
                    item.request,
                    seq,
                    None,  # the form is done with (``Item.form``)
                    outcome,
                    item.delivered,
                    item.member_of,
                    item.routed_to,
                )
                d["pending_count"] = s.pending_count - 1
                step.items().set(rid, answered)
                if not answered.delivered:
                    step.undelivered().set(seq, rid)
                if seq == s.pending_head:
                    # Nothing below it is pending now (``_first_pending`` starts past it).
                    d["pending_head"] = seq + 1
                if rid in s.dirty:
                    d["dirty"] = s.dirty - {rid}
                wait = s.wait
                if wait is not None and not wait.answered:
                    _route_completion(step, rid)
                step.continuations.append(_TRY_WAKE)
        if s.active is None:  # else ``_schedule`` does nothing
            _schedule(step)
    # The draft write (and the Quiesce replies waiting for this form) come last, on their own.
    step.continuations.append(_SAVE_DRAFTS)


_TRY_WAKE = TryWake()
_SAVE_DRAFTS = SaveDrafts()
"""The continuations every completion asks for (frozen, so one of each serves them all)."""


# -- panel --------------------------------------------------------------------------------------


def _defer(step: _Step, reason: Literal["hidden", "user_message"]) -> None:
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
    step: _Step,
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
        # ``Item(...)``, not ``evolve`` (which reads the class's fields for every call): each
        # answer is delivered once, and a boundary may deliver thousands (as ``_form_stopped``).
        delivered = Item(
            item.request, item.seq, item.form, DELIVERED, True, item.member_of, item.routed_to
        )
        step.put(delivered)
    return [f.message for f in follow_ups] + answers


def _answer_message(item: Item) -> Json:
    """The message that delivers a completed item's outcome (not delivered yet: it has it)."""
    assert isinstance(item.outcome, Outcome)
    return texts.background_answer_message(item.outcome, params=item.request.params)


def _try_wake(step: _Step) -> None:
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


def _route_completion(step: _Step, rid: str) -> None:
    wait = step.s.wait
    if wait is None or wait.answered:
        return
    item = step.s.items.get(rid)
    assert item is not None
    if item.member_of != wait.wait_id:
        return
    step.put(attrs.evolve(item, routed_to=wait.wait_id))
    wait = attrs.evolve(wait, outstanding=wait.outstanding - 1)
    step.set(wait=wait)
    if wait.outstanding == 0:
        _finish_wait(step)


def _start_wait(step: _Step, message: StartWait) -> None:
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


def _finish_wait(step: _Step, deferred: WaitReason | None = None) -> None:
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


def _end_wait(step: _Step, wait_id: int, acknowledged: bool) -> None:
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


def _restore(step: _Step, message: Restore) -> None:
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
    # New tables with bases of their own: the old epoch's tables are left untouched.
    items: Table[str, Item] = Table()
    by_seq: Table[int, str] = Table()
    undelivered: Table[int, str] = Table()
    seq = s.next_seq
    pending = 0
    for restored in message.items:
        rid = restored.request.request_id
        item = Item(
            restored.request,
            seq,
            restored.form if restored.outcome is None else None,
            outcome=restored.outcome,
            delivered=restored.delivered,
        )
        items.set(rid, item)
        by_seq.set(seq, rid)
        if item.outcome is None:
            pending += 1
        elif not item.delivered:
            undelivered.set(seq, rid)
        seq += 1
    step.own_tables(items, by_seq, undelivered)
    step.set(
        epoch=message.epoch,
        first_seq=s.next_seq,
        pending_head=s.next_seq,
        pending_count=pending,
        next_seq=seq,
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


def _unrecorded(step: _Step, message: QueueMessage, error: Exception | None) -> None:
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
        case Defer(reply=reply) | Show(reply=reply):
            step.emit(Reply(reply, None))
            step.emit(CloseReply(reply))
        case TurnBoundary(reply=reply):
            step.emit(Reply(reply, []))
            step.emit(CloseReply(reply))
        case SaveDrafts():
            # The drafts stay dirty (none of the transition happened). A disk failure may pass:
            # the write is tried again by a timer, and Quiesce callers wait for a few retries.
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


def _retry_wake(step: _Step) -> None:
    """Arm the wake retry timer after a disk failure of a wake's mark, unless it runs already
    (its ``RetryWake`` tries the wake then). Each failure in a row doubles the wait."""
    failures = step.s.wake_failures + 1
    step.set(wake_failures=failures)
    if not step.s.wake_retry_armed:
        step.set(wake_retry_armed=True)
        step.emit(ScheduleWakeRetry(wake_retry_delay(failures)))


def reply_of(message: QueueMessage) -> ReplyTo[Any] | None:
    """The reply channel a message carries, if any."""
    reply: ReplyTo[Any] | None = getattr(message, "reply", None)
    return reply
