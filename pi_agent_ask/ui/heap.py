"""Settle the heap once a terminal application's first frame is on screen.

The collector policy itself (why, and the other moments it acts at) is ``pi_agent_ask/heap.py``;
this module only hooks :func:`~pi_agent_ask.heap.settle_heap` to an application's first render.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_agent_ask.heap import settle_heap

if TYPE_CHECKING:
    from prompt_toolkit.application import Application

__all__ = ["settle_after_first_frame", "settle_heap"]


def settle_after_first_frame(app: Application[Any]) -> None:
    """Call :func:`~pi_agent_ask.heap.settle_heap` once, right after ``app`` drew its first
    frame."""

    def first_frame(_app: object) -> None:
        app.after_render -= first_frame
        settle_heap()

    app.after_render += first_frame
