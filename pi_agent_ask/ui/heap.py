"""Keep the cyclic garbage collector's full passes out of the keystroke path.

A full collection walks every tracked object in the process. After start-up that is the
whole import graph, prompt_toolkit's layout and the loaded runtime: tens of thousands of
objects that live until exit. Once every few hundred keys a full pass over them took about
20 ms, and it landed inside a keystroke (the p99 of ``just bench typing``).

:func:`settle_heap` runs when a terminal application has drawn its first frame (the person
is reading it, so the pause delays nothing they wait for). It unfreezes what an earlier
application froze, runs a full collection (so no garbage is frozen, and the cycles an earlier
application left behind are freed), then calls ``gc.freeze()``. This moves every survivor into
the collector's permanent generation, and later passes walk only objects made after that
point. Reference counting still frees frozen objects; a frozen object that becomes part of an
unreachable cycle waits for the next application's first frame.

Nothing happens when the host turned the collector off (``gc.isenabled()``): a host that
manages its heap keeps doing so.
"""

from __future__ import annotations

import gc
from typing import Any

from prompt_toolkit.application import Application

__all__ = ["settle_after_first_frame", "settle_heap"]


def settle_heap() -> bool:
    """Unfreeze, collect, freeze the survivors; False when the collector is off (see the
    module docstring)."""
    if not gc.isenabled():
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return True


def settle_after_first_frame(app: Application[Any]) -> None:
    """Call :func:`settle_heap` once, right after ``app`` drew its first frame."""

    def first_frame(_app: object) -> None:
        app.after_render -= first_frame
        settle_heap()

    app.after_render += first_frame
