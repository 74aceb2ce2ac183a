"""Which task an actor's state belongs to, and the checked mode that proves it.

An actor's state is touched only by the actor's own task; everyone else talks to it through
its channel. ``Owner`` makes that a checked fact in tests: the actor calls ``enter`` first
thing in its task, and every change of its state calls ``check``, which raises ``NotOwner``
when the change runs in any other task. Unchecked (the default), ``check`` does nothing.

The task is told apart with a context variable of the owner's own (one per actor, so nothing
is shared between runtimes): Trio gives every task a copy of its parent's context when it
spawns it, so a value set in the actor's task is seen there and nowhere else, except in tasks
the actor spawns afterwards; those start through ``detached``, which clears it first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import attrs


class NotOwner(RuntimeError):
    """An actor's state changed outside the actor's own task (checked mode only)."""


@attrs.define(eq=False, repr=False)
class Owner:
    """The task an actor's state belongs to (set by ``enter``); ``checked``: changes check it."""

    name: str
    checked: bool = False
    _token: object | None = attrs.field(default=None, init=False)
    _running: ContextVar[object | None] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._running = ContextVar(f"{self.name} actor", default=None)

    def enter(self) -> None:
        """Claim the state for the calling task (the actor's first statement in its task)."""
        self._token = object()
        self._running.set(self._token)

    def check(self) -> None:
        """Raise ``NotOwner`` in checked mode when the calling task is not the actor's."""
        if self.checked and (self._token is None or self._running.get() is not self._token):
            raise NotOwner(f"the {self.name} actor's state was changed outside its task")

    def detached(self, run: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """``run`` for a task the actor spawns: it does not own the actor's state."""

        async def detached(*args: Any) -> Any:
            self._running.set(None)
            return await run(*args)

        return detached


def owned(actor: Any, _attribute: Any, value: Any) -> Any:
    """An attrs ``on_setattr`` hook: every attribute set on ``actor`` checks its ``owner``."""
    actor.owner.check()
    return value
