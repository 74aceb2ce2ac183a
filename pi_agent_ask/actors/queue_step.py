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

    def own_tables(
        self, items: Table[str, Item], by_seq: Table[int, str], undelivered: Table[int, str]
    ) -> None:
        """Give the new state tables of its own (``Restore``)."""
        self._layered.update(("items", "by_seq", "undelivered"))
        self.set(items=items, by_seq=by_seq, undelivered=undelivered)

    def put(self, item: Item) -> None:
        """Store ``item`` and keep the counters and the undelivered index true for it."""
        rid = item.request.request_id
        old = self.field("items").get(rid)
        if old is not None and old.outcome is None and item.outcome is not None:
            self.set(pending_count=self.field("pending_count") - 1)
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
