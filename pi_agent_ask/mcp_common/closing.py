"""Calls that wait for the person, cut once no person answers through this server any more.

Cheap to import (trio and attrs only): the router of ``pi-agent-ask mcp`` loads it at start,
before the SDK's tool layer (``tools.py``) is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio

__all__ = ["CutOnClose"]


@attrs.define(eq=False)
class CutOnClose:
    """Calls that wait for the person, cut once no person answers any more (the client closed
    its input): :meth:`close` cancels every block in :meth:`cut_on_close`, and a block entered
    after it is cancelled at once. ``AgentTools`` (its waits on the runtime) and
    ``input_end.PersonWaits`` (calls forwarded to a desk) both hold one."""

    closed: trio.Event = attrs.field(factory=trio.Event)
    _scopes: set[trio.CancelScope] = attrs.field(factory=set)

    def close(self) -> None:
        self.closed.set()
        for scope in self._scopes:
            scope.cancel()

    @contextmanager
    def cut_on_close(self) -> Iterator[trio.CancelScope]:
        """A cancel scope that :meth:`close` cancels (cancelled already when closed)."""
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            if self.closed.is_set():
                scope.cancel()
            try:
                yield scope
            finally:
                self._scopes.discard(scope)
