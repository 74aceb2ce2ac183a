"""One transition of the queue's reducer being built (``Step``): the new state so far, its
effects, and the messages it continues into. ``queue_state.reduce`` makes one per message."""

from __future__ import annotations

from typing import Any

import attrs

from pi_agent_ask.actors.queue_data import (
    Item,
    QueueState,
    Table,
)
from pi_agent_ask.actors.queue_effects import (
    WRITES,
    Continue,
    Effect,
)
from pi_agent_ask.actors.queue_messages import (
    SaveDrafts,
    TryWake,
)


class Step:
    """One transition being built: the new state so far (``s``), its effects, and the
    messages it continues into."""

    def __init__(self, state: QueueState) -> None:
        self._state = state
        self._changes: dict[str, Any] = {}
        """Fields set since ``_state`` was last built: ``s`` builds it when it is read."""
        self.effects: list[Effect] = []
        self.continuations: list[TryWake | SaveDrafts] = []
        self._layered: set[str] = set()
        """The tables that have a layer of their own in the new state (``_table``)."""

    @property
    def s(self) -> QueueState:
        """The new state so far."""
        if self._changes:
            self._state = attrs.evolve(self._state, **self._changes)
            self._changes = {}
        return self._state

    def set(self, **changes: Any) -> None:
        self._changes.update(changes)

    def field(self, name: str) -> Any:
        """A field of the new state so far (``s``'s, without building it)."""
        return self._changes[name] if name in self._changes else getattr(self._state, name)

    def _table(self, name: str) -> Table[Any, Any]:
        """The new state's table ``name``, to write into: it gets a layer of its own at its
        first write; until then it is shared with the state the transition started from."""
        if name not in self._layered:
            self._layered.add(name)
            self.set(**{name: getattr(self._state, name).with_layer()})
        table: Table[Any, Any] = self.field(name)
        return table

    def items(self) -> Table[str, Item]:
        return self._table("items")

    def by_seq(self) -> Table[int, str]:
        return self._table("by_seq")

    def undelivered(self) -> Table[int, str]:
        return self._table("undelivered")

    def pending(self) -> Table[int, str]:
        return self._table("pending")

    def own_tables(self) -> None:
        """Give the new state empty tables of its own, with no request in them (``Restore``):
        the old epoch's tables are left untouched."""
        tables = ("items", "by_seq", "undelivered", "pending")
        self._layered.update(tables)
        self.set(**{name: Table() for name in tables})
        self.set(pending_count=0, completed_count=0, delivered_count=0)

    def put(self, item: Item) -> None:
        """Store ``item`` and keep the counts and the indexes true for it: the one place they
        change. A request not stored yet joins the epoch (its ``seq`` is the next)."""
        rid = item.request.request_id
        old = self.field("items").get(rid)
        if old is None:
            self.by_seq().set(item.seq, rid)
            self.set(next_seq=item.seq + 1)
        was_done = old is not None and old.outcome is not None
        done = item.outcome is not None
        if old is None or was_done != done:
            self._count("completed_count" if done else "pending_count", 1)
            if old is not None:
                self._count("pending_count" if done else "completed_count", -1)
            if not done:
                self.pending().set(item.seq, rid)
            elif old is not None:
                self.pending().delete(item.seq)
        was_delivered = old is not None and old.delivered
        if was_delivered != item.delivered:
            self._count("delivered_count", 1 if item.delivered else -1)
        self.items().set(rid, item)
        if done and not item.delivered:
            self.undelivered().set(item.seq, rid)
        elif was_done:
            self.undelivered().delete(item.seq)

    def _count(self, name: str, change: int) -> None:
        self.set(**{name: self.field(name) + change})

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
