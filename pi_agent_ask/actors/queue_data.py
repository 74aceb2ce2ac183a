"""The queue's state: the per-request records of the current epoch in layered tables, the
claims, the visible form, the active wait, and ``QueueState`` holding them all.

The per-request records live in tables shared between a state and the states derived from it.
``reduce`` never changes the state it is given: its writes go to the new state's own layer,
made at a table's first write; a table it does not write is shared with the state it was given.
``QueueState.commit()`` folds that layer into the shared tables and returns the committed state.
Committing makes every state older than the committed one stale: the shell keeps its current
state and the candidates reduced on top of it, and commits the last of them or none.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, Generic, TypeVar

import attrs

from pi_agent_ask.actors.queue_messages import (
    Cancellable,
    CommandSink,
    FollowUp,
    Grant,
    QueueStats,
    ReplyTo,
    WaitEnd,
)
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.fieldless import Fieldless

K = TypeVar("K")
V = TypeVar("V")


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
        # The layer never holds ``None`` (a deletion is ``_GONE``).
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
        return Table(self._base, self._layer.copy())

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


class Delivered(Fieldless):
    """What a delivered item keeps of its outcome: that it had one (``DELIVERED``, the only
    instance). The outcome is on the branch, and so is the message that delivered it; the
    queue reads a delivered item's outcome never again (``_start_wait`` passes over delivered
    items, ``_ready`` and the wait's routing see undelivered ones only), while its objects would
    be so many more for the cyclic collector to walk, for every answer delivered in the epoch."""


DELIVERED: Final = Delivered()


@attrs.frozen(repr=False)
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


@attrs.frozen(eq=False, repr=False)
class Claim:
    claim_id: int
    seq: int
    flow_id: str
    commands: CommandSink
    scope: Cancellable
    reply: ReplyTo[Grant]


@attrs.frozen(repr=False)
class Active:
    """The visible form: a background request (``request_id``) or a foreground ``claim``."""

    flow_id: str
    request_id: str | None = None
    claim: Claim | None = None


@attrs.frozen(eq=False, repr=False)
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


@attrs.frozen(repr=False)
class QueueState:
    """Everything the queue knows. Build the first one with ``initial_state``."""

    tui: bool = True
    background_shown: bool = True
    """Whether background forms get the surface at all: not in a runtime that makes one
    foreground call and ends (``ask``), where they stay pending for the host that shows them."""
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
    pending: Table[int, str] = attrs.field(factory=Table)
    """Request id by sequence number, of the requests without an outcome."""
    completed_count: int = 0
    delivered_count: int = 0
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
    draft_waiters: tuple[ReplyTo[str | None], ...] = ()
    """Senders of drafts waiting for the next draft write (``DraftChanged.saved``)."""

    def commit(self) -> QueueState:
        """Fold this state's layer into the shared tables (older states become stale)."""
        self.items.commit()
        self.by_seq.commit()
        self.undelivered.commit()
        self.pending.commit()
        return self

    def ordered(self) -> Iterator[Item]:
        for seq in range(self.first_seq, self.next_seq):
            rid = self.by_seq.get(seq)
            if rid is not None:
                item = self.items.get(rid)
                assert item is not None
                yield item

    def stats(self, params_of: tuple[str, ...] = ()) -> QueueStats:
        """The snapshot (``QueueStats``): its cost grows with the pending requests and
        ``params_of``, not with the requests the epoch answered."""
        by_seq = sorted(self.pending.keys())
        pending = tuple(rid for seq in by_seq if (rid := self.pending.get(seq)) is not None)
        named = [*pending, *(rid for rid in dict.fromkeys(params_of) if rid not in pending)]
        items = (self.items.get(rid) for rid in named)
        return QueueStats(
            epoch=self.epoch,
            pending=pending,
            completed=self.completed_count,
            delivered=self.delivered_count,
            visible=self.active.flow_id if self.active is not None else None,
            panel_visible=self.panel_visible,
            herdr_owners=self.herdr,
            waiting=self.wait is not None,
            params=tuple((i.request.request_id, i.request.params) for i in items if i),
        )


def initial_state(
    *,
    tui: bool = True,
    surface_ready: bool = True,
    idle: bool = True,
    background_shown: bool = True,
) -> QueueState:
    return QueueState(
        tui=tui, surface_ready=surface_ready, idle=idle, background_shown=background_shown
    )


def active_flow(state: QueueState, flow_id: str) -> Active | None:
    """The flow holding the surface when it is ``flow_id`` (``FindFlow``'s rule; the shell's
    ``QueueActor.flow_commands`` reads it from the committed state)."""
    active = state.active
    return active if active is not None and active.flow_id == flow_id else None
