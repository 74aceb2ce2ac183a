"""The store under Trio: blocking calls in worker threads, and wakes from ``LISTEN``.

:class:`AsyncStore` runs each :class:`~pi_agent_ask.store.db.Store` operation in a Trio worker
thread, at most ``limit`` at once (a ``CapacityLimiter`` the size of the pool). An operation
that fails because the server went away (``pg_ctl restart``, a failover) is tried again with a
growing pause, up to ``retry_for`` seconds: every operation is idempotent by its keys (a
request by its call key, a delivery by its call key, a submission by the request's state), so
trying again never doubles anything.

:func:`listen` keeps one connection in a thread ``LISTEN``-ing on the store's channel and turns
each notification into a wake of :class:`Wakes`: the board's (a form asked, claimed, released
or answered) or one agent's (one of its outcomes was written). ``NOTIFY`` is a hint, never the
data: whoever wakes reads the store. Notifications sent while the connection was down are
lost, so after every (re)connection everything is woken once: that one re-check is what
covers the gap. Nothing polls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import psycopg
import trio

from pi_agent_ask.store.db import BOARD_NOTE, CHANNEL, OUTCOME_NOTE, Store

__all__ = ["AsyncStore", "Wakes", "listen"]

T = TypeVar("T")
RETRY_FOR = 60.0
"""Seconds an operation keeps trying while the server is unreachable (a restart takes a few)."""
LISTEN_TIMEOUT = 0.5
"""Seconds the listener thread waits for a notification before it checks for its stop."""


@attrs.define(eq=False)
class AsyncStore:
    store: Store
    limit: trio.CapacityLimiter
    retry_for: float = RETRY_FOR

    @classmethod
    def of(cls, store: Store) -> AsyncStore:
        return cls(store, trio.CapacityLimiter(store.max_connections))

    async def run(self, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``operation(*args, **kwargs)`` (a method of the store) in a worker thread."""
        deadline = trio.current_time() + self.retry_for
        pause = 0.05
        while True:
            try:
                return await trio.to_thread.run_sync(
                    lambda: operation(*args, **kwargs), limiter=self.limit
                )
            except psycopg.OperationalError:
                if trio.current_time() + pause > deadline:
                    raise
            # The server is restarting: wait before the next try, longer each time.
            await trio.sleep(pause)
            pause = min(pause * 2, 1.0)


@attrs.define(eq=False)
class Wakes:
    """Events to wait on: one for the board, one per agent key that someone waits for.

    Take the event *before* reading the store, then wait on it: a wake that comes between the
    read and the wait is not missed."""

    _board: trio.Event = attrs.field(factory=trio.Event)
    _agents: dict[str, trio.Event] = attrs.field(factory=dict)
    connected: trio.Event = attrs.field(factory=trio.Event)
    """Set once the listener has its first ``LISTEN`` in place."""
    away: bool = False
    """The listener lost the server and has not reached it again (PostgreSQL is away)."""
    went_away: float | None = None
    """When (``trio.current_time``) the listener last lost the server (``None``: never)."""
    came_back: float | None = None
    """When the listener last reached the server again after losing it (``None``: never)."""
    _reach: trio.Event = attrs.field(factory=trio.Event)

    def board(self) -> trio.Event:
        return self._board

    def agent(self, key: str) -> trio.Event:
        event = self._agents.get(key)
        if event is None:
            event = self._agents[key] = trio.Event()
        return event

    def wake_board(self) -> None:
        event, self._board = self._board, trio.Event()
        event.set()

    def wake_agent(self, key: str) -> None:
        event = self._agents.pop(key, None)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        self.wake_board()
        agents, self._agents = self._agents, {}
        for event in agents.values():
            event.set()

    def note(self, payload: str) -> None:
        if payload == BOARD_NOTE:
            self.wake_board()
        elif payload.startswith(OUTCOME_NOTE):
            self.wake_agent(payload[len(OUTCOME_NOTE) :])

    def reach(self) -> trio.Event:
        """Set when :attr:`away` changes next (take it, then read ``away``, then wait)."""
        return self._reach

    def lost(self) -> None:
        """The listener lost the server (or could not reach it)."""
        if not self.away:
            self.away = True
            self.went_away = trio.current_time()
            self._reached()

    def listening(self) -> None:
        """The listener (re)connected: re-check everything once."""
        self.connected.set()
        if self.away:
            self.away = False
            self.came_back = trio.current_time()
            self._reached()
        self.wake_all()

    def _reached(self) -> None:
        event, self._reach = self._reach, trio.Event()
        event.set()


async def listen(conninfo: str, wakes: Wakes, on_back: Callable[[], None] = lambda: None) -> None:
    """Run the listener until cancelled (the thread notices within ``LISTEN_TIMEOUT``).
    ``on_back`` runs in the listener's thread when it reconnects after losing the server,
    before everything is woken (``Store.renew``: the pool is made new, not left to its own
    slower reconnection)."""
    stop = threading.Event()
    # The listener is a plain thread, not a trio.to_thread one: its calls back need the token.
    token = trio.lowlevel.current_trio_token()

    def call(function: Callable[..., None], *args: Any) -> None:
        try:
            trio.from_thread.run_sync(function, *args, trio_token=token)
        except trio.RunFinishedError:
            stop.set()

    def loop() -> None:
        lost = False
        while not stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if lost:
                        on_back()
                        lost = False
                    call(wakes.listening)
                    while not stop.is_set():
                        for note in conn.notifies(timeout=LISTEN_TIMEOUT):
                            call(wakes.note, note.payload)
            except psycopg.OperationalError:
                if not lost:
                    call(wakes.lost)
                lost = True
                stop.wait(LISTEN_TIMEOUT)  # the server is away: try again shortly

    try:
        await trio.to_thread.run_sync(loop, abandon_on_cancel=True)
    finally:
        stop.set()
