"""The process's policy for CPython's cyclic garbage collector, in one place.

A form's start-up creates tens of thousands of objects that live as long as the process (the
import graph, prompt_toolkit's layout, the loaded runtime) and almost no garbage. Left alone,
the collector would run about 135 times during those imports and find next to nothing, and
later, once every few hundred keys, a full pass over all of them (about 20 ms) would land
inside a keystroke. Three moments handle that:

1. :func:`collector_paused`, around the imports ``ask`` needs: the collector is off while they
   run, and what they made is frozen (``gc.freeze``: moved into the collector's permanent
   generation, which its passes do not walk) before it is switched on again.
2. :func:`settle_heap`, once a terminal application has drawn its first frame (the person is
   reading it, so the pause delays nothing they wait for; ``ui/heap.py`` hooks it up): unfreeze,
   run a full collection (so no garbage is frozen, and the cycles an earlier application left
   behind are freed), freeze the survivors. Later passes walk only objects made after that.
3. :func:`frozen_start`, around a whole ``ask`` command: what the command froze is handed back
   to the collector at the end, so a program that runs the command in its own process keeps a
   collector that sees everything.

Reference counting still frees frozen objects; a frozen object that becomes part of an
unreachable cycle waits for the next settling. A host that turned the collector off
(``gc.isenabled()`` false) keeps managing its heap: nothing here switches it on or freezes.
CPython can only unfreeze everything at once, so objects a host froze before calling ``ask``
are thawed by a settling too, and frozen again with the survivors right after it.

This module imports nothing of the package: the command line uses it before anything else.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_off", "collector_paused", "frozen_start", "settle_heap"]


@contextlib.contextmanager
def collector_off(*, freeze: bool = False) -> Iterator[None]:
    """The collector off inside (work that allocates much and frees nothing, such as decoding
    a session file); with ``freeze``, what was made inside is frozen before it runs again.
    Nothing changes when it was off already."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        gc.enable()


def collector_paused() -> contextlib.AbstractContextManager[None]:
    """The collector off while ``ask`` imports what it needs, and what the imports made frozen
    (moment 1 of the module docstring)."""
    return collector_off(freeze=True)


@contextlib.contextmanager
def frozen_start() -> Iterator[None]:
    """Around a whole command (moment 3): if nothing was frozen when it started, everything
    frozen since is handed back to the collector at the end. Objects someone else froze first
    stay as they were."""
    thaw = gc.get_freeze_count() == 0
    try:
        yield
    finally:
        if thaw:
            gc.unfreeze()


def settle_heap() -> bool:
    """Unfreeze, collect, freeze the survivors (moment 2); False when the collector is off."""
    if not gc.isenabled():
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return True
